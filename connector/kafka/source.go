package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

// SourceOption configures a Source: Topics, GroupID, StartingOffsets,
// Bounded, IsolationLevel, MaxPollRecords, PartitionDiscoveryInterval and
// every ClientOption.
type SourceOption interface{ applySource(*sourceConfig) }

type sourceOptionFunc func(*sourceConfig)

func (f sourceOptionFunc) applySource(c *sourceConfig) { f(c) }

type sourceConfig struct {
	client        clientConfig
	topics        []string
	group         string
	start         Offsets
	bounded       bool
	readCommitted bool
	maxPoll       int
	discovery     time.Duration
	// resetOutOfRange goes on from a partition's beginning when a
	// reader's offset is no longer in the log; false fails the reader.
	resetOutOfRange bool
}

// DefaultPartitionDiscoveryInterval is how often a running job lists its
// topics' partitions unless PartitionDiscoveryInterval says otherwise:
// Flink's default for partition.discovery.interval.ms.
const DefaultPartitionDiscoveryInterval = 5 * time.Minute

// Topics sets the topics to read (Flink's setTopics). Required.
func Topics(topics ...string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.topics = append(c.topics, topics...) })
}

// GroupID sets the consumer group under which the source commits the
// offsets of completed checkpoints (Flink's setGroupId), and from which
// Committed starting offsets are read. The source never joins the group:
// partitions are assigned statically. Default: none, and no offsets are
// committed.
func GroupID(id string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.group = id })
}

// StartingOffsets sets where a partition of the job's first listing
// without a checkpointed offset starts (Flink's setStartingOffsets);
// partitions discovered later start at their beginning. Default
// Earliest().
func StartingOffsets(o Offsets) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.start = o })
}

// Bounded makes the source stop at the offsets that were the partitions'
// latest when the source first listed them (Flink's
// setBounded(OffsetsInitializer.latest())): the high watermark, or with
// read_committed isolation the last stable offset. They are checkpointed
// with the splits' offsets, so a restore stops at the same offsets.
// Default: unbounded.
func Bounded() SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.bounded = true })
}

// IsolationLevel sets Kafka's isolation.level: kgo.ReadUncommitted() (the
// default, as in Kafka and Flink) or kgo.ReadCommitted(), which returns
// only records of committed transactions; use it to read the output of
// an exactly-once sink.
func IsolationLevel(level kgo.IsolationLevel) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.readCommitted = level == kgo.ReadCommitted() })
}

// ResetOnOutOfRange makes a reader whose offset is no longer in its
// partition's log (retention or DeleteRecords removed records before the
// job read them) go on from the log's beginning, as a Kafka consumer with
// auto.offset.reset=earliest does, skipping what was deleted. Without it
// the reader fails with an error that names the split, its offset and
// where the log now begins: the records that are gone can be neither
// counted nor billed, and weir does not skip them unasked. A job failing
// so fails again after every restart; resuming it needs this option (or a
// new start without the checkpoint).
func ResetOnOutOfRange() SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.resetOutOfRange = true })
}

// MaxPollRecords bounds the records returned per fetch (Kafka's
// max.poll.records). Default 500.
func MaxPollRecords(n int) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.maxPoll = n })
}

// PartitionDiscoveryInterval sets how often a running job lists the
// topics' partitions again, to read those added since (Flink's
// partition.discovery.interval.ms). A new partition goes to the source
// subtask with the fewest, which reads it from its beginning, without a
// restart. Default DefaultPartitionDiscoveryInterval (5
// minutes); 0 or less disables discovery, and a Bounded source never
// discovers (as in Flink): its partitions are those of its first listing.
// A running reader consumes an added partition from its next fetch
// request, which on a quiet partition waits up to the fetch max wait
// (DefaultFetchMaxWait unless kgo.FetchMaxWait is passed in
// ClientOptions).
func PartitionDiscoveryInterval(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.discovery = max(d, 0) })
}

// DefaultFetchMaxWait is how long the broker may hold a reader's fetch
// request while its partitions have nothing new: Kafka's Java consumer's
// default (fetch.max.wait.ms, 500 ms) rather than franz-go's 5 s, so that
// a partition a reader resumes (watermark alignment) or is given
// (discovery) is not left waiting behind a fetch of idle ones.
const DefaultFetchMaxWait = 500 * time.Millisecond

