package nexmark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/stream"
)

// Comparing a query's rows with another system's: the reference suite's
// sink table of each query (its columns, in order, with their SQL types)
// and a canonical text of a row of it, which weir's rows and the rows
// another system wrote (a changelog in Debezium JSON, as Flink's
// filesystem sink writes it) both become. Two systems agree on a query
// when the final contents of its table, as multisets of canonical rows,
// are equal — for a ROW_NUMBER query, as multisets of rows cut down to
// the columns the query decides (Table.Determined).

// ColumnKind is how a column's values are compared.
type ColumnKind byte

// The column kinds.
const (
	BigInt    ColumnKind = 'i' // BIGINT
	Decimal3  ColumnKind = 'd' // DECIMAL(23, 3), exactly, in thousandths
	Varchar   ColumnKind = 's' // VARCHAR (NULL apart from '')
	Timestamp ColumnKind = 't' // TIMESTAMP(3), to the millisecond
)

// Column is a column of a query's sink table.
type Column struct {
	Name string
	Kind ColumnKind
}

// Table is a query's sink table as the reference suite declares it.
type Table struct {
	Columns []Column
	// Updating: the query's result is an updating table; its final
	// content is compared (weir: each key's row of the highest Version;
	// the changelog: inserts less retractions).
	Updating bool
	// Comparable is false where no two runs agree by design (q12's
	// processing-time windows).
	Comparable bool
	// Determined, for a ROW_NUMBER query, are the columns its PARTITION BY
	// and ORDER BY decide. Among rows tied on the ORDER BY, the SQL leaves
	// which row gets which number to the order they arrive in, so two
	// correct runs agree on these columns and may differ in the others
	// (DiffTies). Nil: every column is decided.
	Determined []string
}

func cols(spec string) []Column {
	var out []Column
	for _, f := range strings.Fields(spec) {
		name, kind, _ := strings.Cut(f, ":")
		out = append(out, Column{Name: name, Kind: ColumnKind(kind[0])})
	}
	return out
}

const (
	bidCols   = "auction:i bidder:i price:i channel:s url:s dateTime:t extra:s"
	statsCols = "total_bids:i rank1_bids:i rank2_bids:i rank3_bids:i total_bidders:i rank1_bidders:i rank2_bidders:i rank3_bidders:i " +
		"total_auctions:i rank1_auctions:i rank2_auctions:i rank3_auctions:i"
)

// tables are the sink tables of nexmark-flink's queries/*.sql.
var tables = map[string]Table{
	"q0": {Columns: cols("auction:i bidder:i price:i dateTime:t extra:s")},
	"q1": {Columns: cols("auction:i bidder:i price:d dateTime:t extra:s")},
	"q2": {Columns: cols("auction:i price:i")},
	"q3": {Columns: cols("name:s city:s state:s id:i")},
	"q4": {Columns: cols("id:i final:i"), Updating: true},
	"q5": {Columns: cols("auction:i num:i")},
	"q7": {Columns: cols("auction:i bidder:i price:i dateTime:t extra:s")},
	"q8": {Columns: cols("id:i name:s stime:t")},
	"q9": {Columns: cols("id:i itemName:s description:s initialBid:i reserve:i dateTime:t expires:t seller:i category:i extra:s auction:i bidder:i price:i bid_dateTime:t bid_extra:s"), Updating: true,
		Determined: strings.Fields("id itemName description initialBid reserve dateTime expires seller category extra auction price bid_dateTime")},
	"q11": {Columns: cols("bidder:i bid_count:i starttime:t endtime:t")},
	"q12": {Columns: cols("bidder:i bid_count:i starttime:t endtime:t")},
	"q14": {Columns: cols("auction:i bidder:i price:d bidTimeType:s dateTime:t extra:s c_counts:i")},
	"q15": {Columns: cols("day:s " + statsCols), Updating: true},
	"q16": {Columns: cols("channel:s day:s minute:s " + statsCols), Updating: true},
	"q17": {Columns: cols("auction:i day:s total_bids:i rank1_bids:i rank2_bids:i rank3_bids:i min_price:i max_price:i avg_price:i sum_price:i"), Updating: true},
	"q18": {Columns: cols(bidCols), Updating: true, Determined: strings.Fields("auction bidder dateTime")},
	"q19": {Columns: cols(bidCols + " rank_number:i"), Updating: true, Determined: strings.Fields("auction price rank_number")},
	"q20": {Columns: cols("auction:i bidder:i price:i channel:s url:s bid_dateTime:t bid_extra:s itemName:s description:s initialBid:i reserve:i auction_dateTime:t expires:t seller:i category:i auction_extra:s")},
	"q21": {Columns: cols("auction:i bidder:i price:i channel:s channel_id:s")},
	"q22": {Columns: cols("auction:i bidder:i price:i channel:s dir1:s dir2:s dir3:s")},
}

