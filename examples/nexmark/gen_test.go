package nexmark

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
)

func testGenerator(t *testing.T, mod func(*GenConfig)) *Generator {
	t.Helper()
	cfg := DefaultGenConfig()
	cfg.Events, cfg.Splits = 50_000, 3
	if mod != nil {
		mod(&cfg)
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGeneratorModel checks the reference model's invariants: the
// proportions, consecutive person and auction ids derived from the event
// id, bids on auctions that exist or are about to, hot auctions, bidders
// and sellers at about the configured ratios, timestamps from the rate.
func TestGeneratorModel(t *testing.T) {
	g := testGenerator(t, nil)
	cfg := g.Config()
	var persons, auctions, bids, hotAuction, hotBidder, hotSeller int64
	for split := range cfg.Splits {
		first, count := cfg.SplitRange(split)
		nextPerson, nextAuction := int64(-1), int64(-1)
		for n := range count {
			e := first + n
			ev := g.Event(split, n)
			if want := cfg.BaseTime + n*1000/int64(cfg.Rate); ev.Time() != want {
				t.Fatalf("split %d event %d at %d, want %d", split, n, ev.Time(), want)
			}
			switch ev.Type {
			case PersonEvent:
				persons++
				if e%50 != 0 {
					t.Fatalf("event id %d is a person", e)
				}
				if nextPerson >= 0 && ev.Person.ID != nextPerson {
					t.Fatalf("person id %d, want %d", ev.Person.ID, nextPerson)
				}
				nextPerson = ev.Person.ID + 1
				if ev.Person.ID != e/50+FirstPersonID {
					t.Fatalf("event %d: person id %d", e, ev.Person.ID)
				}
			case AuctionEvent:
				auctions++
				a := ev.Auction
				if nextAuction >= 0 && a.ID != nextAuction {
					t.Fatalf("auction id %d, want %d", a.ID, nextAuction)
				}
				nextAuction = a.ID + 1
				if a.Expires <= a.DateTime || a.Category < 10 || a.Category > 14 || a.Reserve < a.InitialBid {
					t.Fatalf("bad auction %+v", a)
				}
				if (a.Seller-FirstPersonID)%100 == 0 {
					hotSeller++
				}
			case BidEvent:
				bids++
				b := ev.Bid
				last := cfg.lastBase0AuctionID(e) + FirstAuctionID
				if b.Auction > last+auctionIDLead || b.Auction < FirstAuctionID {
					t.Fatalf("event %d: bid on auction %d, the last is %d", e, b.Auction, last)
				}
				if (b.Auction-FirstAuctionID)%100 == 0 {
					hotAuction++
				}
				// The reference adds FirstPersonID twice to a bidder.
				if (b.Bidder-2*FirstPersonID)%100 == 1 {
					hotBidder++
				}
				if b.Price < 100 || b.Price > 100_000_000 || !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
					t.Fatalf("bad bid %+v", b)
				}
			}
		}
	}
	if persons*50 != cfg.Events || auctions*50 != 3*cfg.Events || bids*50 != 46*cfg.Events {
		t.Fatalf("%d persons, %d auctions, %d bids of %d events: not 1/3/46 per 50", persons, auctions, bids, cfg.Events)
	}
	// With hot ratios 2, 4, 4: at least half the bids on a hot auction,
	// three quarters by a hot bidder and of the auctions by a hot seller
	// (a random pick may hit a hot one too).
	frac := func(n, of int64) float64 { return float64(n) / float64(of) }
	if f := frac(hotAuction, bids); f < 0.48 || f > 0.56 {
		t.Errorf("%.3f of the bids on hot auctions, want about 1/2", f)
	}
	if f := frac(hotBidder, bids); f < 0.73 || f > 0.78 {
		t.Errorf("%.3f of the bids by hot bidders, want about 3/4", f)
	}
	if f := frac(hotSeller, auctions); f < 0.73 || f > 0.78 {
		t.Errorf("%.3f of the auctions by hot sellers, want about 3/4", f)
	}
}

// TestGeneratorDeterministic: the same seed gives the same events, in any
// order of generation; another seed other ones.
func TestGeneratorDeterministic(t *testing.T) {
	a, b := testGenerator(t, nil), testGenerator(t, nil)
	c := testGenerator(t, func(c *GenConfig) { c.Seed = 2 })
	same := 0
	for n := int64(16_000); n >= 0; n -= 7 {
		x := a.Event(1, n)
		if !reflect.DeepEqual(x, b.Event(1, n)) {
			t.Fatalf("event %d differs between two generators of one seed", n)
		}
		if reflect.DeepEqual(x, c.Event(1, n)) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("%d events equal under seeds 1 and 2", same)
	}
}

// TestSourceReplaysFromAnyOffset: a reader opened at a split's offset
// reads exactly the events a reader from the start reads from there on,
// and the splits together read every event once.
func TestSourceReplaysFromAnyOffset(t *testing.T) {
	g := testGenerator(t, func(c *GenConfig) { c.Events = 5_000 })
	src, err := NewSource(g, 100)
	if err != nil {
		t.Fatal(err)
	}
	read := func(starts []connector.SplitStart) map[string][]Event {
		r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, starts)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]Event{}
		for {
			f, err := r.Fetch(context.Background())
			if errors.Is(err, connector.ErrEndOfInput) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range f.Records {
				if f.Timestamps[i] != ev.Time() {
					t.Fatalf("timestamp %d of an event at %d", f.Timestamps[i], ev.Time())
				}
			}
			out[f.Split] = append(out[f.Split], f.Records...)
		}
	}
	ids, _ := src.Splits(context.Background())
	var all []connector.SplitStart
	for _, id := range ids {
		all = append(all, connector.SplitStart{Split: id, Offset: connector.StartDefault})
	}
	full := read(all)
	var flat []Event
	for _, id := range ids {
		flat = append(flat, full[id]...)
	}
	if !reflect.DeepEqual(flat, g.All()) {
		t.Fatal("the splits do not read All's events")
	}
	part := read([]connector.SplitStart{{Split: ids[1], Offset: 777}})
	if !reflect.DeepEqual(part[ids[1]], full[ids[1]][777:]) {
		t.Fatal("a reader from offset 777 reads other events")
	}
	if _, err := src.NewReader(context.Background(), connector.ReaderInfo{}, []connector.SplitStart{{Split: ids[0], Offset: 1 << 40}}); !connector.IsPermanent(err) {
		t.Fatalf("an offset past the split's end: %v, want a permanent error", err)
	}
}