// Offsets says where a partition starts when it has no checkpointed
// offset: Earliest, Latest, Committed or Timestamp (Flink's
// OffsetsInitializer).
type Offsets struct {
	kind  offsetKind
	ts    int64      // Timestamp: Unix milliseconds
	reset offsetKind // Committed: where to start without a committed offset
}

type offsetKind uint8

const (
	earliest offsetKind = iota
	latest
	committed
	timestamp
)

// Earliest starts at each partition's log start offset.
func Earliest() Offsets { return Offsets{kind: earliest} }

// Latest starts at each partition's end when the reader opens (with
// read_committed isolation, its last stable offset).
func Latest() Offsets { return Offsets{kind: latest} }

// Committed starts at the group's committed offset (GroupID is required),
// and where reset says (Earliest or Latest) for partitions without one.
func Committed(reset Offsets) Offsets { return Offsets{kind: committed, reset: reset.kind} }

// Timestamp starts at the first record whose timestamp is at or after t,
// or at the end if there is none.
func Timestamp(t time.Time) Offsets { return Offsets{kind: timestamp, ts: t.UnixMilli()} }

func (o Offsets) String() string {
	switch o.kind {
	case earliest:
		return "earliest"
	case latest:
		return "latest"
	case committed:
		return "committed(" + Offsets{kind: o.reset}.String() + ")"
	case timestamp:
		return "timestamp(" + time.UnixMilli(o.ts).UTC().Format(time.RFC3339Nano) + ")"
	}
	return "Offsets(" + strconv.Itoa(int(o.kind)) + ")"
}

// Source reads Kafka topics. It implements connector.Source[T]; the
// package comment describes splits, offsets and their commits.
//
// With watermark alignment (stream.WatermarkStrategy's
// WithWatermarkAlignment) its readers pause single partitions. A resumed
// partition is fetched again once the broker's fetch in flight returns,
// which, when the reader's other partitions have nothing new, takes up to
// the fetch max wait: DefaultFetchMaxWait unless kgo.FetchMaxWait is
// passed in ClientOptions.
type Source[T any] struct {
	cfg         sourceConfig
	deserialize func(*kgo.Record) (T, error)

	mu sync.Mutex
	// stops is where each partition ends (bounded), fixed when this
	// source first lists it; a split's checkpointed end takes precedence.
	stops map[topicPartition]int64
}

type topicPartition struct {
	topic     string
	partition int32
}

// NewSource returns a source that turns each record into a T with
// deserialize. A record that deserialize fails on fails the reader, and
// the job's restart strategy decides what happens (a restart reads it
// again). A job that must skip or divert bad records makes deserialize
// return a T that carries the error, and routes those values itself (to a
// side output, say) instead of returning an error.
//
// NewSource does not contact the brokers; a source's first listing of its
// partitions does.
func NewSource[T any](deserialize func(*kgo.Record) (T, error), opts ...SourceOption) (*Source[T], error) {
	c := sourceConfig{client: defaultClientConfig(), start: Earliest(), maxPoll: 500, discovery: DefaultPartitionDiscoveryInterval}
	for _, o := range opts {
		o.applySource(&c)
	}
	if err := c.client.validate(); err != nil {
		return nil, err
	}
	switch {
	case deserialize == nil:
		return nil, errors.New("kafka: the deserialize function is nil")
	case len(c.topics) == 0:
		return nil, errors.New("kafka: the source has no topics (Topics)")
	case slices.Contains(c.topics, ""):
		return nil, errors.New("kafka: empty topic name")
	case c.maxPoll < 1:
		return nil, fmt.Errorf("kafka: max poll records must be at least 1, got %d", c.maxPoll)
	case c.start.kind > timestamp || c.start.kind == committed && c.start.reset > latest:
		return nil, fmt.Errorf("kafka: invalid starting offsets %v", c.start)
	case c.start.kind == committed && c.group == "":
		return nil, errors.New("kafka: committed starting offsets need a group id (GroupID)")
	}
	slices.Sort(c.topics)
	c.topics = slices.Compact(c.topics)
	return &Source[T]{cfg: c, deserialize: deserialize, stops: make(map[topicPartition]int64)}, nil
}

