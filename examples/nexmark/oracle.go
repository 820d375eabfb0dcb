package nexmark

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The oracles compute each query's result as a batch over all the
// events, from the reference SQL, in plain Go that shares no code with
// the jobs: an append-only query's oracle returns its rows (a multiset,
// in no particular order); an updating query's returns the final row of
// every key, with Version 0.

func oracleBids(events []Event) []Bid {
	var out []Bid
	for _, e := range events {
		if e.Type == BidEvent {
			out = append(out, e.Bid)
		}
	}
	return out
}

// OracleQ0 is SELECT auction, bidder, price, dateTime, extra FROM bid.
func OracleQ0(events []Event) []BidRow {
	var out []BidRow
	for _, b := range oracleBids(events) {
		out = append(out, BidRow{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra})
	}
	return out
}

// OracleQ1 is SELECT auction, bidder, 0.908 * price, dateTime, extra FROM bid.
func OracleQ1(events []Event) []Q1Row {
	var out []Q1Row
	for _, b := range oracleBids(events) {
		// DECIMAL(23, 3): 0.908 is 908 thousandths, price an integer.
		out = append(out, Q1Row{b.Auction, b.Bidder, 908 * b.Price, b.DateTime, b.Extra})
	}
	return out
}

// OracleQ2 is SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0.
func OracleQ2(events []Event) []Q2Row {
	var out []Q2Row
	for _, b := range oracleBids(events) {
		if b.Auction%123 == 0 {
			out = append(out, Q2Row{b.Auction, b.Price})
		}
	}
	return out
}

// OracleQ3 is the inner join of auctions of category 10 with persons in
// OR, ID or CA on seller = id.
func OracleQ3(events []Event) []Q3Row {
	var out []Q3Row
	for _, a := range events {
		if a.Type != AuctionEvent || a.Auction.Category != 10 {
			continue
		}
		for _, p := range events {
			if p.Type == PersonEvent && p.Person.ID == a.Auction.Seller && slices.Contains([]string{"OR", "ID", "CA"}, p.Person.State) {
				out = append(out, Q3Row{p.Person.Name, p.Person.City, p.Person.State, a.Auction.ID})
			}
		}
	}
	return out
}

// oracleFinals is, per auction, MAX(B.price) over the bids with A.id =
// B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires (auctions
// without such a bid have no row).
func oracleFinals(events []Event) map[Auction]int64 {
	byAuction := map[int64][]Bid{}
	for _, b := range oracleBids(events) {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	finals := map[Auction]int64{}
	for _, e := range events {
		if e.Type != AuctionEvent {
			continue
		}
		a := e.Auction
		for _, b := range byAuction[a.ID] {
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				if f, ok := finals[a]; !ok || b.Price > f {
					finals[a] = b.Price
				}
			}
		}
	}
	return finals
}

// OracleQ4 is AVG(final) per category of the auctions' winning prices.
func OracleQ4(events []Event) map[int64]Q4Row {
	sum, n := map[int64]int64{}, map[int64]int64{}
	for a, f := range oracleFinals(events) {
		sum[a.Category] += f
		n[a.Category]++
	}
	out := map[int64]Q4Row{}
	for c := range sum {
		out[c] = Q4Row{Category: c, Final: sum[c] / n[c]}
	}
	return out
}

// OracleQ5 counts bids per auction in HOP windows of 10 s every 2 s and
// keeps, per window, the auctions whose count is the window's maximum.
func OracleQ5(events []Event) []Q5Row {
	type key struct{ start, auction int64 }
	counts := map[key]int64{}
	for _, b := range oracleBids(events) {
		// The windows [s, s+10 s) holding t: s a multiple of 2 s in
		// (t-10 s, t].
		last := int64(math.Floor(float64(b.DateTime)/2000)) * 2000
		for s := last; s > b.DateTime-10_000; s -= 2000 {
			counts[key{s, b.Auction}]++
		}
	}
	maxOf := map[int64]int64{}
	for k, n := range counts {
		maxOf[k.start] = max(maxOf[k.start], n)
	}
	var out []Q5Row
	for k, n := range counts {
		if n >= maxOf[k.start] {
			out = append(out, Q5Row{Auction: k.auction, Num: n, Start: k.start})
		}
	}
	return out
}

// OracleQ7 returns the bids whose price is the maximum of a TUMBLE window
// of 10 s and whose time is BETWEEN the window's end - 10 s AND its end.
func OracleQ7(events []Event) []BidRow {
	bs := oracleBids(events)
	maxOf := map[int64]int64{} // window end → max price
	for _, b := range bs {
		end := (b.DateTime/10_000 + 1) * 10_000
		if p, ok := maxOf[end]; !ok || b.Price > p {
			maxOf[end] = b.Price
		}
	}
	var out []BidRow
	for end, p := range maxOf {
		for _, b := range bs {
			if b.Price == p && b.DateTime >= end-10_000 && b.DateTime <= end {
				out = append(out, BidRow{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra})
			}
		}
	}
	return out
}

