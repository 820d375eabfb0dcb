package kafka_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type payment struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Seq     int    `json:"seq"`
}

type balance struct {
	Account string `json:"account"`
	Seq     int    `json:"seq"` // of the payment that produced it
	Balance int64  `json:"balance"`
}

// runningBalance sums each account's payments, emitting the balance after
// each one.
type runningBalance struct{ sum state.ValueState[int64] }

func (f *runningBalance) Open(rc *stream.RuntimeContext[string]) (err error) {
	f.sum, err = stream.ValueState[int64](rc, "balance")
	return err
}

func (f *runningBalance) ProcessElement(ctx *stream.Context[string, balance], p payment) error {
	s, _ := f.sum.Value()
	s += p.Amount
	f.sum.Update(s)
	return ctx.Emit(balance{Account: p.Account, Seq: p.Seq, Balance: s})
}

// seedPayments writes n payments to each of the topic's partitions, the
// accounts of partition p being a<p>-0..a<p>-4, and returns the balances
// a failure-free run emits.
func seedPayments(t *testing.T, brokers []string, topic string, partitions, n int) []balance {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	var want []balance
	sums := map[string]int64{}
	for p := range partitions {
		for i := range n {
			pay := payment{Account: fmt.Sprintf("a%d-%d", p, i%5), Amount: int64(i%7 + 1), Seq: p*n + i}
			b, _ := json.Marshal(pay)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(pay.Account), Value: b})
			sums[pay.Account] += pay.Amount
			want = append(want, balance{Account: pay.Account, Seq: pay.Seq, Balance: sums[pay.Account]})
		}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return want
}

func decodePayment(r *kgo.Record) (payment, error) {
	var p payment
	err := json.Unmarshal(r.Value, &p)
	return p, err
}

func encodeBalance(b balance) (*kgo.Record, error) {
	v, err := json.Marshal(b)
	return &kgo.Record{Key: []byte(b.Account), Value: v}, err
}

func decodeBalance(r *kgo.Record) (balance, error) {
	var b balance
	err := json.Unmarshal(r.Value, &b)
	return b, err
}

// TestJobKafkaToKafkaExactlyOnce runs Kafka source → keyBy → running sum
// → exactly-once Kafka sink on the engine, fails the source twice after
// checkpoints completed, and checks with a read_committed consumer that
// the output holds every balance of a failure-free run exactly once.
func TestJobKafkaToKafkaExactlyOnce(t *testing.T) {
	brokers := newCluster(t, 4, []string{"payments", "balances"})
	balancesJob(t, brokers, "payments", "balances", "balances-job", balancesRun{})
}

// TestJobKafkaToKafkaUnderCommitFaults is TestJobKafkaToKafkaExactlyOnce
// with faults around the Kafka sink's commits as well: a commit that
// fails before it takes effect, one that takes effect and then fails (the
// transaction is committed again after the restore, from the
// checkpoint), the same for that commit after the restore, and a failure
// of the sink right after it acknowledged a checkpoint.
func TestJobKafkaToKafkaUnderCommitFaults(t *testing.T) {
	fail := streamtest.Fail(nil)
	for _, tc := range []struct {
		name string
		add  func(fs *streamtest.Faults) []*streamtest.Fault
	}{
		{"commit-before", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultCommit, fail, streamtest.OnOperator("balances-sink"), streamtest.OnCall(3))}
		}},
		{"commit-after", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("balances-sink"), streamtest.OnSubtask(0), streamtest.OnCall(3)),
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("balances-sink"), streamtest.OnSubtask(0), streamtest.AfterRestore()),
			}
		}},
		{"after-ack", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultAsync, fail, streamtest.OnVertex("balance"), streamtest.OnSubtask(1), streamtest.OnCall(4),
				streamtest.When(func(s stream.FaultSite) bool { return s.Step == s.Steps-1 }))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := newCluster(t, 4, []string{"payments", "balances"})
			balancesJob(t, brokers, "payments", "balances", "balances-job", balancesRun{faults: []func(*streamtest.Faults) []*streamtest.Fault{tc.add}})
		})
	}
}

// balancesRun is what varies between runs of balancesJob.
type balancesRun struct {
	// perPartition is the payments written to each partition (default
	// 500).
	perPartition int
	// faults declare faults besides the source's two failures, which
	// must strike too.
	faults []func(*streamtest.Faults) []*streamtest.Fault
	// ran, if set, is called once the job has ended, before its output
	// is read.
	ran func()
}