// Topics returns the topics the source reads, sorted.
func (s *Source[T]) Topics() []string { return slices.Clone(s.cfg.topics) }

// Bounded implements connector.Source.
func (s *Source[T]) Bounded() bool { return s.cfg.bounded }

// SplitDiscoveryInterval implements connector.SplitDiscoverer: the
// PartitionDiscoveryInterval, or 0 for a bounded source.
func (s *Source[T]) SplitDiscoveryInterval() time.Duration {
	if s.cfg.bounded {
		return 0
	}
	return s.cfg.discovery
}

// SplitID returns the split id of a topic partition: "<topic>-<partition>".
func SplitID(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// parseSplit parses a split id made by SplitID.
func parseSplit(id string) (topicPartition, error) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return topicPartition{}, fmt.Errorf("kafka: split %q is not <topic>-<partition>", id)
	}
	p, err := strconv.ParseInt(id[i+1:], 10, 32)
	if err != nil || !digits(id[i+1:]) {
		return topicPartition{}, fmt.Errorf("kafka: split %q is not <topic>-<partition>", id)
	}
	return topicPartition{id[:i], int32(p)}, nil
}

// Splits implements connector.Source: every partition of every topic,
// topics in name order and partitions in number order. A job lists them
// when it starts and every PartitionDiscoveryInterval while it runs. A
// missing topic, or brokers that do not answer within the request
// timeout, is an error that names them.
func (s *Source[T]) Splits(ctx context.Context) ([]string, error) {
	cl, err := s.cfg.client.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	parts, err := s.partitions(ctx, cl)
	if err != nil {
		return nil, err
	}
	if s.cfg.bounded {
		if err := s.fixStops(ctx, cl, parts); err != nil {
			return nil, err
		}
	}
	ids := make([]string, len(parts))
	for i, tp := range parts {
		ids[i] = SplitID(tp.topic, tp.partition)
	}
	return ids, nil
}

