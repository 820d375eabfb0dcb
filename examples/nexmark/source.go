package nexmark

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/stream"
)

// WatermarkDelay is how far the source's watermark trails event time: the
// reference DDL's WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
const WatermarkDelay = 4 * time.Second

// Source generates a configuration's events in-process, one split per
// GenConfig split. A split's offset is the number of its events read, so
// a restore regenerates exactly the events a failure-free run read from
// there on. Each record's source timestamp is its event time.
type Source struct {
	gen   *Generator
	batch int
	// shift, if set, paces the source (Paced).
	shift func() (int64, error)
}

// NewSource returns a source of g's events, fetched batch at a time.
func NewSource(g *Generator, batch int) (*Source, error) {
	if batch < 1 {
		return nil, fmt.Errorf("nexmark: batch size %d: want at least 1", batch)
	}
	return &Source{gen: g, batch: batch}, nil
}

// Paced returns a source of the same events that releases each one no
// earlier than its event time plus a shift of wall-clock time, so that,
// on the wall clock shifted back, every event is read at its event time:
// a source at the configuration's rate (Rate events per second on each
// split). Each reader calls shift once, on its first fetch, for the shift
// in milliseconds (an error fails the fetch); every reader of a job must
// get the same one.
func (s *Source) Paced(shift func() (int64, error)) *Source {
	p := *s
	p.shift = shift
	return &p
}

// Events adds the source to a job with the reference's watermark.
func (s *Source) Events(env *stream.Environment) stream.Stream[Event] {
	return stream.FromSource[Event](env, s, "nexmark", stream.BoundedOutOfOrderness[Event](WatermarkDelay), stream.Uid("nexmark"))
}

func splitID(i int) string { return "nexmark-" + strconv.Itoa(i) }

// Splits implements connector.Source.
func (s *Source) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.gen.cfg.Splits)
	for i := range ids {
		ids[i] = splitID(i)
	}
	return ids, nil
}

// Bounded implements connector.Source: every split ends.
func (s *Source) Bounded() bool { return true }

// NewReader implements connector.Source.
func (s *Source) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[Event], error) {
	r := &reader{src: s}
	for _, sp := range splits {
		i, err := strconv.Atoi(strings.TrimPrefix(sp.Split, "nexmark-"))
		if err != nil || i < 0 || i >= s.gen.cfg.Splits {
			return nil, fmt.Errorf("nexmark: unknown split %q", sp.Split)
		}
		first, count := s.gen.cfg.SplitRange(i)
		next := max(sp.Offset, 0)
		if next > count {
			return nil, connector.Permanent(fmt.Errorf("nexmark: split %q has %d events, the checkpoint's position is %d", sp.Split, count, next))
		}
		r.parts = append(r.parts, &splitState{id: sp.Split, first: first, count: count, next: next})
	}
	return r, nil
}

type splitState struct {
	id                 string
	first, count, next int64
}

type reader struct {
	src   *Source
	parts []*splitState
	rr    int
	// For a paced source: the shift, once known.
	shift   int64
	shifted bool
}

func (r *reader) Fetch(ctx context.Context) (connector.Fetch[Event], error) {
	if err := ctx.Err(); err != nil {
		return connector.Fetch[Event]{}, err
	}
	if r.src.shift != nil {
		return r.fetchPaced(ctx)
	}
	for range r.parts {
		sp := r.parts[r.rr]
		r.rr = (r.rr + 1) % len(r.parts)
		if sp.next >= sp.count {
			continue
		}
		n := min(int64(r.src.batch), sp.count-sp.next)
		f := connector.Fetch[Event]{Split: sp.id, Records: make([]Event, n), Timestamps: make([]int64, n)}
		for i := range n {
			ev := r.src.gen.event(sp.first+sp.next+i, sp.next+i)
			f.Records[i], f.Timestamps[i] = ev, ev.Time()
		}
		sp.next += n
		f.Next, f.EndOfSplit = sp.next, sp.next == sp.count
		return f, nil
	}
	return connector.Fetch[Event]{}, connector.ErrEndOfInput
}