// OracleQ8 joins persons grouped by (id, name, 10 s TUMBLE window) with
// auctions grouped by (seller, window) on id = seller and the window.
func OracleQ8(events []Event) []Q8Row {
	type pk struct {
		id    int64
		name  string
		start int64
	}
	type ak struct{ seller, start int64 }
	ps, as := map[pk]bool{}, map[ak]bool{}
	for _, e := range events {
		switch e.Type {
		case PersonEvent:
			ps[pk{e.Person.ID, e.Person.Name, e.Person.DateTime / 10_000 * 10_000}] = true
		case AuctionEvent:
			as[ak{e.Auction.Seller, e.Auction.DateTime / 10_000 * 10_000}] = true
		}
	}
	var out []Q8Row
	for p := range ps {
		if as[ak{p.id, p.start}] {
			out = append(out, Q8Row{p.id, p.name, p.start})
		}
	}
	return out
}

// compareWinners orders bids by price descending, dateTime ascending,
// then bidder, channel, url and extra ascending: the reference's ORDER BY,
// made total.
func compareWinners(a, b Bid) int {
	return cmp.Or(cmp.Compare(b.Price, a.Price), cmp.Compare(a.DateTime, b.DateTime), cmp.Compare(a.Bidder, b.Bidder),
		strings.Compare(a.Channel, b.Channel), strings.Compare(a.URL, b.URL), strings.Compare(a.Extra, b.Extra))
}

// OracleQ9 is, per auction, the first bid by compareWinners among those
// with A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires.
func OracleQ9(events []Event) map[int64]Q9Row {
	byAuction := map[int64][]Bid{}
	for _, b := range oracleBids(events) {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	out := map[int64]Q9Row{}
	for _, e := range events {
		if e.Type != AuctionEvent {
			continue
		}
		a := e.Auction
		var in []Bid
		for _, b := range byAuction[a.ID] {
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				in = append(in, b)
			}
		}
		if len(in) > 0 {
			out[a.ID] = Q9Row{Auction: a, Bid: slices.MinFunc(in, compareWinners)}
		}
	}
	return out
}