// partitions lists the source's partitions in split order.
func (s *Source[T]) partitions(ctx context.Context, cl *client) ([]topicPartition, error) {
	rctx, cancel := cl.withTimeout(ctx)
	defer cancel()
	tds, err := kadm.NewClient(cl.Client).ListTopics(rctx, s.cfg.topics...)
	if err != nil {
		return nil, cl.describe(err, "listing the partitions of "+strings.Join(s.cfg.topics, ","))
	}
	var parts []topicPartition
	for _, t := range s.cfg.topics {
		td, ok := tds[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("kafka: topic %q does not exist (brokers %s)", t, cl.cfg.brokerList())
		}
		if td.Err != nil {
			return nil, cl.describe(td.Err, fmt.Sprintf("listing the partitions of topic %q", t))
		}
		for _, p := range td.Partitions.Numbers() {
			parts = append(parts, topicPartition{t, p})
		}
	}
	slices.SortFunc(parts, func(a, b topicPartition) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	return parts, nil
}

// fixStops records the end offsets of the partitions that have none yet.
func (s *Source[T]) fixStops(ctx context.Context, cl *client, parts []topicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []topicPartition
	for _, tp := range parts {
		if _, ok := s.stops[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ends, err := listOffsets(ctx, cl, Latest(), s.cfg.readCommitted, missing)
	if err != nil {
		return err
	}
	maps.Copy(s.stops, ends)
	return nil
}

// stopsOf returns the stop offsets of parts.
func (s *Source[T]) stopsOf(parts []topicPartition) map[topicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[topicPartition]int64, len(parts))
	for _, tp := range parts {
		m[tp] = s.stops[tp]
	}
	return m
}

// listOffsets resolves o (Earliest, Latest or Timestamp) for parts.
func listOffsets(ctx context.Context, cl *client, o Offsets, readCommitted bool, parts []topicPartition) (map[topicPartition]int64, error) {
	topics := make([]string, 0, len(parts))
	for _, tp := range parts {
		topics = append(topics, tp.topic)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	rctx, cancel := cl.withTimeout(ctx)
	defer cancel()
	adm := kadm.NewClient(cl.Client)
	var (
		listed kadm.ListedOffsets
		err    error
		what   string
	)
	switch {
	case o.kind == earliest:
		listed, err = adm.ListStartOffsets(rctx, topics...)
		what = "start"
	case o.kind == latest && readCommitted:
		listed, err = adm.ListCommittedOffsets(rctx, topics...)
		what = "last stable"
	case o.kind == latest:
		listed, err = adm.ListEndOffsets(rctx, topics...)
		what = "end"
	case o.kind == timestamp:
		listed, err = adm.ListOffsetsAfterMilli(rctx, o.ts, topics...)
		what = "timestamp"
	default:
		return nil, fmt.Errorf("kafka: cannot list %v offsets", o)
	}
	if err != nil {
		return nil, cl.describe(err, "listing "+what+" offsets of "+strings.Join(topics, ","))
	}
	out := make(map[topicPartition]int64, len(parts))
	for _, tp := range parts {
		lo, ok := listed.Lookup(tp.topic, tp.partition)
		switch {
		case !ok:
			if lo, ok := listed.Lookup(tp.topic, -1); ok && lo.Err != nil || listed[tp.topic] == nil {
				return nil, fmt.Errorf("kafka: topic %q does not exist (brokers %s)", tp.topic, cl.cfg.brokerList())
			}
			return nil, fmt.Errorf("kafka: partition %s does not exist (brokers %s)", SplitID(tp.topic, tp.partition), cl.cfg.brokerList())
		case lo.Err != nil:
			return nil, cl.describe(lo.Err, "listing "+what+" offset of "+SplitID(tp.topic, tp.partition))
		}
		out[tp] = lo.Offset
	}
	return out, nil
}

// NewReader implements connector.Source. Splits with a checkpointed
// offset start exactly there; the others start where StartingOffsets says,
// resolved now. A bounded reader stops each split at the end offset
// checkpointed with it, if any (see splitState), and otherwise at the end
// the source fixed when it first listed the partition. The reader is a
// franz-go client that consumes its partitions directly, without joining
// a consumer group.
func (s *Source[T]) NewReader(ctx context.Context, info connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[T], error) {
	r := &reader[T]{src: s, parts: make(map[topicPartition]*partState, len(splits))}
	admin, err := s.cfg.client.newClient()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	consume, err := r.prepare(ctx, admin, splits)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.KeepControlRecords(), kgo.FetchMaxWait(DefaultFetchMaxWait)}
	if !s.cfg.resetOutOfRange {
		// franz-go would otherwise move an out-of-range offset to the
		// partition's beginning without a word.
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	}
	if s.cfg.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if len(consume) > 0 {
		opts = append(opts, kgo.ConsumePartitions(consume))
	}
	if r.cl, err = s.cfg.client.newClient(opts...); err != nil {
		return nil, err
	}
	return r, nil
}

// AddSplits implements connector.SplitAdder: the reader goes on with its
// partitions and starts consuming the added ones, which start as
// NewReader's do. Their offsets are resolved through a new client: the
// reader's may not know the partitions yet.
func (r *reader[T]) AddSplits(ctx context.Context, splits []connector.SplitStart) error {
	admin, err := r.src.cfg.client.newClient()
	if err != nil {
		return err
	}
	defer admin.Close()
	consume, err := r.prepare(ctx, admin, splits)
	if err != nil {
		return err
	}
	if len(consume) > 0 {
		r.cl.AddConsumePartitions(consume)
	}
	return nil
}

// prepare resolves where splits start (and, bounded, stop) through cl,
// makes them the reader's, and returns the partitions to consume, at
// their offsets. Splits that have reached their stop are returned by the
// next Fetch as ended.
func (r *reader[T]) prepare(ctx context.Context, cl *client, splits []connector.SplitStart) (map[string]map[int32]kgo.Offset, error) {
	s := r.src
	parts := make(map[topicPartition]*partState, len(splits))
	var all, unset, late, unstopped []topicPartition
	for _, sp := range splits {
		tp, err := parseSplit(sp.Split)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(s.cfg.topics, tp.topic) {
			return nil, fmt.Errorf("kafka: split %q is not a partition of topics %s", sp.Split, strings.Join(s.cfg.topics, ","))
		}
		if _, dup := parts[tp]; dup || r.has(tp) {
			return nil, fmt.Errorf("kafka: split %q given twice", sp.Split)
		}
		var ss splitState
		if sp.State != nil {
			if err := json.Unmarshal(sp.State, &ss); err != nil {
				return nil, fmt.Errorf("kafka: split %q: decoding its checkpointed state: %w", sp.Split, err)
			}
			if ss.End != nil && *ss.End < 0 || ss.Start != nil && *ss.Start < 0 {
				return nil, fmt.Errorf("kafka: split %q has invalid checkpointed state %s", sp.Split, sp.State)
			}
		}
		st := &partState{split: sp.Split, next: sp.Offset, stop: -1, start: -1}
		if ss.Start != nil {
			st.start = *ss.Start // kept in the state, whatever the offset
		}
		switch {
		case sp.Offset == connector.StartDefault && ss.Start != nil:
			st.next = *ss.Start
		case sp.Offset == connector.StartDefault && sp.Late:
			late = append(late, tp)
		case sp.Offset == connector.StartDefault:
			unset = append(unset, tp)
		case sp.Offset < 0:
			return nil, fmt.Errorf("kafka: split %q has invalid offset %d", sp.Split, sp.Offset)
		}
		if s.cfg.bounded {
			if ss.End == nil {
				unstopped = append(unstopped, tp)
			} else {
				st.stop = *ss.End
			}
		}
		parts[tp] = st
		all = append(all, tp)
	}
	if len(unset) > 0 {
		starts, err := s.startOffsets(ctx, cl, unset)
		if err != nil {
			return nil, err
		}
		for tp, off := range starts {
			parts[tp].next, parts[tp].start = off, off
		}
	}
	if len(late) > 0 {
		starts, err := listOffsets(ctx, cl, Earliest(), s.cfg.readCommitted, late)
		if err != nil {
			return nil, err
		}
		for tp, off := range starts {
			parts[tp].next, parts[tp].start = off, off
		}
	}
	if len(unstopped) > 0 {
		if err := s.fixStops(ctx, cl, unstopped); err != nil {
			return nil, err
		}
		for tp, stop := range s.stopsOf(unstopped) {
			parts[tp].stop = stop
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	consume := make(map[string]map[int32]kgo.Offset)
	for _, tp := range all {
		st := parts[tp]
		r.parts[tp] = st
		if st.stop >= 0 && st.next >= st.stop {
			st.ended = true
			r.ready = append(r.ready, connector.Fetch[T]{Split: st.split, Next: st.next, EndOfSplit: true})
			continue
		}
		r.active++
		if consume[tp.topic] == nil {
			consume[tp.topic] = make(map[int32]kgo.Offset)
		}
		consume[tp.topic][tp.partition] = kgo.NewOffset().At(st.next)
	}
	return consume, nil
}

// has reports whether tp is one of the reader's partitions.
func (r *reader[T]) has(tp topicPartition) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.parts[tp]
	return ok
}

// startOffsets resolves the starting offsets of partitions without a
// checkpointed offset.
func (s *Source[T]) startOffsets(ctx context.Context, cl *client, parts []topicPartition) (map[topicPartition]int64, error) {
	o := s.cfg.start
	if o.kind != committed {
		return listOffsets(ctx, cl, o, s.cfg.readCommitted, parts)
	}
	rctx, cancel := cl.withTimeout(ctx)
	defer cancel()
	resps, err := kadm.NewClient(cl.Client).FetchOffsets(rctx, s.cfg.group)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return nil, cl.describe(err, fmt.Sprintf("fetching the committed offsets of group %q", s.cfg.group))
	}
	out := make(map[topicPartition]int64, len(parts))
	var rest []topicPartition
	for _, tp := range parts {
		if r, ok := resps.Lookup(tp.topic, tp.partition); ok && r.Err == nil && r.At >= 0 {
			out[tp] = r.At
		} else {
			rest = append(rest, tp)
		}
	}
	if len(rest) > 0 {
		reset, err := listOffsets(ctx, cl, Offsets{kind: o.reset}, s.cfg.readCommitted, rest)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, reset)
	}
	return out, nil
}

// splitState is what a reader keeps per split in the engine's
// checkpoints, besides the offset (connector.SplitStateReader). Start is
// the offset the reader resolved for a split without a checkpointed one
// (StartingOffsets, or the beginning of a late split): a restore from a
// checkpoint taken before the split's first record starts there again,
// not at the partition's end or committed offset of the time of the
// restore, so that what it read after the checkpoint is read again. End,
// for a bounded reader, is the end offset fixed when the job first listed
// the partition: a restore — in a new process, or a job resumed from the
// checkpoint — stops there, not at the partition's end at the time of the
// restore. Either is nil when unknown (a state written before Start was
// recorded, or by an unbounded reader).
type splitState struct {
	End   *int64 `json:"end,omitempty"`
	Start *int64 `json:"start,omitempty"`
}

// partState is a reader's position in one partition.
type partState struct {
	split string
	next  int64 // offset of the next record to return
	stop  int64 // bounded: the offset to stop at; -1: unbounded
	start int64 // where the reader started a split without an offset; -1: it had one
	ended bool
}

// reader consumes its partitions with one franz-go client. Fetch runs on
// the engine's fetcher goroutine; AddSplits, SplitStates and
// CommitOffsets on the subtask's. The client is safe for concurrent use;
// mu guards the partitions.
type reader[T any] struct {
	src *Source[T]
	cl  *client

	mu     sync.Mutex
	parts  map[topicPartition]*partState
	ready  []connector.Fetch[T] // fetched, not yet returned
	active int                  // partitions not ended
	// paused are the partitions not ended that watermark alignment
	// paused (connector.SplitPauser); pollCancel ends the running poll
	// and woken says WakeUp came since the last poll began.
	paused     map[topicPartition]bool
	pollCancel context.CancelFunc
	woken      bool
}

// The reader pauses single partitions for watermark alignment, and its
// Fetch, which waits for records, can be woken.
var (
	_ connector.SplitPauser = (*reader[struct{}])(nil)
	_ connector.FetchWaker  = (*reader[struct{}])(nil)
)

// Fetch implements connector.Reader. A poll may return records of several
// partitions; they are returned one partition per Fetch. Control records
// (transaction markers) are not returned, but move Next past them, so
// that a bounded reader reaches its stop offset and a restore does not
// read them again.
//
// While every partition not ended is paused, or once WakeUp has cut a
// poll short, Fetch returns connector.ErrSplitsPaused if it has no
// records: franz-go does not fetch paused partitions, and a poll of none
// would wait for ever.
func (r *reader[T]) Fetch(ctx context.Context) (connector.Fetch[T], error) {
	for {
		if f, ok, err := r.next(); ok || err != nil {
			return f, err
		}
		pollCtx, ok := r.beginPoll(ctx)
		if !ok {
			return connector.Fetch[T]{}, connector.ErrSplitsPaused
		}
		fs := r.cl.PollRecords(pollCtx, r.src.cfg.maxPoll)
		woken := r.endPoll()
		if err := ctx.Err(); err != nil {
			return connector.Fetch[T]{}, err
		}
		if fs.IsClientClosed() {
			return connector.Fetch[T]{}, errors.New("kafka: the reader is closed")
		}
		var err error
		fs.EachError(func(t string, p int32, e error) {
			if woken && (errors.Is(e, context.Canceled) || errors.Is(e, context.DeadlineExceeded)) {
				return // the poll WakeUp cut short
			}
			if err == nil && errors.Is(e, kerr.OffsetOutOfRange) {
				err = r.outOfRange(ctx, t, p, e)
			}
			if err == nil {
				err = fmt.Errorf("kafka: reading %s (brokers %s): %w", SplitID(t, p), r.cl.cfg.brokerList(), e)
			}
		})
		if err != nil {
			return connector.Fetch[T]{}, err
		}
		r.mu.Lock()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if err == nil {
				err = r.add(p)
			}
		})
		r.mu.Unlock()
		if err != nil {
			return connector.Fetch[T]{}, err
		}
		if woken {
			if f, ok, err := r.next(); ok || err != nil {
				return f, err
			}
			return connector.Fetch[T]{}, connector.ErrSplitsPaused
		}
	}
}