func init() {
	for name, t := range tables {
		t.Comparable = name != "q12"
		tables[name] = t
	}
}

// TableOf returns the sink table of query name.
func TableOf(name string) (Table, error) {
	t, ok := tables[name]
	if !ok {
		return Table{}, fmt.Errorf("nexmark: no table of query %q", name)
	}
	return t, nil
}

// The canonical text of a value.
func vi(v int64) string  { return strconv.FormatInt(v, 10) }
func vs(s string) string { return strconv.Quote(s) }
func vt(ms int64) string { return FormatTime(ms) }
func vd(milli int64) string {
	sign := ""
	if milli < 0 {
		sign, milli = "-", -milli
	}
	return fmt.Sprintf("%s%d.%03d", sign, milli/1000, milli%1000)
}

// The separators of a line of weir's rows: key, version and the row's
// canonical values. Canonical values hold neither (strings are quoted).
const (
	fieldSep = "\x1f"
	valueSep = "\t"
)

// line is a row as weir's Lines write it.
func line(key string, version int64, vals ...string) string {
	return key + fieldSep + vi(version) + fieldSep + strings.Join(vals, valueSep)
}

func bidVals(b Bid) []string {
	return []string{vi(b.Auction), vi(b.Bidder), vi(b.Price), vs(b.Channel), vs(b.URL), vt(b.DateTime), vs(b.Extra)}
}

func statsVals(s Stats) []string {
	var v []string
	for _, a := range [3][4]int64{s.Bids, s.Bidders, s.Auctions} {
		for _, n := range a {
			v = append(v, vi(n))
		}
	}
	return v
}

// asLines turns a query's rows into lines: f emits each row's lines.
func asLines[T any](s stream.Stream[T], f func(T, func(string))) stream.Stream[string] {
	return stream.FlatMap(s, func(r T, emit func(string)) error {
		f(r, emit)
		return nil
	}, stream.Uid("lines"))
}