// OracleQ11 groups each bidder's bids into SESSION windows with a 10 s
// gap: bids closer than the gap (or exactly at it: the windows touch)
// share a session, which ends a gap after its last bid.
func OracleQ11(events []Event) []Q11Row {
	times := map[int64][]int64{}
	for _, b := range oracleBids(events) {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	var out []Q11Row
	for bidder, ts := range times {
		slices.Sort(ts)
		cur := Q11Row{Bidder: bidder, Count: 1, Start: ts[0], End: ts[0] + 10_000}
		for _, t := range ts[1:] {
			if t <= cur.End {
				cur.Count++
				cur.End = max(cur.End, t+10_000)
				continue
			}
			out = append(out, cur)
			cur = Q11Row{Bidder: bidder, Count: 1, Start: t, End: t + 10_000}
		}
		out = append(out, cur)
	}
	return out
}

// OracleQ12 is what q12 must count whatever the processing times: each
// bidder's number of bids.
func OracleQ12(events []Event) map[int64]int64 {
	out := map[int64]int64{}
	for _, b := range oracleBids(events) {
		out[b.Bidder]++
	}
	return out
}

// OracleQ14 filters 1,000,000 < 0.908 * price < 50,000,000 and labels the
// HOUR of dateTime (UTC).
func OracleQ14(events []Event) []Q14Row {
	var out []Q14Row
	for _, b := range oracleBids(events) {
		euros := 0.908 * float64(b.Price)
		if !(euros > 1e6 && euros < 5e7) {
			continue
		}
		h := time.UnixMilli(b.DateTime).UTC().Hour()
		typ := "otherTime"
		if h >= 8 && h <= 18 {
			typ = "dayTime"
		} else if h <= 6 || h >= 20 {
			typ = "nightTime"
		}
		c := 0
		for _, r := range b.Extra {
			if r == 'c' {
				c++
			}
		}
		out = append(out, Q14Row{b.Auction, b.Bidder, 908 * b.Price, typ, b.DateTime, b.Extra, int64(c)})
	}
	return out
}

// oracleStats computes the counts of q15 and q16 over a group's bids.
func oracleStats(bs []Bid) Stats {
	in := []func(p int64) bool{
		func(int64) bool { return true },
		func(p int64) bool { return p < 10000 },
		func(p int64) bool { return p >= 10000 && p < 1000000 },
		func(p int64) bool { return p >= 1000000 },
	}
	var s Stats
	for i, f := range in {
		bidders, auctions := map[int64]bool{}, map[int64]bool{}
		for _, b := range bs {
			if f(b.Price) {
				s.Bids[i]++
				bidders[b.Bidder] = true
				auctions[b.Auction] = true
			}
		}
		s.Bidders[i], s.Auctions[i] = int64(len(bidders)), int64(len(auctions))
	}
	return s
}

func oracleDay(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02") }

// OracleQ15 groups the bids by DATE_FORMAT(dateTime, 'yyyy-MM-dd').
func OracleQ15(events []Event) map[string]Q15Row {
	groups := map[string][]Bid{}
	for _, b := range oracleBids(events) {
		groups[oracleDay(b.DateTime)] = append(groups[oracleDay(b.DateTime)], b)
	}
	out := map[string]Q15Row{}
	for d, bs := range groups {
		out[d] = Q15Row{Day: d, Stats: oracleStats(bs)}
	}
	return out
}

// OracleQ16 groups the bids by channel and day, with max(HH:mm).
func OracleQ16(events []Event) map[[2]string]Q16Row {
	groups := map[[2]string][]Bid{}
	for _, b := range oracleBids(events) {
		k := [2]string{b.Channel, oracleDay(b.DateTime)}
		groups[k] = append(groups[k], b)
	}
	out := map[[2]string]Q16Row{}
	for k, bs := range groups {
		minute := ""
		for _, b := range bs {
			minute = max(minute, time.UnixMilli(b.DateTime).UTC().Format("15:04"))
		}
		out[k] = Q16Row{Channel: k[0], Day: k[1], Minute: minute, Stats: oracleStats(bs)}
	}
	return out
}

// Q17OracleKey is q17's group in the oracle.
type Q17OracleKey struct {
	Auction int64
	Day     string
}

// OracleQ17 groups the bids by auction and day.
func OracleQ17(events []Event) map[Q17OracleKey]Q17Row {
	groups := map[Q17OracleKey][]Bid{}
	for _, b := range oracleBids(events) {
		k := Q17OracleKey{b.Auction, oracleDay(b.DateTime)}
		groups[k] = append(groups[k], b)
	}
	out := map[Q17OracleKey]Q17Row{}
	for k, bs := range groups {
		s := oracleStats(bs)
		r := Q17Row{Auction: k.Auction, Day: k.Day, Bids: s.Bids, MinPrice: math.MaxInt64, MaxPrice: math.MinInt64}
		for _, b := range bs {
			r.MinPrice, r.MaxPrice = min(r.MinPrice, b.Price), max(r.MaxPrice, b.Price)
			r.SumPrice += b.Price
		}
		r.AvgPrice = r.SumPrice / int64(len(bs))
		out[k] = r
	}
	return out
}

// OracleQ18 is, per (bidder, auction), the bid with the latest dateTime;
// among bids at the same time the one with the highest price, then the
// greatest by channel, url and extra.
func OracleQ18(events []Event) map[[2]int64]Q18Row {
	out := map[[2]int64]Q18Row{}
	for _, b := range oracleBids(events) {
		k := [2]int64{b.Bidder, b.Auction}
		cur, ok := out[k]
		c := cur.Bid
		if !ok || cmp.Or(cmp.Compare(b.DateTime, c.DateTime), cmp.Compare(b.Price, c.Price), strings.Compare(b.Channel, c.Channel),
			strings.Compare(b.URL, c.URL), strings.Compare(b.Extra, c.Extra)) > 0 {
			out[k] = Q18Row{Bid: b}
		}
	}
	return out
}

// OracleQ19 is, per auction, its first ten bids by compareWinners.
func OracleQ19(events []Event) map[int64]Q19Row {
	groups := map[int64][]Bid{}
	for _, b := range oracleBids(events) {
		groups[b.Auction] = append(groups[b.Auction], b)
	}
	out := map[int64]Q19Row{}
	for a, bs := range groups {
		slices.SortFunc(bs, compareWinners)
		out[a] = Q19Row{Auction: a, Top: bs[:min(len(bs), 10)]}
	}
	return out
}

// OracleQ20 is the inner join of bids with auctions of category 10 on
// auction = id.
func OracleQ20(events []Event) []Q20Row {
	as := map[int64]Auction{}
	for _, e := range events {
		if e.Type == AuctionEvent && e.Auction.Category == 10 {
			as[e.Auction.ID] = e.Auction
		}
	}
	var out []Q20Row
	for _, b := range oracleBids(events) {
		if a, ok := as[b.Auction]; ok {
			out = append(out, Q20Row{b, a})
		}
	}
	return out
}

var channelIDPattern = regexp.MustCompile(`(&|^)channel_id=([^&]*)`)

// OracleQ21 is q21's CASE over lower(channel) and REGEXP_EXTRACT.
func OracleQ21(events []Event) []Q21Row {
	fixed := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
	var out []Q21Row
	for _, b := range oracleBids(events) {
		id, ok := fixed[strings.ToLower(b.Channel)]
		if !ok {
			m := channelIDPattern.FindStringSubmatch(b.URL)
			if m == nil {
				continue
			}
			id = m[2]
		}
		out = append(out, Q21Row{b.Auction, b.Bidder, b.Price, b.Channel, id})
	}
	return out
}

// OracleQ22 is SPLIT_INDEX(url, '/', 3), 4 and 5.
func OracleQ22(events []Event) []Q22Row {
	var out []Q22Row
	for _, b := range oracleBids(events) {
		parts := strings.Split(b.URL, "/")
		at := func(i int) string {
			if i < len(parts) {
				return parts[i]
			}
			return ""
		}
		out = append(out, Q22Row{b.Auction, b.Bidder, b.Price, b.Channel, at(3), at(4), at(5)})
	}
	return out
}
