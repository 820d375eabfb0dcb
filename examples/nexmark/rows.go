package nexmark

// The queries' output rows, with the reference SQL's columns. A DECIMAL(23, 3)
// is held exactly as thousandths (PriceMilli). Rows of an updating query
// carry Version: the n-th row a key emits has Version n, and the row with
// the highest Version is the key's current value.

// BidRow is a bid's columns as q0 and q7 select them.
type BidRow struct {
	Auction, Bidder, Price int64
	DateTime               int64
	Extra                  string
}

// Q1Row is a bid with its price in euros.
type Q1Row struct {
	Auction, Bidder int64
	PriceMilli      int64 // 0.908 * price, DECIMAL(23, 3) in thousandths
	DateTime        int64
	Extra           string
}

// Q2Row is a selected bid.
type Q2Row struct{ Auction, Price int64 }

// Q3Row is a seller in Oregon, Idaho or California of an auction in
// category 10.
type Q3Row struct {
	Name, City, State string
	ID                int64 // the auction's id
}

// Q4Row is the average winning price of a category.
type Q4Row struct {
	Category int64
	Version  int64
	Final    int64 // AVG(final) of a BIGINT: the truncated mean
}

// Q5Row is an auction with the most bids in a sliding window.
type Q5Row struct {
	Auction, Num int64
	Start        int64 // the window's start (the SQL drops it)
}

// Q8Row is a person who created an auction in the window they signed up
// in.
type Q8Row struct {
	ID    int64
	Name  string
	Start int64
}

// Q9Row is an auction's winning bid so far.
type Q9Row struct {
	Version int64
	Auction Auction
	Bid     Bid
}

// Q11Row is a bidder's session: its bids and bounds.
type Q11Row struct {
	Bidder, Count int64
	Start, End    int64
}

// Q12Row is a bidder's bids in a processing-time window.
type Q12Row struct {
	Bidder, Count int64
	Start, End    int64
}

// Q14Row is a bid in a price range, with its time of day and the count
// of 'c' in its extra field.
type Q14Row struct {
	Auction, Bidder int64
	PriceMilli      int64
	BidTimeType     string
	DateTime        int64
	Extra           string
	CCounts         int64
}

// Stats are q15's and q16's counts: index 0 over all bids, 1 to 3 over
// the bids of each price rank (below $100, below $10,000, the rest).
type Stats struct {
	Bids, Bidders, Auctions [4]int64
}

// Q15Row is a day's bid statistics.
type Q15Row struct {
	Day     string
	Version int64
	Stats   Stats
}

// Q16Row is a channel's bid statistics of a day.
type Q16Row struct {
	Channel, Day string
	Version      int64
	Minute       string // the day's latest HH:mm
	Stats        Stats
}

// Q17Row is an auction's bid statistics of a day.
type Q17Row struct {
	Auction                      int64
	Day                          string
	Version                      int64
	Bids                         [4]int64
	MinPrice, MaxPrice, AvgPrice int64
	SumPrice                     int64
}

// Q18Row is a bidder's latest bid on an auction.
type Q18Row struct {
	Version int64
	Bid     Bid
}

// Q19Row is an auction's ten highest bids, highest first (rank_number is
// the position plus one).
type Q19Row struct {
	Auction int64
	Version int64
	Top     []Bid
}

// Q20Row is a bid on an auction of category 10, with the auction.
type Q20Row struct {
	Bid     Bid
	Auction Auction
}

// Q21Row is a bid with its channel's id.
type Q21Row struct {
	Auction, Bidder, Price int64
	Channel, ChannelID     string
}

// Q22Row is a bid with the first three directories of its URL.
type Q22Row struct {
	Auction, Bidder, Price int64
	Channel                string
	Dir1, Dir2, Dir3       string
}