// TestWriteFilesRoundTrip: the files hold every event of its split, in
// order, in nexmark-flink's row format, and read back to the same events.
func TestWriteFilesRoundTrip(t *testing.T) {
	g := testGenerator(t, func(c *GenConfig) { c.Events, c.Splits = 3_000, 2 })
	names, err := g.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for split, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		var n int64
		for sc.Scan() {
			var row map[string]any
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatal(err)
			}
			if _, ok := row["event_type"]; !ok {
				t.Fatalf("%s: a row without event_type: %s", name, sc.Text())
			}
			var ev Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatal(err)
			}
			if want := g.Event(split, n); !reflect.DeepEqual(ev, want) {
				t.Fatalf("%s line %d: %+v, want %+v", name, n+1, ev, want)
			}
			n++
		}
		f.Close()
		if _, count := g.Config().SplitRange(split); n != count {
			t.Fatalf("%s: %d lines, want %d", name, n, count)
		}
	}
}

func TestGenConfigValidate(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Events, cfg.Rate, cfg.HotAuctionRatio = 0, -1, 0
	err := cfg.Validate()
	for _, want := range []string{"events 0", "rate -1", "hot ratios"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want an error with %q", err, want)
		}
	}
}

// TestStringHelpers checks the jobs' string functions against the SQL
// functions' definitions on edge cases the generated URLs lack.
func TestStringHelpers(t *testing.T) {
	for _, tc := range []struct {
		url, id string
		ok      bool
	}{
		{"https://x/item.htm?query=1&channel_id=42", "42", true},
		{"channel_id=7&a=1", "7", true},
		{"https://x/?xchannel_id=1&channel_id=2&channel_id=3", "2", true},
		{"https://x/?channel_id=1", "", false}, // after '?', not '&' or the start
		{"a=1&channel_id=", "", true},          // an empty match is not NULL
		{"https://x/?query=1", "", false},
	} {
		id, ok := channelID(tc.url)
		if id != tc.id || ok != tc.ok {
			t.Errorf("channelID(%q) = %q, %v; want %q, %v", tc.url, id, ok, tc.id, tc.ok)
		}
	}
	if got := splitIndex("a/b", '/', 3); got != "" {
		t.Errorf("splitIndex past the end = %q", got)
	}
	if got := splitIndex("https://www.nexmark.com/x/y/z/item.htm", '/', 4); got != "y" {
		t.Errorf("splitIndex = %q, want y", got)
	}
}