// balancesJob runs the job of TestJobKafkaToKafkaExactlyOnce from topic in
// (of 4 partitions) to topic out, with name as its consumer group and
// transactional id prefix, as run says.
func balancesJob(t *testing.T, brokers []string, in, out, name string, run balancesRun) {
	perPartition := cmp.Or(run.perPartition, 500)
	want := seedPayments(t, brokers, in, 4, perPartition)

	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"})
	if err != nil {
		t.Fatal(err)
	}
	var ev streamtest.Events
	faults := streamtest.NewFaults()
	// Two failures of the source, each once a checkpoint more has
	// completed, the second in a later attempt than the first.
	injected := make([]*streamtest.Fault, 2)
	for i := range injected {
		injected[i] = faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("payments"), streamtest.AfterRecords(301),
			streamtest.When(func(s stream.FaultSite) bool {
				if ev.Count(stream.EventCheckpointCompleted) <= i {
					return false
				}
				if i == 0 {
					return true
				}
				first := injected[0].Sites()
				return len(first) > 0 && s.Attempt > first[0].Attempt
			}))
	}
	var extras []*streamtest.Fault
	for _, x := range run.faults {
		extras = append(extras, x(faults)...)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
		ev.Option(),
		faults.Option())
	if err != nil {
		t.Fatal(err)
	}
	src, err := kafka.NewSource(decodePayment, kafka.BootstrapServers(brokers...), kafka.Topics(in),
		kafka.GroupID(name), kafka.Bounded(), kafka.MaxPollRecords(50))
	if err != nil {
		t.Fatal(err)
	}
	sink, err := kafka.NewSink(encodeBalance, kafka.BootstrapServers(brokers...), kafka.Topic(out),
		kafka.Guarantee(connector.ExactlyOnce), kafka.TransactionalIDPrefix(name))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	payments := stream.Map(stream.FromSource(env, src, "payments", stream.NoWatermarks[payment]()), func(p payment) payment {
		if n.Add(1)%10 == 0 {
			time.Sleep(time.Millisecond) // let checkpoints happen while the source reads
		}
		return p
	})
	balances := stream.Process(stream.KeyBy(payments, func(p payment) string { return p.Account }),
		stream.KeyedProcessFunction[string, payment, balance](&runningBalance{}), stream.Uid("balance"))
	stream.SinkTo(balances, sink, stream.Uid("balances-sink"))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := env.Execute(ctx, "balances"); err != nil {
		t.Fatal(err)
	}
	if run.ran != nil {
		run.ran()
	}
	fails := 0
	for _, f := range injected {
		if f.Fired() {
			fails++
		}
	}
	t.Logf("%d failures, %d checkpoints completed, %d restores from a checkpoint, %d payments processed",
		fails, ev.Count(stream.EventCheckpointCompleted), len(ev.Restores()), n.Load())
	if fails != 2 || len(ev.Restores()) == 0 || n.Load() <= int64(len(want)) {
		t.Fatalf("%d failures, %d restores, %d payments processed: the failures did not exercise recovery", fails, len(ev.Restores()), n.Load())
	}
	for _, f := range extras {
		if !f.Fired() {
			t.Fatalf("fault %s did not strike; faults: %s", f, faults)
		}
	}

	settle(t, brokers, out)
	got, err := kafka.ReadCommitted(ctx, brokers, out, decodeBalance)
	if err != nil {
		t.Fatal(err)
	}
	cmp := func(a, b balance) int { return a.Seq - b.Seq }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("%d balances committed, want %d; first difference at %d: %+v, want %+v", len(got), len(want), i, got[i], want[i])
			}
		}
		t.Fatalf("%d balances committed, want %d", len(got), len(want))
	}

	// The source committed completed checkpoints' offsets to its group.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	committed := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At < 0 || o.At > int64(perPartition) {
			t.Errorf("committed offset %+v", o)
		}
		committed++
	})
	if committed == 0 {
		t.Error("the source committed no offsets")
	}
}

// TestBoundedJobResumesToOriginalEnd runs a bounded job that is canceled
// after a checkpoint (retained), produces more records to its topic, and
// resumes a new job, with a new source, from the checkpoint: the output is
// every record of the original end offsets exactly once, and none of
// those written after the first run started.
func TestBoundedJobResumesToOriginalEnd(t *testing.T) {
	brokers := newCluster(t, 2, []string{"events"})
	produce(t, brokers, "events", 2, 500, 1_000_000)
	sink := streamtest.NewCollector[string](true)
	// job builds the job, reading from a new source; pace, if set, is
	// called for every record, and read counts them.
	var read atomic.Int64
	job := func(pace func()) func(*stream.Environment) {
		return func(env *stream.Environment) {
			src, err := kafka.NewSource(value, kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.Bounded(), kafka.MaxPollRecords(20))
			if err != nil {
				t.Fatal(err)
			}
			in := stream.Map(stream.FromSource(env, src, "events", stream.NoWatermarks[string]()), func(v string) string {
				read.Add(1)
				if pace != nil {
					pace()
				}
				return v
			})
			stream.SinkTo(in, sink, stream.Uid("sink"))
		}
	}
	common := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms")
	first := streamtest.Run(t, job(func() { time.Sleep(time.Millisecond) }), // let a checkpoint complete before the input ends
		common, streamtest.JobID("first"), streamtest.UntilCheckpoints(1), streamtest.Timeout(time.Minute))
	if !first.Canceled {
		t.Fatalf("the first run finished before it was canceled: %v", first.Err)
	}

	produce(t, brokers, "events", 2, 100, 2_000_000)
	read.Store(0)
	second := streamtest.Run(t, job(nil), common, streamtest.ResumeFrom(first), streamtest.JobID("second"), streamtest.Timeout(time.Minute))
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	restored, _ := second.Events.Last(stream.EventRestored)
	if n := read.Load(); restored.Checkpoint == 0 || n == 0 {
		t.Fatalf("the second run restored checkpoint %d and read %d records: it did not resume a bounded read in progress", restored.Checkpoint, n)
	}
	got := sink.Results()
	if w := want([]int{0, 1}, 0, 500); !slices.Equal(sorted(got), sorted(w)) {
		t.Fatalf("%d records after resuming, want %d exactly once", len(got), len(w))
	}
}