// beginPoll returns the context of a poll that WakeUp can end, or false
// if there is nothing to poll: every partition not ended is paused, or
// WakeUp came since the last poll.
func (r *reader[T]) beginPoll(ctx context.Context) (context.Context, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.woken || r.active-len(r.paused) <= 0 {
		r.woken = false
		return nil, false
	}
	pollCtx, cancel := context.WithCancel(ctx)
	r.pollCancel = cancel
	return pollCtx, true
}

// endPoll ends the poll beginPoll began, and reports whether WakeUp cut
// it short.
func (r *reader[T]) endPoll() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pollCancel()
	r.pollCancel = nil
	woken := r.woken
	r.woken = false
	return woken
}

// WakeUp implements connector.FetchWaker.
func (r *reader[T]) WakeUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.woken = true
	if r.pollCancel != nil {
		r.pollCancel()
	}
}

// PauseOrResumeSplits implements connector.SplitPauser: franz-go stops
// fetching the paused partitions (and drops what it buffered of them, to
// fetch it again once they are resumed), and fetches the resumed ones
// again from where the reader is.
func (r *reader[T]) PauseOrResumeSplits(pause, resume []string) error {
	var toPause, toResume map[string][]int32
	r.mu.Lock()
	for _, id := range pause {
		tp, err := parseSplit(id)
		if err != nil {
			r.mu.Unlock()
			return err
		}
		if st := r.parts[tp]; st == nil || st.ended || r.paused[tp] {
			continue
		}
		if r.paused == nil {
			r.paused = map[topicPartition]bool{}
		}
		r.paused[tp] = true
		if toPause == nil {
			toPause = map[string][]int32{}
		}
		toPause[tp.topic] = append(toPause[tp.topic], tp.partition)
	}
	for _, id := range resume {
		tp, err := parseSplit(id)
		if err != nil {
			r.mu.Unlock()
			return err
		}
		if !r.paused[tp] {
			continue
		}
		delete(r.paused, tp)
		if toResume == nil {
			toResume = map[string][]int32{}
		}
		toResume[tp.topic] = append(toResume[tp.topic], tp.partition)
	}
	r.mu.Unlock()
	if toPause != nil {
		r.cl.PauseFetchPartitions(toPause)
	}
	if toResume != nil {
		r.cl.ResumeFetchPartitions(toResume)
	}
	return nil
}