// fetchPaced waits for the split whose next event is due first, then
// returns its events that are due, up to a batch.
func (r *reader) fetchPaced(ctx context.Context) (connector.Fetch[Event], error) {
	if !r.shifted {
		v, err := r.src.shift()
		if err != nil {
			return connector.Fetch[Event]{}, err
		}
		r.shift, r.shifted = v, true
	}
	cfg := &r.src.gen.cfg
	var sp *splitState
	for _, p := range r.parts {
		if p.next < p.count && (sp == nil || cfg.TimestampForEvent(p.next) < cfg.TimestampForEvent(sp.next)) {
			sp = p
		}
	}
	if sp == nil {
		return connector.Fetch[Event]{}, connector.ErrEndOfInput
	}
	if wait := time.Until(time.UnixMilli(cfg.TimestampForEvent(sp.next) + r.shift)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return connector.Fetch[Event]{}, ctx.Err()
		case <-t.C:
		}
	}
	now := time.Now().UnixMilli()
	n := int64(1)
	for n < int64(r.src.batch) && sp.next+n < sp.count && cfg.TimestampForEvent(sp.next+n)+r.shift <= now {
		n++
	}
	f := connector.Fetch[Event]{Split: sp.id, Records: make([]Event, n), Timestamps: make([]int64, n)}
	for i := range n {
		ev := r.src.gen.event(sp.first+sp.next+i, sp.next+i)
		f.Records[i], f.Timestamps[i] = ev, ev.Time()
	}
	sp.next += n
	f.Next, f.EndOfSplit = sp.next, sp.next == sp.count
	return f, nil
}

func (r *reader) Close() error { return nil }

// All returns every event of the configuration, split after split, each
// in its order: the input the oracles read.
func (g *Generator) All() []Event {
	out := make([]Event, 0, g.cfg.Events)
	for i := range g.cfg.Splits {
		_, count := g.cfg.SplitRange(i)
		for n := range count {
			out = append(out, g.Event(i, n))
		}
	}
	return out
}

// jsonEvent is nexmark-flink's row (ddl_gen.sql): event_type and the
// three nested records, one of them set, timestamps as SQL TIMESTAMP(3)
// text as Flink's JSON format writes them.
type jsonEvent struct {
	EventType int          `json:"event_type"`
	Person    *jsonPerson  `json:"person"`
	Auction   *jsonAuction `json:"auction"`
	Bid       *jsonBid     `json:"bid"`
}

type jsonPerson struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     string `json:"dateTime"`
	Extra        string `json:"extra"`
}

type jsonAuction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    string `json:"dateTime"`
	Expires     string `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

type jsonBid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime string `json:"dateTime"`
	Extra    string `json:"extra"`
}

// MarshalJSON writes the event as a row of nexmark-flink's datagen table.
func (e Event) MarshalJSON() ([]byte, error) {
	j := jsonEvent{EventType: int(e.Type)}
	switch e.Type {
	case PersonEvent:
		p := e.Person
		j.Person = &jsonPerson{p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, FormatTime(p.DateTime), p.Extra}
	case AuctionEvent:
		a := e.Auction
		j.Auction = &jsonAuction{a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, FormatTime(a.DateTime), FormatTime(a.Expires), a.Seller, a.Category, a.Extra}
	default:
		b := e.Bid
		j.Bid = &jsonBid{b.Auction, b.Bidder, b.Price, b.Channel, b.URL, FormatTime(b.DateTime), b.Extra}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a row written by MarshalJSON.
func (e *Event) UnmarshalJSON(data []byte) error {
	var j jsonEvent
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	parse := func(s string) (int64, error) {
		t, err := time.Parse(timestampLayout, s)
		return t.UnixMilli(), err
	}
	*e = Event{Type: EventType(j.EventType)}
	var err, err2 error
	switch {
	case j.EventType == int(PersonEvent) && j.Person != nil:
		p := j.Person
		e.Person = Person{ID: p.ID, Name: p.Name, EmailAddress: p.EmailAddress, CreditCard: p.CreditCard, City: p.City, State: p.State, Extra: p.Extra}
		e.Person.DateTime, err = parse(p.DateTime)
	case j.EventType == int(AuctionEvent) && j.Auction != nil:
		a := j.Auction
		e.Auction = Auction{ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid, Reserve: a.Reserve, Seller: a.Seller, Category: a.Category, Extra: a.Extra}
		e.Auction.DateTime, err = parse(a.DateTime)
		e.Auction.Expires, err2 = parse(a.Expires)
	case j.EventType == int(BidEvent) && j.Bid != nil:
		b := j.Bid
		e.Bid = Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL, Extra: b.Extra}
		e.Bid.DateTime, err = parse(b.DateTime)
	default:
		return fmt.Errorf("nexmark: event_type %d without its record", j.EventType)
	}
	if err == nil {
		err = err2
	}
	return err
}

// WriteFiles writes the configuration's events to dir, one file of JSON
// lines per split (part-00000.jsonl, …) in nexmark-flink's row format,
// so another system reads exactly the events the in-process source
// generates. It returns the files' names.
func (g *Generator) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for i := range g.cfg.Splits {
		name := filepath.Join(dir, fmt.Sprintf("part-%05d.jsonl", i))
		if err := g.writeSplit(name, i); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

func (g *Generator) writeSplit(name string, split int) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, count := g.cfg.SplitRange(split)
	for n := range count {
		b, err := g.Event(split, n).MarshalJSON()
		if err != nil {
			f.Close()
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("nexmark: writing %s: %w", name, err)
	}
	return f.Close()
}
