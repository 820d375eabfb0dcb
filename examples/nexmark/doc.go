// Package nexmark is the Nexmark benchmark in weir: the reference event
// generator (persons, auctions and bids of an online auction site, as
// Apache Beam's and nexmark-flink's NexmarkGenerator draws them) and the
// suite's queries as DataStream-style weir jobs, each with a batch oracle
// written from the reference SQL over the same events.
//
// # The generator
//
// Events are numbered. Event id e is a person if e mod 50 is 0, an
// auction if it is 1 to 3, a bid otherwise (the reference proportions
// 1/3/46), and every id a record carries is derived from e as the
// reference derives it (lastBase0PersonId, lastBase0AuctionId, the hot
// sellers, bidders and auctions, the active people and the auctions in
// flight). A record's fields are drawn from a random source seeded by
// (seed, e), so an event is a pure function of the configuration and its
// id: a split replays from any position, and the same events can be
// written to files (WriteFiles) for another system to read, or to a
// Kafka topic, split i into partition i (ProduceKafka), which a job reads
// with KafkaSource and FromKafka.
//
// The generator is split as the reference's GeneratorConfig.split is: split
// i of n generates a contiguous slice of event ids, on a timeline of its
// own that starts at BaseTime, one event every 1/Rate seconds of event
// time. Its timestamps never decrease, and the source's watermark trails
// them by the reference DDL's four seconds.
//
// # The queries
//
// Queries returns the queries by name (q0 … q22, as in nexmark-flink's
// queries/*.sql). Windowed queries use event time and the reference's
// windows. The reference's unwindowed aggregations, joins and Top-N
// (q4, q9, q15–q19) are continuous queries whose result is an updating
// table: their jobs emit a new row for a key each time its value changes,
// numbered by a per-key Version kept in keyed state, so exactly-once
// output is checkable (every version of a key once, no gap) and the last
// version of every key is the table's final content. q12 windows bids by
// processing time, which no oracle can predict: its check is that every
// bid is counted in exactly one window (see Q12).
package nexmark