// outOfRange describes a partition whose next offset is no longer in its
// log: where the log begins now, and what was lost.
func (r *reader[T]) outOfRange(ctx context.Context, topic string, partition int32, cause error) error {
	r.mu.Lock()
	var next int64 = -1
	if st := r.parts[topicPartition{topic, partition}]; st != nil {
		next = st.next
	}
	r.mu.Unlock()
	split := SplitID(topic, partition)
	adm := kadm.NewClient(r.cl.Client)
	lookup := func(l kadm.ListedOffsets, err error) int64 {
		if err == nil {
			if o, ok := l.Lookup(topic, partition); ok && o.Err == nil {
				return o.Offset
			}
		}
		return -1
	}
	start := lookup(adm.ListStartOffsets(ctx, topic))
	end := lookup(adm.ListEndOffsets(ctx, topic))
	switch {
	case start > next && next >= 0:
		return fmt.Errorf("kafka: %s: offset %d is no longer in the log, which begins at %d (%d records deleted before this job read them, "+
			"as retention or DeleteRecords deletes them); weir does not skip records unasked "+
			"(the source option ResetOnOutOfRange goes on from the log's beginning): %w", split, next, start, start-next, cause)
	case end >= 0 && next > end:
		return fmt.Errorf("kafka: %s: offset %d is past the log's end, %d: the partition lost records this job had read "+
			"(recreated topic, unclean leader election); weir does not move the offset unasked "+
			"(the source option ResetOnOutOfRange goes on from the log's beginning): %w", split, next, end, cause)
	}
	return fmt.Errorf("kafka: %s: offset %d is out of the log's range [%d, %d); weir does not move it unasked "+
		"(the source option ResetOnOutOfRange goes on from the log's beginning): %w", split, next, start, end, cause)
}