// linesOf are the queries' rows as lines: the key and version of an
// updating query's row, and its canonical values in the sink table's
// order.
var linesOf = map[string]func(stream.Stream[Event]) stream.Stream[string]{
	"q0": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q0(e), func(r BidRow, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Bidder), vi(r.Price), vt(r.DateTime), vs(r.Extra)))
		})
	},
	"q1": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q1(e), func(r Q1Row, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Bidder), vd(r.PriceMilli), vt(r.DateTime), vs(r.Extra)))
		})
	},
	"q2": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q2(e), func(r Q2Row, emit func(string)) { emit(line("", 0, vi(r.Auction), vi(r.Price))) })
	},
	"q3": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q3(e), func(r Q3Row, emit func(string)) { emit(line("", 0, vs(r.Name), vs(r.City), vs(r.State), vi(r.ID))) })
	},
	"q4": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q4(e), func(r Q4Row, emit func(string)) { emit(line(vi(r.Category), r.Version, vi(r.Category), vi(r.Final))) })
	},
	"q5": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q5(e), func(r Q5Row, emit func(string)) { emit(line("", 0, vi(r.Auction), vi(r.Num))) })
	},
	// The reference's SELECT puts the price in the column bidder and the
	// bidder in the column price.
	"q7": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q7(e), func(r BidRow, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Price), vi(r.Bidder), vt(r.DateTime), vs(r.Extra)))
		})
	},
	"q8": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q8(e), func(r Q8Row, emit func(string)) { emit(line("", 0, vi(r.ID), vs(r.Name), vt(r.Start))) })
	},
	"q9": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q9(e), func(r Q9Row, emit func(string)) {
			a, b := r.Auction, r.Bid
			emit(line(vi(a.ID), r.Version, vi(a.ID), vs(a.ItemName), vs(a.Description), vi(a.InitialBid), vi(a.Reserve), vt(a.DateTime),
				vt(a.Expires), vi(a.Seller), vi(a.Category), vs(a.Extra), vi(b.Auction), vi(b.Bidder), vi(b.Price), vt(b.DateTime), vs(b.Extra)))
		})
	},
	"q11": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q11(e), func(r Q11Row, emit func(string)) {
			emit(line("", 0, vi(r.Bidder), vi(r.Count), vt(r.Start), vt(r.End)))
		})
	},
	"q12": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q12(e), func(r Q12Row, emit func(string)) {
			emit(line("", 0, vi(r.Bidder), vi(r.Count), vt(r.Start), vt(r.End)))
		})
	},
	"q14": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q14(e), func(r Q14Row, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Bidder), vd(r.PriceMilli), vs(r.BidTimeType), vt(r.DateTime), vs(r.Extra), vi(r.CCounts)))
		})
	},
	"q15": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q15(e), func(r Q15Row, emit func(string)) {
			emit(line(vs(r.Day), r.Version, append([]string{vs(r.Day)}, statsVals(r.Stats)...)...))
		})
	},
	"q16": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q16(e), func(r Q16Row, emit func(string)) {
			emit(line(vs(r.Channel)+" "+vs(r.Day), r.Version, append([]string{vs(r.Channel), vs(r.Day), vs(r.Minute)}, statsVals(r.Stats)...)...))
		})
	},
	"q17": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q17(e), func(r Q17Row, emit func(string)) {
			emit(line(vi(r.Auction)+" "+vs(r.Day), r.Version, vi(r.Auction), vs(r.Day), vi(r.Bids[0]), vi(r.Bids[1]), vi(r.Bids[2]), vi(r.Bids[3]),
				vi(r.MinPrice), vi(r.MaxPrice), vi(r.AvgPrice), vi(r.SumPrice)))
		})
	},
	"q18": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q18(e), func(r Q18Row, emit func(string)) {
			emit(line(vi(r.Bid.Bidder)+" "+vi(r.Bid.Auction), r.Version, bidVals(r.Bid)...))
		})
	},
	"q19": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q19(e), func(r Q19Row, emit func(string)) {
			for i, b := range r.Top {
				emit(line(vi(r.Auction), r.Version, append(bidVals(b), vi(int64(i+1)))...))
			}
		})
	},
	"q20": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q20(e), func(r Q20Row, emit func(string)) {
			b, a := r.Bid, r.Auction
			emit(line("", 0, vi(b.Auction), vi(b.Bidder), vi(b.Price), vs(b.Channel), vs(b.URL), vt(b.DateTime), vs(b.Extra),
				vs(a.ItemName), vs(a.Description), vi(a.InitialBid), vi(a.Reserve), vt(a.DateTime), vt(a.Expires), vi(a.Seller), vi(a.Category), vs(a.Extra)))
		})
	},
	"q21": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q21(e), func(r Q21Row, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Bidder), vi(r.Price), vs(r.Channel), vs(r.ChannelID)))
		})
	},
	"q22": func(e stream.Stream[Event]) stream.Stream[string] {
		return asLines(Q22(e), func(r Q22Row, emit func(string)) {
			emit(line("", 0, vi(r.Auction), vi(r.Bidder), vi(r.Price), vs(r.Channel), vs(r.Dir1), vs(r.Dir2), vs(r.Dir3)))
		})
	},
}

// Lines adds query name to a job reading events and returns its rows as
// lines (FinalRows reads them back): what a file sink writes to compare
// weir's result with another system's.
func Lines(name string, events stream.Stream[Event]) (stream.Stream[string], error) {
	f, ok := linesOf[name]
	if !ok {
		var none stream.Stream[string]
		return none, fmt.Errorf("nexmark: no query %q", name)
	}
	return f(events), nil
}

// FinalRows returns the final content of a query's table from the lines
// weir's job wrote (Lines): every row of an append-only query; of an
// updating one, each key's rows of its highest version. Rows are
// canonical text, sorted.
func FinalRows(t Table, lines []string) ([]string, error) {
	type kv struct {
		version int64
		rows    []string
	}
	latest := map[string]*kv{}
	var rows []string
	for _, l := range lines {
		key, rest, ok1 := strings.Cut(l, fieldSep)
		ver, row, ok2 := strings.Cut(rest, fieldSep)
		v, err := strconv.ParseInt(ver, 10, 64)
		if !ok1 || !ok2 || err != nil {
			return nil, fmt.Errorf("nexmark: a line that is not key, version and row: %q", l)
		}
		if !t.Updating {
			rows = append(rows, row)
			continue
		}
		switch cur := latest[key]; {
		case cur == nil || v > cur.version:
			latest[key] = &kv{version: v, rows: []string{row}}
		case v == cur.version:
			cur.rows = append(cur.rows, row)
		}
	}
	for _, cur := range latest {
		rows = append(rows, cur.rows...)
	}
	slices.Sort(rows)
	return rows, nil
}

