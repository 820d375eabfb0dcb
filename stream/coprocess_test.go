package stream_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type order struct {
	ID     string
	Amount int64
}

type payment struct {
	OrderID string
	Paid    int64
}

type joined struct {
	ID           string
	Amount, Paid int64
}

// join pairs each order with its payment, whichever arrives first.
type join struct {
	orders   state.ValueState[order]
	payments state.ValueState[payment]
}

func (j *join) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	if j.orders, err = stream.ValueState[order](rc, "order"); err != nil {
		return err
	}
	j.payments, err = stream.ValueState[payment](rc, "payment")
	return err
}

func (j *join) ProcessElement1(ctx *stream.Context[string, joined], o order) error {
	if p, ok := j.payments.Value(); ok {
		j.payments.Clear()
		return ctx.Emit(joined{o.ID, o.Amount, p.Paid})
	}
	j.orders.Update(o)
	return nil
}

func (j *join) ProcessElement2(ctx *stream.Context[string, joined], p payment) error {
	if o, ok := j.orders.Value(); ok {
		j.orders.Clear()
		return ctx.Emit(joined{o.ID, o.Amount, p.Paid})
	}
	j.payments.Update(p)
	return nil
}

// TestCoProcessJoinAcrossFailures joins two keyed streams whose matching
// records arrive in opposite orders, under failures, exactly once.
func TestCoProcessJoinAcrossFailures(t *testing.T) {
	const n = 3000
	faults := streamtest.NewFaults()
	first := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("join"), streamtest.OnSubtask(1), streamtest.AfterRecords(800), streamtest.InAttempt(0))
	second := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("orders"), streamtest.OnSubtask(0), streamtest.AfterRecords(600), streamtest.InAttempt(1))
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms")),
		stream.WithLogger(quiet), faults.Option())
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := datagen.New(func(_ int, seq int64) order { return order{fmt.Sprintf("o%d", seq), seq} }, datagen.Count(n), datagen.BatchSize(32), datagen.RatePerSecond(60_000))
	payments, _ := datagen.New(func(_ int, seq int64) payment { return payment{fmt.Sprintf("o%d", n-1-seq), 2 * (n - 1 - seq)} }, datagen.Count(n), datagen.BatchSize(32), datagen.RatePerSecond(60_000))
	os := stream.KeyBy(stream.FromSource(env, orders, "orders", stream.NoWatermarks[order]()), func(o order) string { return o.ID })
	ps := stream.KeyBy(stream.FromSource(env, payments, "payments", stream.NoWatermarks[payment]()), func(p payment) string { return p.OrderID })
	out := stream.CoProcess(stream.Connect(os, ps), stream.CoProcessFunction[string, order, payment, joined](&join{}), stream.Uid("join"))
	sink := streamtest.NewCollector[joined](true)
	stream.SinkTo(out, sink, stream.Uid("sink"))
	if err := env.Execute(context.Background(), "join"); err != nil {
		t.Fatal(err)
	}
	if !first.Fired() || !second.Fired() {
		t.Fatalf("not both failures struck: %s", faults)
	}
	got := sink.Results()
	slices.SortFunc(got, func(a, b joined) int { return int(a.Amount - b.Amount) })
	if len(got) != n {
		t.Fatalf("%d joined records, want %d", len(got), n)
	}
	for i, j := range got {
		if j.Amount != int64(i) || j.Paid != 2*int64(i) || j.ID != fmt.Sprintf("o%d", i) {
			t.Fatalf("joined record %d is %+v", i, j)
		}
	}
}