// next returns the oldest fetch not yet returned, if there is one, or
// ErrEndOfInput once every partition has ended.
func (r *reader[T]) next() (connector.Fetch[T], bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ready) > 0 {
		f := r.ready[0]
		r.ready[0] = connector.Fetch[T]{}
		r.ready = r.ready[1:]
		return f, true, nil
	}
	if r.active == 0 {
		return connector.Fetch[T]{}, false, connector.ErrEndOfInput
	}
	return connector.Fetch[T]{}, false, nil
}

// add turns one partition's polled records into a Fetch. r.mu is held.
func (r *reader[T]) add(p kgo.FetchTopicPartition) error {
	tp := topicPartition{p.Topic, p.Partition}
	st := r.parts[tp]
	if st == nil || st.ended {
		return nil
	}
	f := connector.Fetch[T]{Split: st.split, Next: st.next}
	for _, rec := range p.Records {
		if rec.Offset < st.next {
			continue
		}
		if st.stop >= 0 && rec.Offset >= st.stop {
			f.EndOfSplit = true
			break
		}
		f.Next = rec.Offset + 1
		if rec.Attrs.IsControl() {
			continue
		}
		v, err := r.src.deserialize(rec)
		if err != nil {
			return fmt.Errorf("kafka: deserializing the record at offset %d of %s: %w", rec.Offset, st.split, err)
		}
		f.Records = append(f.Records, v)
		f.Timestamps = append(f.Timestamps, rec.Timestamp.UnixMilli())
	}
	if st.stop >= 0 && f.Next >= st.stop {
		f.EndOfSplit = true
	}
	if f.EndOfSplit {
		// Offsets between the last record and the stop offset were
		// compacted away or belonged to aborted transactions.
		f.Next = max(f.Next, st.stop)
		st.ended = true
		r.active--
		delete(r.paused, tp)
		r.cl.RemoveConsumePartitions(map[string][]int32{tp.topic: {tp.partition}})
	}
	if len(f.Records) == 0 && f.Next == st.next && !f.EndOfSplit {
		return nil
	}
	st.next = f.Next
	r.ready = append(r.ready, f)
	return nil
}

