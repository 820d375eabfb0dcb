package nexmark

import (
	"fmt"
	"math"
	"strings"
)

// Reference constants (GeneratorConfig, PersonGenerator, AuctionGenerator,
// BidGenerator).
const (
	FirstAuctionID  = 1000
	FirstPersonID   = 1000
	FirstCategoryID = 10

	numCategories    = 5
	personIDLead     = 10
	auctionIDLead    = 10
	hotSellerBatch   = 100 // HOT_SELLER_RATIO: hot sellers are the first of each 100 people
	hotBidderBatch   = 100 // HOT_BIDDER_RATIO
	hotAuctionBatch  = 100 // HOT_AUCTION_RATIO
	hotChannelsRatio = 2
	channelsNumber   = 10_000
	minStringLength  = 3
	reusableExtraLen = 1 << 20
)

var (
	usStates    = strings.Split("AZ,CA,ID,OR,WA,WY", ",")
	usCities    = strings.Split("Phoenix,Los Angeles,San Francisco,Boise,Portland,Bend,Redmond,Seattle,Kent,Cheyenne", ",")
	firstNames  = strings.Split("Peter,Paul,Luke,John,Saul,Vicky,Kate,Julie,Sarah,Deiter,Walter", ",")
	lastNames   = strings.Split("Shultz,Abrams,Spencer,White,Bartels,Walton,Smith,Jones,Noris", ",")
	hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// GenConfig is the generator's configuration: nexmark-flink's
// NexmarkConfiguration fields that shape the events, with its defaults
// (DefaultGenConfig).
type GenConfig struct {
	// Seed draws every field; the same seed gives the same events.
	Seed uint64
	// Events is the number of events over all splits (the reference's
	// events.num).
	Events int64
	// Splits is the number of source splits; split i generates event ids
	// [i*Events/Splits, (i+1)*Events/Splits), the last one the remainder
	// too (GeneratorConfig.split).
	Splits int
	// Rate is events per second of event time on each split's timeline
	// (first-event.rate; the reference's inter-event delay is 1e6/Rate µs).
	Rate float64
	// BaseTime is the event time of each split's first event, in Unix
	// milliseconds (the reference takes the wall clock at start; a fixed
	// one makes runs reproducible).
	BaseTime int64

	PersonProportion, AuctionProportion, BidProportion int
	// AvgPersonBytes, AvgAuctionBytes, AvgBidBytes are the average sizes
	// the extra field pads each record to.
	AvgPersonBytes, AvgAuctionBytes, AvgBidBytes int
	// HotAuctionRatio, HotSellersRatio, HotBiddersRatio: a bid is for a
	// hot auction, an auction by a hot seller, a bid by a hot bidder with
	// probability 1 - 1/ratio.
	HotAuctionRatio, HotSellersRatio, HotBiddersRatio int
	// InFlightAuctions is how many recent auctions a bid that is not for
	// a hot one picks from; ActivePeople how many recent persons a seller
	// or bidder that is not hot is.
	InFlightAuctions, ActivePeople int
}

// DefaultGenConfig returns nexmark-flink's defaults (NexmarkConfiguration)
// for one million events on two splits, at the reference's first-event
// rate of 10,000 events per second, from 2026-01-01T00:00:00Z.
func DefaultGenConfig() GenConfig {
	return GenConfig{
		Seed: 1, Events: 1_000_000, Splits: 2, Rate: 10_000, BaseTime: 1_767_225_600_000,
		PersonProportion: 1, AuctionProportion: 3, BidProportion: 46,
		AvgPersonBytes: 200, AvgAuctionBytes: 500, AvgBidBytes: 100,
		HotAuctionRatio: 2, HotSellersRatio: 4, HotBiddersRatio: 4,
		InFlightAuctions: 100, ActivePeople: 1000,
	}
}

// Validate reports every out-of-range field at once.
func (c GenConfig) Validate() error {
	var errs []string
	bad := func(cond bool, format string, args ...any) {
		if cond {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	bad(c.Events < 1, "events %d: want at least 1", c.Events)
	bad(c.Splits < 1 || int64(c.Splits) > c.Events, "splits %d: want 1 to the number of events", c.Splits)
	bad(!(c.Rate > 0) || math.IsInf(c.Rate, 0), "rate %v: want a positive number of events per second", c.Rate)
	bad(c.PersonProportion < 1 || c.AuctionProportion < 1 || c.BidProportion < 1,
		"proportions %d/%d/%d: want each at least 1", c.PersonProportion, c.AuctionProportion, c.BidProportion)
	bad(c.AvgPersonBytes < 0 || c.AvgAuctionBytes < 0 || c.AvgBidBytes < 0, "average sizes must not be negative")
	bad(c.HotAuctionRatio < 1 || c.HotSellersRatio < 1 || c.HotBiddersRatio < 1, "hot ratios must be at least 1")
	bad(c.InFlightAuctions < 1 || c.ActivePeople < 1, "in-flight auctions and active people must be at least 1")
	if len(errs) > 0 {
		return fmt.Errorf("nexmark: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (c GenConfig) total() int64 {
	return int64(c.PersonProportion + c.AuctionProportion + c.BidProportion)
}

// SplitRange returns the first event id of split i and how many events it
// generates.
func (c GenConfig) SplitRange(i int) (first, count int64) {
	n := int64(c.Splits)
	sub := c.Events / n
	first = int64(i) * sub
	if i == c.Splits-1 {
		return first, c.Events - sub*(n-1)
	}
	return first, sub
}

// TimestampForEvent is the event time of a split's event number n (its
// position on the split's timeline): GeneratorConfig.timestampForEvent.
func (c GenConfig) TimestampForEvent(n int64) int64 {
	delayUs := 1e6 / c.Rate
	return c.BaseTime + int64(float64(n)*delayUs)/1000
}

// lastBase0PersonID is the id (without FirstPersonID) of the last person
// generated at or before event id e.
func (c GenConfig) lastBase0PersonID(e int64) int64 {
	epoch, offset := e/c.total(), e%c.total()
	if offset >= int64(c.PersonProportion) {
		offset = int64(c.PersonProportion) - 1
	}
	return epoch*int64(c.PersonProportion) + offset
}

// lastBase0AuctionID is the id (without FirstAuctionID) of the last
// auction generated at or before event id e.
func (c GenConfig) lastBase0AuctionID(e int64) int64 {
	epoch, offset := e/c.total(), e%c.total()
	switch {
	case offset < int64(c.PersonProportion):
		epoch--
		offset = int64(c.AuctionProportion) - 1
	case offset >= int64(c.PersonProportion+c.AuctionProportion):
		offset = int64(c.AuctionProportion) - 1
	default:
		offset -= int64(c.PersonProportion)
	}
	return epoch*int64(c.AuctionProportion) + offset
}

// Generator makes events. It is immutable once made and safe for
// concurrent use: each event draws from its own random source.
type Generator struct {
	cfg GenConfig
	// extra is the reference's REUSABLE_EXTRA_STRING: padding is a slice
	// of it, so it costs no allocation.
	extra string
	// hotURLs and channelURLs are BidGenerator's HOT_URLS and
	// CHANNEL_URL_CACHE, drawn from the seed.
	hotURLs      []string
	channelNames []string
	channelURLs  []string
}

// NewGenerator returns a generator of cfg's events.
func NewGenerator(cfg GenConfig) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg}
	r := newRNG(cfg.Seed, -1)
	var b strings.Builder
	b.Grow(reusableExtraLen)
	for range reusableExtraLen {
		b.WriteByte(byte('a' + r.intN(26)))
	}
	g.extra = b.String()
	r = newRNG(cfg.Seed, -2)
	for range hotChannels {
		g.hotURLs = append(g.hotURLs, baseURL(&r))
	}
	g.channelNames = make([]string, channelsNumber)
	g.channelURLs = make([]string, channelsNumber)
	for i := range channelsNumber {
		url := baseURL(&r)
		if r.intN(10) > 0 {
			url += fmt.Sprintf("&channel_id=%d", abs32(reverse32(int32(i))))
		}
		g.channelNames[i], g.channelURLs[i] = fmt.Sprintf("channel-%d", i), url
	}
	return g, nil
}

// Config returns the generator's configuration.
func (g *Generator) Config() GenConfig { return g.cfg }

// reverse32 is Java's Integer.reverse.
func reverse32(i int32) int32 {
	u := uint32(i)
	var r uint32
	for range 32 {
		r = r<<1 | u&1
		u >>= 1
	}
	return int32(r)
}

// abs32 is Java's Math.abs on an int (MinInt32 stays negative).
func abs32(i int32) int32 {
	if i < 0 {
		return -i
	}
	return i
}

func baseURL(r *rng) string {
	return "https://www.nexmark.com/" + nextString(r, 5, '_') + "/" + nextString(r, 5, '_') + "/" + nextString(r, 5, '_') + "/item.htm?query=1"
}

// Event returns event number n of split (n counts from 0 within the
// split).
func (g *Generator) Event(split int, n int64) Event {
	first, _ := g.cfg.SplitRange(split)
	return g.event(first+n, n)
}

// event makes the event with id e at position n of its split's timeline:
// NexmarkGenerator.nextEvent.
func (g *Generator) event(e, n int64) Event {
	c := &g.cfg
	ts := c.TimestampForEvent(n)
	r := newRNG(c.Seed, e)
	switch rem := e % c.total(); {
	case rem < int64(c.PersonProportion):
		return Event{Type: PersonEvent, Person: g.person(e, &r, ts)}
	case rem < int64(c.PersonProportion+c.AuctionProportion):
		return Event{Type: AuctionEvent, Auction: g.auction(e, n, &r, ts)}
	}
	return Event{Type: BidEvent, Bid: g.bid(e, &r, ts)}
}

// nextBase0PersonID picks a random active person, or one of the next few
// (PersonGenerator.nextBase0PersonId).
func (g *Generator) nextBase0PersonID(e int64, r *rng) int64 {
	numPeople := g.cfg.lastBase0PersonID(e) + 1
	active := min(numPeople, int64(g.cfg.ActivePeople))
	return numPeople - active + r.longN(active+personIDLead)
}

// nextBase0AuctionID picks a random auction in flight, or one of the next
// few (AuctionGenerator.nextBase0AuctionId).
func (g *Generator) nextBase0AuctionID(e int64, r *rng) int64 {
	maxAuction := g.cfg.lastBase0AuctionID(e)
	minAuction := max(maxAuction-int64(g.cfg.InFlightAuctions), 0)
	return minAuction + r.longN(maxAuction-minAuction+1+auctionIDLead)
}

func (g *Generator) person(e int64, r *rng, ts int64) Person {
	p := Person{ID: g.cfg.lastBase0PersonID(e) + FirstPersonID, DateTime: ts}
	p.Name = firstNames[r.intN(len(firstNames))] + " " + lastNames[r.intN(len(lastNames))]
	p.EmailAddress = nextString(r, 7, ' ') + "@" + nextString(r, 5, ' ') + ".com"
	var cc [19]byte
	for i := range 4 {
		if i > 0 {
			cc[5*i-1] = ' '
		}
		v := r.intN(10000)
		for j := 3; j >= 0; j-- {
			cc[5*i+j] = byte('0' + v%10)
			v /= 10
		}
	}
	p.CreditCard = string(cc[:])
	p.City = usCities[r.intN(len(usCities))]
	p.State = usStates[r.intN(len(usStates))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.nextExtra(r, size, g.cfg.AvgPersonBytes)
	return p
}

func (g *Generator) auction(e, n int64, r *rng, ts int64) Auction {
	c := &g.cfg
	a := Auction{ID: c.lastBase0AuctionID(e) + FirstAuctionID, DateTime: ts}
	if r.intN(c.HotSellersRatio) > 0 {
		a.Seller = c.lastBase0PersonID(e) / hotSellerBatch * hotSellerBatch
	} else {
		a.Seller = g.nextBase0PersonID(e, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(r.intN(numCategories))
	a.InitialBid = nextPrice(r)
	// nextAuctionLengthMs: on average as long as it takes to generate
	// InFlightAuctions more auctions.
	eventsForAuctions := int64(c.InFlightAuctions) * c.total() / int64(c.AuctionProportion)
	horizon := c.TimestampForEvent(n+eventsForAuctions) - ts
	a.Expires = ts + 1 + r.longN(max(horizon*2, 1))
	a.ItemName = nextString(r, 20, ' ')
	a.Description = nextString(r, 100, ' ')
	a.Reserve = a.InitialBid + nextPrice(r)
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.nextExtra(r, size, c.AvgAuctionBytes)
	return a
}

func (g *Generator) bid(e int64, r *rng, ts int64) Bid {
	c := &g.cfg
	b := Bid{DateTime: ts}
	if r.intN(c.HotAuctionRatio) > 0 {
		b.Auction = c.lastBase0AuctionID(e) / hotAuctionBatch * hotAuctionBatch
	} else {
		b.Auction = g.nextBase0AuctionID(e, r)
	}
	b.Auction += FirstAuctionID
	if r.intN(c.HotBiddersRatio) > 0 {
		// The second person of the batch, so that hot bidders and hot
		// sellers differ.
		b.Bidder = c.lastBase0PersonID(e)/hotBidderBatch*hotBidderBatch + 1
	} else {
		b.Bidder = g.nextBase0PersonID(e, r)
	}
	b.Bidder += FirstPersonID
	b.Price = nextPrice(r)
	if r.intN(hotChannelsRatio) > 0 {
		i := r.intN(len(hotChannels))
		b.Channel, b.URL = hotChannels[i], g.hotURLs[i]
	} else {
		i := r.intN(channelsNumber)
		b.Channel, b.URL = g.channelNames[i], g.channelURLs[i]
	}
	// nexmark-flink's BidGenerator adds FIRST_PERSON_ID to the bidder a
	// second time; the generator keeps the reference's ids.
	b.Bidder += FirstPersonID
	b.Extra = g.nextExtra(r, 8+8+8+8, c.AvgBidBytes)
	return b
}

// nextPrice is PriceGenerator.nextPrice: log-uniform over 1 to 10^6
// dollars, in cents.
func nextPrice(r *rng) int64 {
	return int64(math.Round(math.Pow(10, r.float64()*6) * 100))
}

// nextString is StringsGenerator.nextString: 3 to maxLength-1 letters,
// one in 13 of them special, trimmed of spaces.
func nextString(r *rng, maxLength int, special byte) string {
	n := minStringLength + r.intN(maxLength-minStringLength)
	var buf [128]byte
	s := buf[:n]
	for i := range s {
		if r.intN(13) == 0 {
			s[i] = special
		} else {
			s[i] = byte('a' + r.intN(26))
		}
	}
	return strings.TrimSpace(string(s))
}

// nextExtra is StringsGenerator.nextExtra: padding so that size plus its
// length averages avg.
func (g *Generator) nextExtra(r *rng, size, avg int) string {
	if size > avg {
		return ""
	}
	avg -= size
	delta := int(math.Round(float64(avg) * 0.2))
	n := avg - delta
	if delta != 0 {
		n += r.intN(2 * delta)
	}
	off := r.intN(len(g.extra) - n)
	return g.extra[off : off+n]
}

// rng is a splitmix64 stream: small, fast, and seeded per event so that
// any event can be generated alone.
type rng struct{ s uint64 }

func newRNG(seed uint64, e int64) rng {
	r := rng{s: seed*0x9e3779b97f4a7c15 ^ uint64(e)*0xbf58476d1ce4e5b9}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intN returns a value in [0, n), n > 0.
func (r *rng) intN(n int) int { return int((r.next() >> 32) * uint64(n) >> 32) }

// longN returns a value in [0, n), n > 0 (LongGenerator.nextLong).
func (r *rng) longN(n int64) int64 {
	if n < math.MaxInt32 {
		return int64(r.intN(int(n)))
	}
	return int64(r.next() % uint64(n))
}

func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }
