package kafka_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/kafka"
)

// versions are the protocol versions the transactional tests run
// against: the newest, where ending a transaction bumps the producer
// epoch (KIP-890), and Kafka 3.9, where it does not.
var versions = []struct {
	name string
	opts []kfake.Opt
}{
	{"latest", nil},
	{"3.9", []kfake.Opt{kfake.MaxVersions(kversion.V3_9_0())}},
}

// writer opens a sink writer as the engine does.
func writer(t *testing.T, sink *kafka.Sink[string], subtask, parallelism int) connector.SinkWriter[string] {
	t.Helper()
	w, err := sink.NewWriter(testCtx(t), connector.WriterInfo{Subtask: subtask, Parallelism: parallelism, UID: "sink", ExactlyOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, w connector.SinkWriter[string], vs ...string) {
	t.Helper()
	for _, v := range vs {
		if err := w.Write(v, 1_000); err != nil {
			t.Fatal(err)
		}
	}
}

func prepare(t *testing.T, w connector.SinkWriter[string], id int64) [][]byte {
	t.Helper()
	cs, err := w.PrepareCommit(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func commit(t *testing.T, w connector.SinkWriter[string], cs [][]byte) {
	t.Helper()
	if err := w.(connector.Committer).Commit(testCtx(t), cs); err != nil {
		t.Fatal(err)
	}
}

func vals(prefix string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return vs
}

// readCommitted waits until no transaction is open on the topic, then
// reads it with a read_committed consumer.
func readCommitted(t *testing.T, brokers []string, topic string) []string {
	t.Helper()
	settle(t, brokers, topic)
	got, err := kafka.ReadCommitted(testCtx(t), brokers, topic, value)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// settle waits until the topic's last stable offsets equal its high
// watermarks: no transaction holds read_committed consumers back. Kafka
// answers a commit or abort before it has written the transaction's
// markers to every partition, so a real broker may need a moment; kfake
// writes them at once. A transaction still open after 10 seconds fails
// the test.
func settle(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var open []string
		stable.Each(func(o kadm.ListedOffset) {
			end, ok := ends.Lookup(o.Topic, o.Partition)
			if o.Err != nil || !ok || end.Err != nil {
				t.Fatalf("listing the offsets of %s-%d: %v, %v", o.Topic, o.Partition, o.Err, end.Err)
			}
			if end.Offset != o.Offset {
				open = append(open, fmt.Sprintf("%s-%d: last stable offset %d, high watermark %d", o.Topic, o.Partition, o.Offset, end.Offset))
			}
		})
		if len(open) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a transaction is still open: %s", strings.Join(open, "; "))
		}
	}
}

// linger leaves what a process that died in the middle of a transaction
// leaves: a transaction open on the brokers with the given records in it.
func linger(t *testing.T, brokers []string, txnID, topic string, vs ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // does not end the transaction
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range vs {
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func sameSet(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("read %d records %q, want %d %q", len(got), got, len(want), want)
	}
}

// TestExactlyOnceSinkThroughFailures drives an exactly-once writer
// through the engine's protocol — write, PrepareCommit(1), Commit; write,
// PrepareCommit(2), write more, crash before committing 2 — and restores
// a new writer from checkpoint 1 or from checkpoint 2. From 1, the
// restored commit of 1 is a no-op and transactions 2 and 3 are aborted;
// from 2, the new writer commits 2 and aborts 3. A read_committed
// consumer sees every record of a committed checkpoint exactly once and
// nothing else, and no transaction is left open.
func TestExactlyOnceSinkThroughFailures(t *testing.T) {
	for _, v := range versions {
		for _, restore := range []int64{1, 2} {
			for _, closed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/restore=%d/closed=%v", v.name, restore, closed), func(t *testing.T) {
					brokers := newCluster(t, 3, []string{"out"}, v.opts...)
					throughFailures(t, brokers, "out", "job", restore, closed)
				})
			}
		}
	}
}

func throughFailures(t *testing.T, brokers []string, topic, prefix string, restore int64, closed bool) {
	sink, err := kafka.NewSink(stringRecord(""), kafka.BootstrapServers(brokers...), kafka.Topic(topic),
		kafka.Guarantee(connector.ExactlyOnce), kafka.TransactionalIDPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	w1 := writer(t, sink, 0, 1)
	write(t, w1, vals("a", 30)...)
	cs1 := prepare(t, w1, 1)
	commit(t, w1, cs1)
	write(t, w1, vals("b", 30)...)
	cs2 := prepare(t, w1, 2)
	// The crash, with records in no checkpoint: a failing writer is
	// closed and aborts its open transaction; a killed process leaves it
	// open. Prepared transactions stay open either way.
	if closed {
		write(t, w1, vals("c", 30)...)
		if err := w1.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		linger(t, brokers, kafka.TransactionalID(prefix, 0, 3), topic, vals("c", 30)...)
	}

	w2 := writer(t, sink, 0, 1)
	defer w2.Close()
	restored := map[int64][][]byte{1: cs1, 2: cs2}[restore]
	commit(t, w2, restored) // as the engine does on restore
	commit(t, w2, restored) // idempotent
	write(t, w2, vals("d", 30)...)
	cs3 := prepare(t, w2, restore+1)
	commit(t, w2, cs3)

	want := append(vals("a", 30), vals("d", 30)...)
	if restore == 2 {
		want = append(want, vals("b", 30)...)
	}
	sameSet(t, readCommitted(t, brokers, topic), want)

	if restore == 1 {
		// Transaction 2 was aborted: committing it is an error.
		err := w2.(connector.Committer).Commit(testCtx(t), cs2)
		if err == nil || !strings.Contains(err.Error(), "was aborted") {
			t.Fatalf("commit of the aborted transaction: %v", err)
		}
		t.Log(err)
	}
}

// TestExactlyOnceSinkExpiredTransaction prepares a transaction that
// outlives its transaction timeout, so the brokers abort it: committing
// it then fails with an error that says its records are lost, and none
// of them is visible.
func TestExactlyOnceSinkExpiredTransaction(t *testing.T) {
	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			brokers := newCluster(t, 1, []string{"out"}, v.opts...)
			sink, err := kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(brokers...), kafka.Guarantee(connector.ExactlyOnce),
				kafka.TransactionalIDPrefix("job"), kafka.TransactionTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			w := writer(t, sink, 0, 1)
			defer w.Close()
			write(t, w, vals("x", 5)...)
			cs := prepare(t, w, 1)
			time.Sleep(300 * time.Millisecond) // the brokers' transaction timer, not ours
			err = w.(connector.Committer).Commit(testCtx(t), cs)
			if err == nil || !strings.Contains(err.Error(), "5 records are lost") || !connector.IsPermanent(err) {
				t.Fatalf("commit of an expired transaction: %v, want a permanent error saying the records are lost", err)
			}
			t.Log(err)
			if got := readCommitted(t, brokers, "out"); len(got) != 0 {
				t.Fatalf("read %q from an expired transaction", got)
			}
		})
	}
}

// TestExactlyOnceSinkRescale restores two subtasks' prepared
// transactions into one: the remaining subtask commits the restored
// checkpoint's transactions of both and aborts what both left open.
func TestExactlyOnceSinkRescale(t *testing.T) {
	brokers := newCluster(t, 2, []string{"out"})
	rescale(t, brokers, "out", "job")
}

func rescale(t *testing.T, brokers []string, topic, prefix string) {
	sink, err := kafka.NewSink(stringRecord(topic), kafka.BootstrapServers(brokers...), kafka.Guarantee(connector.ExactlyOnce), kafka.TransactionalIDPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	var restored [][]byte
	var want []string
	for sub := range 2 {
		w := writer(t, sink, sub, 2) // killed: never closed
		write(t, w, vals(fmt.Sprintf("s%d-a", sub), 10)...)
		commit(t, w, prepare(t, w, 1))
		write(t, w, vals(fmt.Sprintf("s%d-b", sub), 10)...)
		restored = append(restored, prepare(t, w, 2)...)
		linger(t, brokers, kafka.TransactionalID(prefix, sub, 3), topic, vals(fmt.Sprintf("s%d-c", sub), 10)...)
		want = append(want, vals(fmt.Sprintf("s%d-a", sub), 10)...)
		want = append(want, vals(fmt.Sprintf("s%d-b", sub), 10)...)
	}
	w := writer(t, sink, 0, 1)
	defer w.Close()
	commit(t, w, restored)
	commit(t, w, prepare(t, w, 3)) // an empty checkpoint; aborts the lingering transactions first
	sameSet(t, readCommitted(t, brokers, topic), want)
}

// TestExactlyOnceSinkCommittables checks what a checkpoint's committable
// says, and that an idle checkpoint still has one (naming no
// transaction), so that a restored writer knows where it resumes.
func TestExactlyOnceSinkCommittables(t *testing.T) {
	brokers := newCluster(t, 1, []string{"out"})
	sink, err := kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(brokers...), kafka.Guarantee(connector.ExactlyOnce), kafka.TransactionalIDPrefix("p"))
	if err != nil {
		t.Fatal(err)
	}
	w := writer(t, sink, 3, 4)
	defer w.Close()
	write(t, w, "x")
	cs := prepare(t, w, 5)
	if len(cs) != 1 || !strings.Contains(string(cs[0]), `"txn":"p-3-1"`) || !strings.Contains(string(cs[0]), `"checkpoint":5`) {
		t.Fatalf("committables %q", cs)
	}
	commit(t, w, cs)
	if cs := prepare(t, w, 6); len(cs) != 1 || string(cs[0]) != `{"checkpoint":6}` {
		t.Fatalf("idle checkpoint's committables %q", cs)
	}
	write(t, w, "y")
	if cs := prepare(t, w, 9); len(cs) != 1 || !strings.Contains(string(cs[0]), `"txn":"p-3-7"`) {
		t.Fatalf("committables %q", cs)
	}
	if _, err := w.PrepareCommit(testCtx(t), 9); err == nil {
		t.Fatal("checkpoint 9 prepared twice")
	}
}

