package nexmark

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// The reference windows.
const (
	windowSize = 10 * time.Second // q5's size, q7's and q8's tumbling windows, q11's session gap, q12's windows
	hopSlide   = 2 * time.Second  // q5's slide
	dayMs      = 24 * 60 * 60 * 1000
	windowMs   = int64(windowSize / time.Millisecond)
)

// Query is one query of the suite, by the reference's name.
type Query struct {
	Name string
	// Build adds the query to a job reading events, writing its result to
	// a sink that discards it (what the benchmark measures).
	Build func(events stream.Stream[Event])
}

func discard[T any](s stream.Stream[T]) {
	stream.SinkTo(s, connector.Discard[T](), stream.Uid("sink"))
}

// Queries returns the suite's queries in order.
func Queries() []Query {
	return []Query{
		{"q0", func(e stream.Stream[Event]) { discard(Q0(e)) }},
		{"q1", func(e stream.Stream[Event]) { discard(Q1(e)) }},
		{"q2", func(e stream.Stream[Event]) { discard(Q2(e)) }},
		{"q3", func(e stream.Stream[Event]) { discard(Q3(e)) }},
		{"q4", func(e stream.Stream[Event]) { discard(Q4(e)) }},
		{"q5", func(e stream.Stream[Event]) { discard(Q5(e)) }},
		{"q7", func(e stream.Stream[Event]) { discard(Q7(e)) }},
		{"q8", func(e stream.Stream[Event]) { discard(Q8(e)) }},
		{"q9", func(e stream.Stream[Event]) { discard(Q9(e)) }},
		{"q11", func(e stream.Stream[Event]) { discard(Q11(e)) }},
		{"q12", func(e stream.Stream[Event]) { discard(Q12(e)) }},
		{"q14", func(e stream.Stream[Event]) { discard(Q14(e)) }},
		{"q15", func(e stream.Stream[Event]) { discard(Q15(e)) }},
		{"q16", func(e stream.Stream[Event]) { discard(Q16(e)) }},
		{"q17", func(e stream.Stream[Event]) { discard(Q17(e)) }},
		{"q18", func(e stream.Stream[Event]) { discard(Q18(e)) }},
		{"q19", func(e stream.Stream[Event]) { discard(Q19(e)) }},
		{"q20", func(e stream.Stream[Event]) { discard(Q20(e)) }},
		{"q21", func(e stream.Stream[Event]) { discard(Q21(e)) }},
		{"q22", func(e stream.Stream[Event]) { discard(Q22(e)) }},
	}
}

// QueryByName returns the named query.
func QueryByName(name string) (Query, error) {
	var names []string
	for _, q := range Queries() {
		if q.Name == name {
			return q, nil
		}
		names = append(names, q.Name)
	}
	return Query{}, fmt.Errorf("nexmark: no query %q (have %s)", name, strings.Join(names, ", "))
}

// bids is the bid view (ddl_views.sql).
func bids(events stream.Stream[Event]) stream.Stream[Bid] {
	return stream.Map(stream.Filter(events, func(e Event) bool { return e.Type == BidEvent }, stream.Uid("bids-filter")),
		func(e Event) Bid { return e.Bid }, stream.Uid("bids"))
}

func auctions(events stream.Stream[Event]) stream.Stream[Auction] {
	return stream.Map(stream.Filter(events, func(e Event) bool { return e.Type == AuctionEvent }, stream.Uid("auctions-filter")),
		func(e Event) Auction { return e.Auction }, stream.Uid("auctions"))
}

func persons(events stream.Stream[Event]) stream.Stream[Person] {
	return stream.Map(stream.Filter(events, func(e Event) bool { return e.Type == PersonEvent }, stream.Uid("persons-filter")),
		func(e Event) Person { return e.Person }, stream.Uid("persons"))
}

// Q0 passes the bids through.
func Q0(events stream.Stream[Event]) stream.Stream[BidRow] {
	return stream.Map(stream.Filter(events, func(e Event) bool { return e.Type == BidEvent }, stream.Uid("q0-filter")),
		func(e Event) BidRow {
			b := &e.Bid
			return BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
		}, stream.Uid("q0"))
}

// Q1 converts bid prices from dollars to euros (0.908 * price).
func Q1(events stream.Stream[Event]) stream.Stream[Q1Row] {
	return stream.Map(bids(events), func(b Bid) Q1Row {
		return Q1Row{Auction: b.Auction, Bidder: b.Bidder, PriceMilli: b.Price * 908, DateTime: b.DateTime, Extra: b.Extra}
	}, stream.Uid("q1"))
}

// Q2 selects the bids on every 123rd auction.
func Q2(events stream.Stream[Event]) stream.Stream[Q2Row] {
	sel := stream.Filter(bids(events), func(b Bid) bool { return b.Auction%123 == 0 }, stream.Uid("q2-filter"))
	return stream.Map(sel, func(b Bid) Q2Row { return Q2Row{Auction: b.Auction, Price: b.Price} }, stream.Uid("q2"))
}

// rank is a price's rank in q15–q17: 1 below 10,000, 2 below 1,000,000,
// 3 above.
func rank(price int64) int {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 3
}

// day is the UTC day number of a time in Unix milliseconds.
func day(ms int64) int64 {
	d := ms / dayMs
	if ms < 0 && ms%dayMs != 0 {
		d--
	}
	return d
}

func dayString(d int64) string { return FormatTime(d * dayMs)[:10] }

// Q3 joins the auctions of category 10 with their sellers when those live
// in Oregon, Idaho or California: a regular inner join, without windows.
func Q3(events stream.Stream[Event]) stream.Stream[Q3Row] {
	as := stream.Filter(auctions(events), func(a Auction) bool { return a.Category == 10 }, stream.Uid("q3-auctions"))
	ps := stream.Filter(persons(events), func(p Person) bool { return p.State == "OR" || p.State == "ID" || p.State == "CA" }, stream.Uid("q3-persons"))
	cs := stream.Connect(stream.KeyBy(as, func(a Auction) int64 { return a.Seller }), stream.KeyBy(ps, func(p Person) int64 { return p.ID }))
	return stream.CoProcess(cs, stream.CoProcessFunction[int64, Auction, Person, Q3Row](&q3Join{}), stream.Uid("q3"))
}

type q3Seller struct{ Name, City, State string }

type q3Join struct {
	seller  state.ValueState[q3Seller]
	pending state.ListState[int64] // auction ids that came before their seller
}

func (j *q3Join) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if j.seller, err = stream.ValueState[q3Seller](rc, "seller"); err != nil {
		return err
	}
	j.pending, err = stream.ListState[int64](rc, "pending")
	return err
}

func (j *q3Join) ProcessElement1(ctx *stream.Context[int64, Q3Row], a Auction) error {
	if s, ok := j.seller.Value(); ok {
		return ctx.Emit(Q3Row{Name: s.Name, City: s.City, State: s.State, ID: a.ID})
	}
	j.pending.Add(a.ID)
	return nil
}

func (j *q3Join) ProcessElement2(ctx *stream.Context[int64, Q3Row], p Person) error {
	s := q3Seller{p.Name, p.City, p.State}
	j.seller.Update(s)
	for _, id := range j.pending.Get() {
		if err := ctx.Emit(Q3Row{Name: s.Name, City: s.City, State: s.State, ID: id}); err != nil {
			return err
		}
	}
	j.pending.Clear()
	return nil
}

// q4Change is an auction's winning price changing: from Old (if Had) to
// New.
type q4Change struct {
	Category, Auction int64
	Had               bool
	Old, New          int64
}

// bidAt is what q4 keeps of a bid that came before its auction.
type bidAt struct{ Price, DateTime int64 }

// Q4 is the average winning price per category: the highest bid of each
// auction placed while it was open, averaged over the auctions of a
// category. Both aggregations update as bids come; the first keeps the
// auction and its highest bid so far per auction id, the second the sum
// and count per category.
func Q4(events stream.Stream[Event]) stream.Stream[Q4Row] {
	cs := stream.Connect(stream.KeyBy(auctions(events), func(a Auction) int64 { return a.ID }),
		stream.KeyBy(bids(events), func(b Bid) int64 { return b.Auction }))
	changes := stream.CoProcess(cs, stream.CoProcessFunction[int64, Auction, Bid, q4Change](&q4Max{}), stream.Uid("q4-max"))
	return stream.Process(stream.KeyBy(changes, func(c q4Change) int64 { return c.Category }),
		stream.KeyedProcessFunction[int64, q4Change, Q4Row](&q4Avg{}), stream.Uid("q4"))
}

type q4Auction struct{ DateTime, Expires, Category int64 }

type q4Max struct {
	auction state.ValueState[q4Auction]
	max     state.ValueState[int64]
	pending state.ListState[bidAt]
}

func (f *q4Max) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.auction, err = stream.ValueState[q4Auction](rc, "auction"); err != nil {
		return err
	}
	if f.max, err = stream.ValueState[int64](rc, "max"); err != nil {
		return err
	}
	f.pending, err = stream.ListState[bidAt](rc, "pending")
	return err
}

func (f *q4Max) offer(ctx *stream.Context[int64, q4Change], a q4Auction, b bidAt) error {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return nil
	}
	old, had := f.max.Value()
	if had && b.Price <= old {
		return nil
	}
	f.max.Update(b.Price)
	return ctx.Emit(q4Change{Category: a.Category, Auction: ctx.Key(), Had: had, Old: old, New: b.Price})
}