// ChangelogRows returns the final content of a query's table from a
// changelog in Debezium JSON, one change a line, as Flink's filesystem
// sink writes it with format debezium-json: "c" and "r" insert the row
// after, "d" retracts the row before, "u" does both. Rows are canonical
// text, sorted; a retraction of a row not there is an error.
func ChangelogRows(t Table, data []byte) ([]string, error) {
	count := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var change struct {
			Before, After map[string]json.RawMessage
			Op            string
		}
		if err := json.Unmarshal(sc.Bytes(), &change); err != nil {
			return nil, fmt.Errorf("nexmark: changelog line %d: %w", n, err)
		}
		apply := func(row map[string]json.RawMessage, d int) error {
			if row == nil {
				return fmt.Errorf("nexmark: changelog line %d: op %q without its row", n, change.Op)
			}
			c, err := canonical(t, row)
			if err != nil {
				return fmt.Errorf("nexmark: changelog line %d: %w", n, err)
			}
			count[c] += d
			return nil
		}
		var err error
		switch change.Op {
		case "c", "r":
			err = apply(change.After, 1)
		case "d":
			err = apply(change.Before, -1)
		case "u":
			if err = apply(change.Before, -1); err == nil {
				err = apply(change.After, 1)
			}
		default:
			err = fmt.Errorf("nexmark: changelog line %d: op %q", n, change.Op)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var rows []string
	for r, c := range count {
		if c < 0 {
			return nil, fmt.Errorf("nexmark: the changelog retracts %d times more than it inserted row %s", -c, r)
		}
		for range c {
			rows = append(rows, r)
		}
	}
	slices.Sort(rows)
	return rows, nil
}

// canonical is a JSON row's canonical text in t's column order.
func canonical(t Table, row map[string]json.RawMessage) (string, error) {
	vals := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		raw, ok := row[c.Name]
		if !ok {
			return "", fmt.Errorf("no column %s in %v", c.Name, row)
		}
		if string(raw) == "null" {
			vals[i] = "NULL"
			continue
		}
		var err error
		switch c.Kind {
		case BigInt:
			var v int64
			if err = json.Unmarshal(raw, &v); err == nil {
				vals[i] = vi(v)
			}
		case Decimal3:
			r, ok := new(big.Rat).SetString(strings.Trim(string(raw), `"`))
			if !ok {
				err = fmt.Errorf("not a decimal")
				break
			}
			r.Mul(r, big.NewRat(1000, 1))
			if !r.IsInt() || !r.Num().IsInt64() {
				err = fmt.Errorf("not a DECIMAL(23, 3) in range")
				break
			}
			vals[i] = vd(r.Num().Int64())
		case Varchar:
			var s string
			if err = json.Unmarshal(raw, &s); err == nil {
				vals[i] = vs(s)
			}
		case Timestamp:
			var s string
			if err = json.Unmarshal(raw, &s); err == nil {
				var ts time.Time
				// Flink's JSON format writes a TIMESTAMP as SQL text, its
				// fraction only as long as it needs; ISO-8601 has a 'T'.
				if ts, err = time.Parse("2006-01-02 15:04:05.999999999", strings.Replace(s, "T", " ", 1)); err == nil {
					vals[i] = vt(ts.UnixMilli())
				}
			}
		}
		if err != nil {
			return "", fmt.Errorf("column %s: %s: %w", c.Name, raw, err)
		}
	}
	return strings.Join(vals, valueSep), nil
}

// RowDiff is how two final contents of a table differ.
type RowDiff struct {
	OnlyA, OnlyB []string // rows (with multiplicity) in one and not the other
}

// OK says the contents are equal.
func (d RowDiff) OK() bool { return len(d.OnlyA) == 0 && len(d.OnlyB) == 0 }

// DiffRows compares two sorted multisets of rows.
func DiffRows(a, b []string) RowDiff {
	var d RowDiff
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			d.OnlyA = append(d.OnlyA, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			d.OnlyB = append(d.OnlyB, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return d
}

// Project returns rows (canonical rows of t, sorted or not) cut down to
// t's Determined columns, sorted: what two runs of a ROW_NUMBER query
// must agree on. It returns rows unchanged when every column is
// determined.
func (t Table) Project(rows []string) ([]string, error) {
	if t.Determined == nil {
		return rows, nil
	}
	idx := make([]int, len(t.Determined))
	for i, name := range t.Determined {
		idx[i] = slices.IndexFunc(t.Columns, func(c Column) bool { return c.Name == name })
		if idx[i] < 0 {
			return nil, fmt.Errorf("nexmark: determined column %q is not a column of the table", name)
		}
	}
	out := make([]string, len(rows))
	vals := make([]string, len(idx))
	for r, row := range rows {
		f := strings.Split(row, valueSep)
		if len(f) != len(t.Columns) {
			return nil, fmt.Errorf("nexmark: row %q has %d values, the table %d columns", row, len(f), len(t.Columns))
		}
		for i, c := range idx {
			vals[i] = f[c]
		}
		out[r] = strings.Join(vals, valueSep)
	}
	slices.Sort(out)
	return out, nil
}