// TestAtLeastOnceSinkAfterRestart writes, checkpoints, writes more and
// fails; a new writer replays from the checkpoint. Every record is in
// the topic, some twice.
func TestAtLeastOnceSinkAfterRestart(t *testing.T) {
	brokers := newCluster(t, 2, []string{"out"})
	sink, err := kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(brokers...), kafka.Guarantee(connector.AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	all := vals("r", 200)
	w1 := writer(t, sink, 0, 1)
	write(t, w1, all[:100]...)
	if cs := prepare(t, w1, 1); cs != nil {
		t.Fatalf("at-least-once committables %q", cs)
	}
	write(t, w1, all[100:150]...)
	w1.Close() // the failure; records 100.. are replayed

	w2 := writer(t, sink, 0, 1)
	defer w2.Close()
	write(t, w2, all[100:]...)
	prepare(t, w2, 2)
	got := readCommitted(t, brokers, "out")
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, v := range all {
		if seen[v] == 0 {
			t.Fatalf("record %s missing", v)
		}
	}
	if len(seen) != len(all) {
		t.Fatalf("%d distinct records, want %d", len(seen), len(all))
	}
}

// TestNoneSinkDeliversOnClose checks that a none writer's records arrive
// once the writer closes.
func TestNoneSinkDeliversOnClose(t *testing.T) {
	brokers := newCluster(t, 1, []string{"out"})
	sink, err := kafka.NewSink(stringRecord(""), kafka.BootstrapServers(brokers...), kafka.Topic("out"), kafka.Guarantee(connector.None))
	if err != nil {
		t.Fatal(err)
	}
	w := writer(t, sink, 0, 1)
	write(t, w, vals("n", 50)...)
	prepare(t, w, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sameSet(t, readCommitted(t, brokers, "out"), vals("n", 50))
}

// TestSinkErrors checks configuration errors, a missing topic and
// unreachable brokers.
func TestSinkErrors(t *testing.T) {
	brokers := newCluster(t, 1, []string{"out"})
	ctx := testCtx(t)
	sink, err := kafka.NewSink(stringRecord(""), kafka.BootstrapServers(brokers...), kafka.Topic("nope"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.NewWriter(ctx, connector.WriterInfo{}); err == nil || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
		t.Fatalf("missing topic: %v", err)
	}
	sink, err = kafka.NewSink(stringRecord("out"), kafka.BootstrapServers("127.0.0.1:1"), kafka.RequestTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.NewWriter(ctx, connector.WriterInfo{}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("brokers down: %v", err)
	}
	// A broker that closes every connection right after the client's
	// first request, as one that wants TLS (the version negotiation) or
	// SASL (the first request after it) does with a client that has
	// neither: the writer's check retries until the request timeout, then
	// says why.
	for _, c := range []struct {
		key  int16
		says string
	}{
		{int16(kmsg.ApiVersions), "during api versions negotiation"},
		{int16(kmsg.Metadata), "the broker closed the connection (a broker that wants TLS or SASL"},
	} {
		closing, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer closing.Close()
		closing.ControlKey(c.key, func(kmsg.Request) (kmsg.Response, error, bool) {
			closing.KeepControl()
			return nil, errors.New("closed"), true
		})
		sink, err = kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(closing.ListenAddrs()...), kafka.Topic("out"), kafka.RequestTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.NewWriter(ctx, connector.WriterInfo{}); err == nil || !strings.Contains(err.Error(), "did not answer within 1s") ||
			!strings.Contains(err.Error(), c.says) {
			t.Fatalf("a broker that closes connections at %s: %v", kmsg.NameForKey(c.key), err)
		}
	}
	if _, err := kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(brokers...), kafka.Guarantee(connector.ExactlyOnce)); err == nil ||
		!strings.Contains(err.Error(), "TransactionalIDPrefix") {
		t.Fatalf("exactly-once without a prefix: %v", err)
	}
	if _, err := kafka.NewSink(stringRecord("out"), kafka.BootstrapServers(brokers...), kafka.Guarantee("bogus")); err == nil {
		t.Fatal("unknown delivery guarantee accepted")
	}
}