func (f *q4Max) ProcessElement1(ctx *stream.Context[int64, q4Change], a Auction) error {
	qa := q4Auction{a.DateTime, a.Expires, a.Category}
	f.auction.Update(qa)
	for _, b := range f.pending.Get() {
		if err := f.offer(ctx, qa, b); err != nil {
			return err
		}
	}
	f.pending.Clear()
	return nil
}

func (f *q4Max) ProcessElement2(ctx *stream.Context[int64, q4Change], b Bid) error {
	if a, ok := f.auction.Value(); ok {
		return f.offer(ctx, a, bidAt{b.Price, b.DateTime})
	}
	f.pending.Add(bidAt{b.Price, b.DateTime})
	return nil
}

type q4Sum struct{ Sum, Count, Version int64 }

type q4Avg struct{ sum state.ValueState[q4Sum] }

func (f *q4Avg) Open(rc *stream.RuntimeContext[int64]) (err error) {
	f.sum, err = stream.ValueState[q4Sum](rc, "sum")
	return err
}

func (f *q4Avg) ProcessElement(ctx *stream.Context[int64, Q4Row], c q4Change) error {
	s, _ := f.sum.Value()
	if c.Had {
		s.Sum += c.New - c.Old
	} else {
		s.Sum += c.New
		s.Count++
	}
	s.Version++
	f.sum.Update(s)
	return ctx.Emit(Q4Row{Category: c.Category, Version: s.Version, Final: s.Sum / s.Count})
}

// q5Count is an auction's bids in a sliding window.
type q5Count struct {
	Auction, Num int64
	Start, End   int64
}

type countAgg[T any] struct{}

func (countAgg[T]) CreateAccumulator() int64  { return 0 }
func (countAgg[T]) Add(_ T, acc int64) int64  { return acc + 1 }
func (countAgg[T]) GetResult(acc int64) int64 { return acc }
func (countAgg[T]) Merge(a, b int64) int64    { return a + b }

// Q5 finds the auctions with the most bids in each sliding window of 10
// seconds every 2 seconds: a count per auction and window, then, once
// event time passes the window, those of the window whose count is the
// highest.
func Q5(events stream.Stream[Event]) stream.Stream[Q5Row] {
	counts := stream.Aggregate(
		stream.Windowed(stream.KeyBy(bids(events), func(b Bid) int64 { return b.Auction }), stream.SlidingEventTimeWindows(windowSize, hopSlide)),
		stream.AggregateFunction[Bid, int64, int64](countAgg[Bid]{}),
		func(auction int64, w stream.Window, n int64) q5Count {
			return q5Count{Auction: auction, Num: n, Start: w.Start, End: w.End}
		}, stream.Uid("q5-counts"))
	return stream.Process(stream.KeyBy(counts, func(c q5Count) int64 { return c.Start }),
		stream.KeyedProcessFunction[int64, q5Count, Q5Row](&q5Max{}), stream.Uid("q5"))
}

// q5Max keeps, per window, the auctions with the highest count so far,
// and emits them when the window's last count has come: the counts carry
// the window's last timestamp, and the watermark passes it only after the
// counting operator fired every auction's window.
type q5Max struct {
	max  state.ValueState[int64]
	tops state.ListState[int64]
}

func (f *q5Max) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.max, err = stream.ValueState[int64](rc, "max"); err != nil {
		return err
	}
	f.tops, err = stream.ListState[int64](rc, "tops")
	return err
}

func (f *q5Max) ProcessElement(ctx *stream.Context[int64, Q5Row], c q5Count) error {
	m, ok := f.max.Value()
	switch {
	case !ok || c.Num > m:
		f.max.Update(c.Num)
		f.tops.Update([]int64{c.Auction})
		ctx.RegisterEventTimeTimer(c.End - 1)
	case c.Num == m:
		f.tops.Add(c.Auction)
	}
	return nil
}

func (f *q5Max) OnTimer(ctx *stream.Context[int64, Q5Row], _ stream.Timer) error {
	m, _ := f.max.Value()
	for _, a := range f.tops.Get() {
		if err := ctx.Emit(Q5Row{Auction: a, Num: m, Start: ctx.Key()}); err != nil {
			return err
		}
	}
	f.max.Clear()
	f.tops.Clear()
	return nil
}

// q7Bid is a bid sent to the tumbling window whose maximum it may match:
// its own (Member), and the previous one too when it falls on the window
// boundary, which BETWEEN includes.
type q7Bid struct {
	Window int64
	Member bool
	Bid    BidRow
}

