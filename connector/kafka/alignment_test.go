package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestSourceWatermarkAlignment reads, with watermark alignment, a topic
// of three partitions at parallelism 2: partition 0 (subtask 0's) covers
// its span of event time in 20 ms steps, partition 1 (subtask 1's) in 1
// ms steps, and partition 2 (subtask 0's too) stays empty, idle. The
// reader pauses partition 0 while it is ahead; subtask 0's poll then
// waits on partition 2 alone, which never has a record, so partition 0
// is read again only if the source wakes the poll (connector.FetchWaker)
// to resume it.
// The test checks that no partition is emitted further ahead of the other
// than the drift and a few polls, that every record arrives once, and,
// without alignment, that partition 0 runs ahead by more than that bound,
// so the aligned run's check could fail.
func TestSourceWatermarkAlignment(t *testing.T) {
	const (
		span    = 6_000 // ms
		maxPoll = 10
		drift   = 500 * time.Millisecond
	)
	steps := []int64{20, 1}
	for _, aligned := range []bool{true, false} {
		t.Run(fmt.Sprintf("aligned=%v", aligned), func(t *testing.T) {
			brokers := newCluster(t, 3, []string{"skew"})
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			var recs []*kgo.Record
			want := 0
			for p, step := range steps {
				for i := int64(0); i*step < span; i++ {
					recs = append(recs, &kgo.Record{Topic: "skew", Partition: int32(p), Value: fmt.Appendf(nil, "%d:%d", p, i*step),
						Timestamp: time.UnixMilli(1_000_000 + i*step)})
					want++
				}
			}
			err = cl.ProduceSync(testCtx(t), recs...).FirstErr()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}

			src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("skew"),
				kafka.GroupID("skew"), kafka.MaxPollRecords(maxPoll),
				// A resumed partition waits for the fetch in flight for
				// partition 2, which returns after this long.
				kafka.ClientOptions(kgo.FetchMaxWait(20*time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			var (
				mu    sync.Mutex
				seen  = map[string]int{}
				pos   = map[int]int64{}
				worst int64
				desc  string
			)
			res := streamtest.Run(t, func(env *stream.Environment) {
				wm := stream.BoundedOutOfOrderness[string](100 * time.Millisecond).
					WithTimestamps(func(_ string, ts int64) int64 { return ts }).
					WithIdleness(200 * time.Millisecond)
				if aligned {
					wm = wm.WithWatermarkAlignment("skew", drift, 5*time.Millisecond)
				}
				read := stream.Map(stream.FromSource(env, src, "skew", wm), func(v string) string {
					p, ts := splitValue(t, v)
					mu.Lock()
					defer mu.Unlock()
					seen[v]++
					pos[p] = ts
					// A partition not read yet is at -1; one read to its
					// last record holds nothing back.
					other, ok := pos[1-p]
					if !ok {
						other = -1
					}
					if last := (span - 1) / steps[1-p] * steps[1-p]; other < last && ts-other > worst {
						worst, desc = ts-other, fmt.Sprintf("partition %d at %d ms while partition %d was at %d ms", p, ts, 1-p, other)
					}
					if len(seen) == want {
						cancel()
					}
					return v
				}, stream.Uid("track"))
				stream.SinkTo(read, streamtest.NewCollector[string](false), stream.Uid("sink"))
			}, streamtest.Context(ctx), streamtest.Config("parallelism.default=2"))
			if len(seen) != want {
				t.Fatalf("%d of %d records arrived (job: %v)", len(seen), want, res.Err)
			}
			if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
				t.Fatal(res.Err)
			}
			for v, n := range seen {
				if n != 1 {
					t.Fatalf("%s arrived %d times", v, n)
				}
			}
			bound := drift.Milliseconds() + 5*maxPoll*steps[0]
			t.Logf("greatest lead %d ms (bound %d ms): %s", worst, bound, desc)
			if aligned && worst > bound {
				t.Fatalf("%s: %d ms ahead, more than the drift and 5 polls (%d ms)", desc, worst, bound)
			}
			if !aligned && worst <= bound {
				t.Fatalf("without alignment the greatest lead is %d ms, within the aligned bound (%d ms): the topic does not skew", worst, bound)
			}
		})
	}
}

// splitValue parses "<partition>:<ms>".
func splitValue(t *testing.T, v string) (int, int64) {
	p, ms, ok := strings.Cut(v, ":")
	a, err1 := strconv.Atoi(p)
	b, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Errorf("a record %q", v)
	}
	return a, b
}