// SplitStates implements connector.SplitStateReader: where the reader
// started each split that had no checkpointed offset, and a bounded
// reader's end offsets (see splitState).
func (r *reader[T]) SplitStates() map[string][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string][]byte, len(r.parts))
	for _, st := range r.parts {
		var ss splitState
		if r.src.cfg.bounded {
			ss.End = &st.stop
		}
		if st.start >= 0 {
			ss.Start = &st.start
		}
		if ss.End == nil && ss.Start == nil {
			continue
		}
		b, _ := json.Marshal(ss) // cannot fail
		m[st.split] = b
	}
	return m
}

// CommitOffsets implements connector.OffsetCommitter: it commits the
// offsets of a completed checkpoint to the source's consumer group, if it
// has one, for monitoring (consumer lag). They are never read back for
// fault tolerance; a Committed starting offset only applies to
// partitions without a checkpointed offset.
func (r *reader[T]) CommitOffsets(ctx context.Context, checkpointID int64, offsets map[string]int64) error {
	group := r.src.cfg.group
	if group == "" {
		return nil
	}
	commits := make(kadm.Offsets)
	for split, off := range offsets {
		tp, err := parseSplit(split)
		if err != nil {
			return err
		}
		if off < 0 {
			continue
		}
		commits.Add(kadm.Offset{Topic: tp.topic, Partition: tp.partition, At: off, LeaderEpoch: -1})
	}
	if len(commits) == 0 {
		return nil
	}
	rctx, cancel := r.cl.withTimeout(ctx)
	defer cancel()
	resps, err := kadm.NewClient(r.cl.Client).CommitOffsets(rctx, group, commits)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return r.cl.describe(err, fmt.Sprintf("committing the offsets of checkpoint %d to group %q", checkpointID, group))
	}
	return nil
}

// Close implements connector.Reader.
func (r *reader[T]) Close() error {
	r.cl.Close()
	return nil
}