// Q7 emits the bids whose price is the highest of a 10-second tumbling
// window and whose time lies in the window, its end included (the
// reference's BETWEEN window_end - 10 s AND window_end). The reference's
// SELECT lists B.price before B.bidder into columns named auction, bidder,
// price; the rows here keep each value under its own name.
func Q7(events stream.Stream[Event]) stream.Stream[BidRow] {
	routed := stream.FlatMap(bids(events), func(b Bid, emit func(q7Bid)) error {
		row := BidRow{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
		start := b.DateTime - mod(b.DateTime, windowMs)
		emit(q7Bid{Window: start, Member: true, Bid: row})
		if start == b.DateTime {
			emit(q7Bid{Window: start - windowMs, Bid: row})
		}
		return nil
	}, stream.Uid("q7-route"))
	return stream.Process(stream.KeyBy(routed, func(b q7Bid) int64 { return b.Window }),
		stream.KeyedProcessFunction[int64, q7Bid, BidRow](&q7Max{}), stream.Uid("q7"))
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// q7Max keeps a window's highest price, the member bids at it and every
// boundary bid of the next window (which does not count towards the
// maximum but matches it), until event time passes the window's end.
type q7Max struct {
	max        state.ValueState[int64]
	tops       state.ListState[BidRow]
	boundary   state.ListState[BidRow]
	registered state.ValueState[bool]
}

func (f *q7Max) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.max, err = stream.ValueState[int64](rc, "max"); err != nil {
		return err
	}
	if f.tops, err = stream.ListState[BidRow](rc, "tops"); err != nil {
		return err
	}
	if f.boundary, err = stream.ListState[BidRow](rc, "boundary"); err != nil {
		return err
	}
	f.registered, err = stream.ValueState[bool](rc, "registered")
	return err
}

func (f *q7Max) ProcessElement(ctx *stream.Context[int64, BidRow], b q7Bid) error {
	if _, ok := f.registered.Value(); !ok {
		f.registered.Update(true)
		ctx.RegisterEventTimeTimer(ctx.Key() + windowMs)
	}
	if !b.Member {
		f.boundary.Add(b.Bid)
		return nil
	}
	m, ok := f.max.Value()
	switch {
	case !ok || b.Bid.Price > m:
		f.max.Update(b.Bid.Price)
		f.tops.Update([]BidRow{b.Bid})
	case b.Bid.Price == m:
		f.tops.Add(b.Bid)
	}
	return nil
}

func (f *q7Max) OnTimer(ctx *stream.Context[int64, BidRow], _ stream.Timer) error {
	if m, ok := f.max.Value(); ok {
		for _, b := range append(f.tops.Get(), f.boundary.Get()...) {
			if b.Price != m {
				continue
			}
			if err := ctx.Emit(b); err != nil {
				return err
			}
		}
	}
	f.max.Clear()
	f.tops.Clear()
	f.boundary.Clear()
	f.registered.Clear()
	return nil
}

// Q8 emits the persons who created an auction in the 10-second tumbling
// window they signed up in: an event-time window join of persons and
// auctions on id = seller, emitted when event time passes the window.
func Q8(events stream.Stream[Event]) stream.Stream[Q8Row] {
	cs := stream.Connect(stream.KeyBy(persons(events), func(p Person) int64 { return p.ID }),
		stream.KeyBy(auctions(events), func(a Auction) int64 { return a.Seller }))
	return stream.CoProcess(cs, stream.CoProcessFunction[int64, Person, Auction, Q8Row](&q8Join{}), stream.Uid("q8"))
}

type q8Join struct {
	names   state.MapState[int64, string] // window start → the person's name
	sellers state.MapState[int64, bool]   // window start → an auction by the key
}

func (j *q8Join) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if j.names, err = stream.MapState[int64, string](rc, "names"); err != nil {
		return err
	}
	j.sellers, err = stream.MapState[int64, bool](rc, "sellers")
	return err
}

func (j *q8Join) ProcessElement1(ctx *stream.Context[int64, Q8Row], p Person) error {
	w := p.DateTime - mod(p.DateTime, windowMs)
	j.names.Put(w, p.Name)
	ctx.RegisterEventTimeTimer(w + windowMs - 1)
	return nil
}

func (j *q8Join) ProcessElement2(ctx *stream.Context[int64, Q8Row], a Auction) error {
	w := a.DateTime - mod(a.DateTime, windowMs)
	j.sellers.Put(w, true)
	ctx.RegisterEventTimeTimer(w + windowMs - 1)
	return nil
}

func (j *q8Join) OnTimer(ctx *stream.Context[int64, Q8Row], t stream.Timer) error {
	w := t.Timestamp + 1 - windowMs
	name, person := j.names.Get(w)
	_, seller := j.sellers.Get(w)
	j.names.Remove(w)
	j.sellers.Remove(w)
	if person && seller {
		return ctx.Emit(Q8Row{ID: ctx.Key(), Name: name, Start: w})
	}
	return nil
}

