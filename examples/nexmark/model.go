package nexmark

import "time"

// EventType says which of an Event's records is set (nexmark-flink's
// event_type column).
type EventType int8

// The event types.
const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

// Person is a new user of the auction site.
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64 // Unix milliseconds
	Extra        string
}

// Auction is an item put up for auction.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // Unix milliseconds
	Expires     int64 // Unix milliseconds
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid on an auction.
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64 // Unix milliseconds
	Extra    string
}

// Event is one generated event: the record its Type names is set, the
// others are zero. Records travel by value, without a per-event
// allocation.
type Event struct {
	Type    EventType
	Person  Person
	Auction Auction
	Bid     Bid
}

// Time returns the event's time in Unix milliseconds.
func (e Event) Time() int64 {
	switch e.Type {
	case PersonEvent:
		return e.Person.DateTime
	case AuctionEvent:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// timestampLayout is how Flink's JSON format writes a TIMESTAMP(3).
const timestampLayout = "2006-01-02 15:04:05.000"

// FormatTime formats Unix milliseconds as a SQL TIMESTAMP(3) in UTC.
func FormatTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(timestampLayout) }