// betterBid orders q9's candidates: the higher price wins, then the
// earlier bid; bids equal in both are ordered by their other fields so
// that the winner does not depend on arrival order.
func betterBid(a, b Bid) bool {
	if a.Price != b.Price {
		return a.Price > b.Price
	}
	if a.DateTime != b.DateTime {
		return a.DateTime < b.DateTime
	}
	return lessFields(a, b)
}

// lessFields orders bids equal in price and time by bidder, channel, URL
// and extra.
func lessFields(a, b Bid) bool {
	if a.Bidder != b.Bidder {
		return a.Bidder < b.Bidder
	}
	if a.Channel != b.Channel {
		return a.Channel < b.Channel
	}
	if a.URL != b.URL {
		return a.URL < b.URL
	}
	return a.Extra < b.Extra
}

// Q9 is each auction's winning bid: the highest (then earliest) bid
// placed while the auction was open. It updates as better bids come.
func Q9(events stream.Stream[Event]) stream.Stream[Q9Row] {
	cs := stream.Connect(stream.KeyBy(auctions(events), func(a Auction) int64 { return a.ID }),
		stream.KeyBy(bids(events), func(b Bid) int64 { return b.Auction }))
	return stream.CoProcess(cs, stream.CoProcessFunction[int64, Auction, Bid, Q9Row](&q9Winner{}), stream.Uid("q9"))
}

type q9Best struct {
	Version int64
	Bid     Bid
}

type q9Winner struct {
	auction state.ValueState[Auction]
	best    state.ValueState[q9Best]
	pending state.ListState[Bid]
}

func (f *q9Winner) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.auction, err = stream.ValueState[Auction](rc, "auction"); err != nil {
		return err
	}
	if f.best, err = stream.ValueState[q9Best](rc, "best"); err != nil {
		return err
	}
	f.pending, err = stream.ListState[Bid](rc, "pending")
	return err
}

func (f *q9Winner) offer(ctx *stream.Context[int64, Q9Row], a Auction, b Bid) error {
	if b.DateTime < a.DateTime || b.DateTime > a.Expires {
		return nil
	}
	best, had := f.best.Value()
	if had && !betterBid(b, best.Bid) {
		return nil
	}
	best = q9Best{Version: best.Version + 1, Bid: b}
	f.best.Update(best)
	return ctx.Emit(Q9Row{Version: best.Version, Auction: a, Bid: b})
}

func (f *q9Winner) ProcessElement1(ctx *stream.Context[int64, Q9Row], a Auction) error {
	f.auction.Update(a)
	for _, b := range f.pending.Get() {
		if err := f.offer(ctx, a, b); err != nil {
			return err
		}
	}
	f.pending.Clear()
	return nil
}

func (f *q9Winner) ProcessElement2(ctx *stream.Context[int64, Q9Row], b Bid) error {
	if a, ok := f.auction.Value(); ok {
		return f.offer(ctx, a, b)
	}
	f.pending.Add(b)
	return nil
}

// Q11 counts each bidder's bids per session: event-time session windows
// with a 10-second gap.
func Q11(events stream.Stream[Event]) stream.Stream[Q11Row] {
	return stream.Aggregate(
		stream.Windowed(stream.KeyBy(bids(events), func(b Bid) int64 { return b.Bidder }), stream.EventTimeSessionWindows(windowSize)),
		stream.AggregateFunction[Bid, int64, int64](countAgg[Bid]{}),
		func(bidder int64, w stream.Window, n int64) Q11Row {
			return Q11Row{Bidder: bidder, Count: n, Start: w.Start, End: w.End}
		}, stream.Uid("q11"))
}

// Q12 counts each bidder's bids per 10-second tumbling window of
// processing time (PROCTIME()). A bid falls into the window of the
// moment the operator takes it in, read from the job's clock, and a
// processing-time timer at the window's end emits it; at the end of a
// bounded input the final watermark emits the windows still open, so
// that no bid goes uncounted. Which window a bid lands in depends on when
// it arrives, so no oracle predicts the rows; what is exact is that each
// bid is counted once: over the rows of a bidder the counts add up to its
// bids, with no window twice, whatever failed and was replayed.
func Q12(events stream.Stream[Event]) stream.Stream[Q12Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) int64 { return b.Bidder }),
		stream.KeyedProcessFunction[int64, Bid, Q12Row](&q12Count{}), stream.Uid("q12"))
}

type q12Count struct {
	counts state.MapState[int64, int64] // window start → bids
	flush  state.ValueState[bool]
}

func (f *q12Count) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.counts, err = stream.MapState[int64, int64](rc, "counts"); err != nil {
		return err
	}
	f.flush, err = stream.ValueState[bool](rc, "flush")
	return err
}

func (f *q12Count) ProcessElement(ctx *stream.Context[int64, Q12Row], _ Bid) error {
	now := ctx.CurrentProcessingTime()
	w := now - mod(now, windowMs)
	n, _ := f.counts.Get(w)
	if n == 0 {
		ctx.RegisterProcessingTimeTimer(w + windowMs)
	}
	f.counts.Put(w, n+1)
	if _, ok := f.flush.Value(); !ok {
		f.flush.Update(true)
		ctx.RegisterEventTimeTimer(math.MaxInt64)
	}
	return nil
}

func (f *q12Count) OnTimer(ctx *stream.Context[int64, Q12Row], t stream.Timer) error {
	var ws []int64
	if t.ProcessingTime {
		ws = []int64{t.Timestamp - windowMs}
	} else {
		for w := range f.counts.All() {
			ws = append(ws, w)
		}
		slices.Sort(ws)
		f.flush.Clear()
	}
	for _, w := range ws {
		n, ok := f.counts.Get(w)
		if !ok {
			continue
		}
		f.counts.Remove(w)
		if err := ctx.Emit(Q12Row{Bidder: ctx.Key(), Count: n, Start: w, End: w + windowMs}); err != nil {
			return err
		}
	}
	return nil
}

// Q14 converts the price of the bids between 1,000,000 and 50,000,000
// euros, labels the time of day (UTC hour) and counts the 'c' in extra.
func Q14(events stream.Stream[Event]) stream.Stream[Q14Row] {
	return stream.FlatMap(bids(events), func(b Bid, emit func(Q14Row)) error {
		p := b.Price * 908 // thousandths of a euro
		if p <= 1_000_000_000 || p >= 50_000_000_000 {
			return nil
		}
		typ := "otherTime"
		switch h := mod(b.DateTime, dayMs) / 3_600_000; {
		case h >= 8 && h <= 18:
			typ = "dayTime"
		case h <= 6 || h >= 20:
			typ = "nightTime"
		}
		emit(Q14Row{Auction: b.Auction, Bidder: b.Bidder, PriceMilli: p, BidTimeType: typ, DateTime: b.DateTime, Extra: b.Extra,
			CCounts: int64(strings.Count(b.Extra, "c"))})
		return nil
	}, stream.Uid("q14"))
}

// distinctStats maintains Stats over bids, with the distinct bidders and
// auctions per rank kept in map states: a bit per rank, bit 0 for any.
type distinctStats struct {
	bidders, auctions state.MapState[int64, uint8]
}

func openDistinct[K comparable](rc *stream.RuntimeContext[K]) (bidders, auctions state.MapState[int64, uint8], err error) {
	if bidders, err = stream.MapState[int64, uint8](rc, "bidders"); err != nil {
		return nil, nil, err
	}
	auctions, err = stream.MapState[int64, uint8](rc, "auctions")
	return bidders, auctions, err
}

func addDistinct(m state.MapState[int64, uint8], id int64, r int, counts *[4]int64) {
	seen, _ := m.Get(id)
	add := seen
	for _, i := range [2]int{0, r} {
		if seen&(1<<i) == 0 {
			counts[i]++
			add |= 1 << i
		}
	}
	if add != seen {
		m.Put(id, add)
	}
}

func (d *distinctStats) add(s *Stats, b Bid) {
	r := rank(b.Price)
	s.Bids[0]++
	s.Bids[r]++
	addDistinct(d.bidders, b.Bidder, r, &s.Bidders)
	addDistinct(d.auctions, b.Auction, r, &s.Auctions)
}

// Q15 is the bid statistics of each day: counts of bids, distinct
// bidders and distinct auctions, over all bids and per price rank. It
// updates with every bid.
func Q15(events stream.Stream[Event]) stream.Stream[Q15Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) int64 { return day(b.DateTime) }),
		stream.KeyedProcessFunction[int64, Bid, Q15Row](&q15Stats{}), stream.Uid("q15"))
}

type q15Stats struct {
	distinctStats
	row state.ValueState[Q15Row]
}

func (f *q15Stats) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if f.bidders, f.auctions, err = openDistinct(rc); err != nil {
		return err
	}
	f.row, err = stream.ValueState[Q15Row](rc, "row")
	return err
}

func (f *q15Stats) ProcessElement(ctx *stream.Context[int64, Q15Row], b Bid) error {
	row, ok := f.row.Value()
	if !ok {
		row.Day = dayString(ctx.Key())
	}
	row.Version++
	f.add(&row.Stats, b)
	f.row.Update(row)
	return ctx.Emit(row)
}

// Q16Key is q16's group: a channel and a day.
type Q16Key struct {
	Channel string
	Day     int64
}

// Q16 is Q15 per channel, with the day's latest minute.
func Q16(events stream.Stream[Event]) stream.Stream[Q16Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) Q16Key { return Q16Key{b.Channel, day(b.DateTime)} }),
		stream.KeyedProcessFunction[Q16Key, Bid, Q16Row](&q16Stats{}), stream.Uid("q16"))
}

type q16Stats struct {
	distinctStats
	row state.ValueState[q16State]
}

// q16State is a group's row and its latest minute of the day, which is
// formatted only when it changes.
type q16State struct {
	Row    Q16Row
	Minute int64
}

func (f *q16Stats) Open(rc *stream.RuntimeContext[Q16Key]) (err error) {
	if f.bidders, f.auctions, err = openDistinct(rc); err != nil {
		return err
	}
	f.row, err = stream.ValueState[q16State](rc, "row")
	return err
}

func (f *q16Stats) ProcessElement(ctx *stream.Context[Q16Key, Q16Row], b Bid) error {
	st, ok := f.row.Value()
	if !ok {
		st.Row.Channel, st.Row.Day, st.Minute = b.Channel, dayString(ctx.Key().Day), -1
	}
	st.Row.Version++
	if m := mod(b.DateTime, dayMs) / 60_000; m > st.Minute {
		st.Minute = m
		st.Row.Minute = fmt.Sprintf("%02d:%02d", m/60, m%60)
	}
	f.add(&st.Row.Stats, b)
	f.row.Update(st)
	return ctx.Emit(st.Row)
}

// Q17Key is q17's group: an auction and a day.
type Q17Key struct {
	Auction int64
	Day     int64
}

// Q17 is each auction's bid statistics per day: counts per price rank,
// minimum, maximum, mean and sum of the prices. It updates with every
// bid.
func Q17(events stream.Stream[Event]) stream.Stream[Q17Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) Q17Key { return Q17Key{b.Auction, day(b.DateTime)} }),
		stream.KeyedProcessFunction[Q17Key, Bid, Q17Row](&q17Stats{}), stream.Uid("q17"))
}

type q17Stats struct{ row state.ValueState[Q17Row] }

func (f *q17Stats) Open(rc *stream.RuntimeContext[Q17Key]) (err error) {
	f.row, err = stream.ValueState[Q17Row](rc, "row")
	return err
}

func (f *q17Stats) ProcessElement(ctx *stream.Context[Q17Key, Q17Row], b Bid) error {
	row, ok := f.row.Value()
	if !ok {
		row = Q17Row{Auction: b.Auction, Day: dayString(ctx.Key().Day), MinPrice: b.Price, MaxPrice: b.Price}
	}
	row.Version++
	row.Bids[0]++
	row.Bids[rank(b.Price)]++
	row.MinPrice, row.MaxPrice = min(row.MinPrice, b.Price), max(row.MaxPrice, b.Price)
	row.SumPrice += b.Price
	row.AvgPrice = row.SumPrice / row.Bids[0]
	f.row.Update(row)
	return ctx.Emit(row)
}

// Q18Key is q18's partition: a bidder and an auction.
type Q18Key struct{ Bidder, Auction int64 }

// Q18 keeps each bidder's latest bid on each auction (ROW_NUMBER over
// dateTime DESC, first row): a deduplication that updates when a later
// bid comes. Bids at the same time are ordered by their other fields
// (the greater wins), so the result does not depend on arrival order.
func Q18(events stream.Stream[Event]) stream.Stream[Q18Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) Q18Key { return Q18Key{b.Bidder, b.Auction} }),
		stream.KeyedProcessFunction[Q18Key, Bid, Q18Row](&q18Last{}), stream.Uid("q18"))
}

type q18Last struct{ last state.ValueState[Q18Row] }

func (f *q18Last) Open(rc *stream.RuntimeContext[Q18Key]) (err error) {
	f.last, err = stream.ValueState[Q18Row](rc, "last")
	return err
}

func (f *q18Last) ProcessElement(ctx *stream.Context[Q18Key, Q18Row], b Bid) error {
	last, ok := f.last.Value()
	if ok {
		l := last.Bid
		later := b.DateTime > l.DateTime || b.DateTime == l.DateTime && (b.Price > l.Price || b.Price == l.Price && lessFields(l, b))
		if !later {
			return nil
		}
	}
	last = Q18Row{Version: last.Version + 1, Bid: b}
	f.last.Update(last)
	return ctx.Emit(last)
}

// Q19 keeps each auction's ten highest bids (ROW_NUMBER over price DESC,
// rank_number <= 10), updating when a bid enters them. Bids of equal
// price are ordered earliest first, then by their other fields.
func Q19(events stream.Stream[Event]) stream.Stream[Q19Row] {
	return stream.Process(stream.KeyBy(bids(events), func(b Bid) int64 { return b.Auction }),
		stream.KeyedProcessFunction[int64, Bid, Q19Row](&q19Top{}), stream.Uid("q19"))
}

const topN = 10

type q19Top struct{ top state.ValueState[Q19Row] }

func (f *q19Top) Open(rc *stream.RuntimeContext[int64]) (err error) {
	f.top, err = stream.ValueState[Q19Row](rc, "top")
	return err
}

func (f *q19Top) ProcessElement(ctx *stream.Context[int64, Q19Row], b Bid) error {
	row, _ := f.top.Value()
	i := sort.Search(len(row.Top), func(i int) bool { return betterBid(b, row.Top[i]) })
	if i >= topN {
		return nil
	}
	top := make([]Bid, 0, min(len(row.Top)+1, topN))
	top = append(append(append(top, row.Top[:i]...), b), row.Top[i:min(len(row.Top), topN-1)]...)
	row = Q19Row{Auction: b.Auction, Version: row.Version + 1, Top: top}
	f.top.Update(row)
	return ctx.Emit(row)
}

// Q20 joins the bids with their auctions of category 10: a regular inner
// join on auction = id, without windows.
func Q20(events stream.Stream[Event]) stream.Stream[Q20Row] {
	cs := stream.Connect(stream.KeyBy(auctions(events), func(a Auction) int64 { return a.ID }),
		stream.KeyBy(bids(events), func(b Bid) int64 { return b.Auction }))
	return stream.CoProcess(cs, stream.CoProcessFunction[int64, Auction, Bid, Q20Row](&q20Join{}), stream.Uid("q20"))
}

type q20Join struct {
	auction state.ValueState[Auction] // Category 0: an auction of another category
	pending state.ListState[Bid]
}

func (j *q20Join) Open(rc *stream.RuntimeContext[int64]) (err error) {
	if j.auction, err = stream.ValueState[Auction](rc, "auction"); err != nil {
		return err
	}
	j.pending, err = stream.ListState[Bid](rc, "pending")
	return err
}

func (j *q20Join) ProcessElement1(ctx *stream.Context[int64, Q20Row], a Auction) error {
	if a.Category != 10 {
		j.auction.Update(Auction{ID: a.ID})
		j.pending.Clear()
		return nil
	}
	j.auction.Update(a)
	for _, b := range j.pending.Get() {
		if err := ctx.Emit(Q20Row{Bid: b, Auction: a}); err != nil {
			return err
		}
	}
	j.pending.Clear()
	return nil
}

func (j *q20Join) ProcessElement2(ctx *stream.Context[int64, Q20Row], b Bid) error {
	a, ok := j.auction.Value()
	switch {
	case !ok:
		j.pending.Add(b)
	case a.Category == 10:
		return ctx.Emit(Q20Row{Bid: b, Auction: a})
	}
	return nil
}

// channelID is REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2): the
// value of the first channel_id parameter at the start of url or after
// an '&'.
func channelID(url string) (string, bool) {
	const key = "channel_id="
	for i := 0; ; {
		j := strings.Index(url[i:], key)
		if j < 0 {
			return "", false
		}
		j += i
		if j == 0 || url[j-1] == '&' {
			v := url[j+len(key):]
			if k := strings.IndexByte(v, '&'); k >= 0 {
				v = v[:k]
			}
			return v, true
		}
		i = j + 1
	}
}

// Q21 extracts each bid's channel id: a fixed one for the four hot
// channels, else the channel_id parameter of its URL; bids with neither
// are dropped.
func Q21(events stream.Stream[Event]) stream.Stream[Q21Row] {
	return stream.FlatMap(bids(events), func(b Bid, emit func(Q21Row)) error {
		id, ok := "", true
		switch strings.ToLower(b.Channel) {
		case "apple":
			id = "0"
		case "google":
			id = "1"
		case "facebook":
			id = "2"
		case "baidu":
			id = "3"
		default:
			id, ok = channelID(b.URL)
		}
		if ok {
			emit(Q21Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id})
		}
		return nil
	}, stream.Uid("q21"))
}

// splitIndex is SPLIT_INDEX(s, sep, i): the i-th field, "" if there is
// none (SQL's NULL).
func splitIndex(s string, sep byte, i int) string {
	for ; i > 0; i-- {
		k := strings.IndexByte(s, sep)
		if k < 0 {
			return ""
		}
		s = s[k+1:]
	}
	if k := strings.IndexByte(s, sep); k >= 0 {
		return s[:k]
	}
	return s
}

// Q22 splits each bid's URL into its first three directories.
func Q22(events stream.Stream[Event]) stream.Stream[Q22Row] {
	return stream.Map(bids(events), func(b Bid) Q22Row {
		return Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
			Dir1: splitIndex(b.URL, '/', 3), Dir2: splitIndex(b.URL, '/', 4), Dir3: splitIndex(b.URL, '/', 5)}
	}, stream.Uid("q22"))
}
