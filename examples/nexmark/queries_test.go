package nexmark_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	nx "github.com/weirstream/weir/examples/nexmark"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var (
	flagSeed  = flag.Uint64("nexmark.seed", 0, "run every query with this seed only")
	flagSeeds = flag.Int("nexmark.seeds", 2, "seeds per query")
)

// plan is one seeded run: the events, the job's parallelism and
// checkpoint interval, and the failures to inject.
type plan struct {
	seed        uint64
	cfg         nx.GenConfig
	parallelism int
	interval    int // ms
	// first fails a subtask of the source's vertex after firstAfter
	// records in the first deployment; second fails the query's stateful
	// vertex (second) after secondAfter records in the deployment that
	// follows the first restart.
	firstAfter          int64
	second              string
	secondAfter         int64
	reproduce, describe string
}

func drawPlan(test string, seed uint64, vertices []string) plan {
	r := rand.New(rand.NewPCG(seed, 13))
	pick := func(vs ...int) int { return vs[r.IntN(len(vs))] }
	cfg := nx.DefaultGenConfig()
	cfg.Seed = seed
	cfg.Events = int64(pick(2000, 3000, 4000))
	cfg.Splits = pick(1, 2, 3, 4)
	cfg.Rate = float64(pick(20, 50, 200))
	p := plan{seed: seed, cfg: cfg, parallelism: pick(1, 2, 3), interval: pick(10, 20)}
	per := cfg.Events / int64(p.parallelism)
	p.firstAfter = per/4 + r.Int64N(per/2)
	p.second = vertices[r.IntN(len(vertices))]
	p.secondAfter = 1 + r.Int64N(per/8)
	p.reproduce = fmt.Sprintf("seed %d; reproduce with: go test -race ./examples/nexmark/ -run '^%s$' -nexmark.seed=%d", seed, test, seed)
	p.describe = fmt.Sprintf("%d events on %d splits at %v/s, parallelism %d, checkpoints every %d ms, fail nexmark after %d records, then %s after %d",
		cfg.Events, cfg.Splits, cfg.Rate, p.parallelism, p.interval, p.firstAfter, p.second, p.secondAfter)
	return p
}

// tally counts, over the whole suite, the restarts that restored a
// checkpoint: were there none, the runs would test recovery from the
// beginning only.
var fromCheckpoint atomic.Int64

// execute runs build over p's events with failures injected and returns
// what its exactly-once sink committed, and the events.
func execute[T any](t *testing.T, p plan, build func(stream.Stream[nx.Event]) stream.Stream[T]) ([]T, []nx.Event) {
	t.Helper()
	gen, err := nx.NewGenerator(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := nx.NewSource(gen, 32)
	if err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewCollector[T](true)
	faults := streamtest.NewFaults()
	first := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("nexmark"), streamtest.InAttempt(0), streamtest.AfterRecords(p.firstAfter))
	second := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex(p.second), streamtest.InAttempt(1), streamtest.AfterRecords(p.secondAfter))
	// Each source batch waits a little, so that checkpoints complete
	// while the input is read.
	faults.Add(stream.FaultBatch, streamtest.Delay(time.Millisecond), streamtest.OnVertex("nexmark"), streamtest.Always())
	res := streamtest.Run(t, func(env *stream.Environment) {
		stream.SinkTo(build(src.Events(env)), connector.Sink[T](sink), stream.Uid("sink"))
	}, streamtest.WithFaults(faults), streamtest.Config(
		fmt.Sprint("parallelism.default=", p.parallelism), fmt.Sprintf("execution.checkpointing.interval=%d ms", p.interval),
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"))
	if res.Err != nil {
		t.Fatalf("%s\n%s\nthe job failed: %v", p.reproduce, p.describe, res.Err)
	}
	if !first.Fired() {
		t.Fatalf("%s\n%s\nthe first failure never struck", p.reproduce, p.describe)
	}
	restored := 0
	for _, ev := range res.Events.All() {
		if ev.Kind == stream.EventRestored && ev.Checkpoint != 0 {
			restored++
		}
	}
	fromCheckpoint.Add(int64(restored))
	t.Logf("%s; second failure struck: %v; %d restores from a checkpoint", p.describe, second.Fired(), restored)
	return sink.Results(), gen.All()
}

// diffMultisets reports rows missing from got and rows got has beyond
// want (duplicates included), a few of each.
func diffMultisets[T any](got, want []T) string {
	count := map[string]int{}
	for _, w := range want {
		count[fmt.Sprintf("%+v", w)]++
	}
	for _, g := range got {
		count[fmt.Sprintf("%+v", g)]--
	}
	var missing, extra []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		switch n := count[k]; {
		case n > 0:
			missing = append(missing, fmt.Sprintf("%d× %s", n, k))
		case n < 0:
			extra = append(extra, fmt.Sprintf("%d× %s", -n, k))
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("%d rows, want %d; %d rows missing (first %v); %d rows extra or duplicated (first %v)",
		len(got), len(want), len(missing), first(missing), len(extra), first(extra))
}

func first(s []string) []string { return s[:min(len(s), 3)] }

// appendOnly checks a query whose result is a multiset of rows.
func appendOnly[T any](build func(stream.Stream[nx.Event]) stream.Stream[T], oracle func([]nx.Event) []T) func(*testing.T, plan) {
	return func(t *testing.T, p plan) {
		got, events := execute(t, p, build)
		want := oracle(events)
		if d := diffMultisets(got, want); d != "" {
			t.Fatalf("%s\n%s\n%s", p.reproduce, p.describe, d)
		}
	}
}

// updating checks a query whose result is an updating table: each key's
// versions are 1 to n, each once, and its version n is the oracle's row.
func updating[K comparable, T any](build func(stream.Stream[nx.Event]) stream.Stream[T], oracle func([]nx.Event) map[K]T,
	key func(T) K, version func(*T) *int64) func(*testing.T, plan) {
	return func(t *testing.T, p plan) {
		got, events := execute(t, p, build)
		want := oracle(events)
		rows := map[K]map[int64]T{}
		var problems []string
		for _, r := range got {
			k, v := key(r), *version(&r)
			if rows[k] == nil {
				rows[k] = map[int64]T{}
			}
			if _, dup := rows[k][v]; dup {
				problems = append(problems, fmt.Sprintf("key %v: version %d twice", k, v))
			}
			rows[k][v] = r
		}
		for k, vs := range rows {
			n := int64(len(vs))
			last, ok := vs[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("key %v: %d versions, not 1 to %d", k, n, n))
				continue
			}
			*version(&last) = 0
			w, ok := want[k]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("key %v: not in the oracle: %+v", k, last))
			case fmt.Sprintf("%+v", w) != fmt.Sprintf("%+v", last):
				problems = append(problems, fmt.Sprintf("key %v: final row %+v, want %+v", k, last, w))
			}
		}
		for k, w := range want {
			if _, ok := rows[k]; !ok {
				problems = append(problems, fmt.Sprintf("key %v: missing, want %+v", k, w))
			}
		}
		if len(want) == 0 {
			problems = append(problems, "the oracle is empty: the events test nothing")
		}
		if len(problems) > 0 {
			slices.Sort(problems)
			t.Fatalf("%s\n%s\n%d problems over %d rows (first %v)", p.reproduce, p.describe, len(problems), len(got), first(problems))
		}
	}
}

// checkQ12 checks q12's processing-time windows: every bid counted once,
// no bidder's window twice.
func checkQ12(t *testing.T, p plan) {
	got, events := execute(t, p, nx.Q12)
	want := nx.OracleQ12(events)
	sums := map[int64]int64{}
	windows := map[[2]int64]bool{}
	var problems []string
	for _, r := range got {
		if windows[[2]int64{r.Bidder, r.Start}] {
			problems = append(problems, fmt.Sprintf("bidder %d: window %d twice", r.Bidder, r.Start))
		}
		windows[[2]int64{r.Bidder, r.Start}] = true
		if r.Count < 1 || r.End-r.Start != 10_000 {
			problems = append(problems, fmt.Sprintf("bad row %+v", r))
		}
		sums[r.Bidder] += r.Count
	}
	if !maps.Equal(sums, want) {
		problems = append(problems, fmt.Sprintf("bids per bidder %v, want %v", sums, want))
	}
	if len(problems) > 0 {
		t.Fatalf("%s\n%s\n%v", p.reproduce, p.describe, first(problems))
	}
}

type qcase struct {
	name string
	// vertices are the uids of the query's vertices a second failure
	// may strike in.
	vertices []string
	check    func(*testing.T, plan)
}

func cases() []qcase {
	src := []string{"nexmark"}
	return []qcase{
		{"q0", src, appendOnly(nx.Q0, nx.OracleQ0)},
		{"q1", src, appendOnly(nx.Q1, nx.OracleQ1)},
		{"q2", src, appendOnly(nx.Q2, nx.OracleQ2)},
		{"q3", []string{"q3"}, appendOnly(nx.Q3, nx.OracleQ3)},
		{"q4", []string{"q4-max", "q4"}, updating(nx.Q4, nx.OracleQ4, func(r nx.Q4Row) int64 { return r.Category }, func(r *nx.Q4Row) *int64 { return &r.Version })},
		{"q5", []string{"q5-counts", "q5"}, appendOnly(nx.Q5, nx.OracleQ5)},
		{"q7", []string{"q7"}, appendOnly(nx.Q7, nx.OracleQ7)},
		{"q8", []string{"q8"}, appendOnly(nx.Q8, nx.OracleQ8)},
		{"q9", []string{"q9"}, updating(nx.Q9, nx.OracleQ9, func(r nx.Q9Row) int64 { return r.Auction.ID }, func(r *nx.Q9Row) *int64 { return &r.Version })},
		{"q11", []string{"q11"}, appendOnly(nx.Q11, nx.OracleQ11)},
		{"q12", []string{"q12"}, checkQ12},
		{"q14", src, appendOnly(nx.Q14, nx.OracleQ14)},
		{"q15", []string{"q15"}, updating(nx.Q15, nx.OracleQ15, func(r nx.Q15Row) string { return r.Day }, func(r *nx.Q15Row) *int64 { return &r.Version })},
		{"q16", []string{"q16"}, updating(nx.Q16, nx.OracleQ16, func(r nx.Q16Row) [2]string { return [2]string{r.Channel, r.Day} }, func(r *nx.Q16Row) *int64 { return &r.Version })},
		{"q17", []string{"q17"}, updating(nx.Q17, nx.OracleQ17, func(r nx.Q17Row) nx.Q17OracleKey { return nx.Q17OracleKey{Auction: r.Auction, Day: r.Day} }, func(r *nx.Q17Row) *int64 { return &r.Version })},
		{"q18", []string{"q18"}, updating(nx.Q18, nx.OracleQ18, func(r nx.Q18Row) [2]int64 { return [2]int64{r.Bid.Bidder, r.Bid.Auction} }, func(r *nx.Q18Row) *int64 { return &r.Version })},
		{"q19", []string{"q19"}, updating(nx.Q19, nx.OracleQ19, func(r nx.Q19Row) int64 { return r.Auction }, func(r *nx.Q19Row) *int64 { return &r.Version })},
		{"q20", []string{"q20"}, appendOnly(nx.Q20, nx.OracleQ20)},
		{"q21", src, appendOnly(nx.Q21, nx.OracleQ21)},
		{"q22", src, appendOnly(nx.Q22, nx.OracleQ22)},
	}
}

// TestQueriesExactlyOnce runs every query over generated events, seeded,
// failing a source subtask once a quarter to three quarters of its input
// is read and then a subtask of one of the query's stateful vertices
// soon after the restart, with exactly-once checkpoints every 10 or 20
// ms, and diffs the committed output against the query's oracle. The seed
// draws the events (count, splits, rate), the parallelism, the interval
// and the failures; a failing seed is printed with the command that
// reruns it. Each query gets its own seeds, so the suite covers
// 20 × -nexmark.seeds plans.
func TestQueriesExactlyOnce(t *testing.T) {
	for i, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			seeds := []uint64{uint64(101*i + 1), uint64(101*i + 2)}
			if *flagSeeds != 2 {
				seeds = seeds[:0]
				for s := range *flagSeeds {
					seeds = append(seeds, uint64(101*i+1+s))
				}
			}
			if *flagSeed != 0 {
				seeds = []uint64{*flagSeed}
			}
			for _, seed := range seeds {
				p := drawPlan("TestQueriesExactlyOnce/"+c.name, seed, c.vertices)
				t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { c.check(t, p) })
			}
		})
	}
	if !t.Failed() && *flagSeed == 0 && fromCheckpoint.Load() == 0 {
		t.Fatal("no restart restored a checkpoint: the runs test recovery from the beginning only")
	}
}

// TestOraclesAreNotEmpty: at the test sizes every oracle has rows, so no
// comparison passes by having nothing to compare.
func TestOraclesAreNotEmpty(t *testing.T) {
	cfg := nx.DefaultGenConfig()
	cfg.Events, cfg.Splits, cfg.Rate = 2000, 2, 50
	gen, err := nx.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev := gen.All()
	sizes := map[string]int{
		"q0": len(nx.OracleQ0(ev)), "q1": len(nx.OracleQ1(ev)), "q2": len(nx.OracleQ2(ev)), "q3": len(nx.OracleQ3(ev)),
		"q4": len(nx.OracleQ4(ev)), "q5": len(nx.OracleQ5(ev)), "q7": len(nx.OracleQ7(ev)), "q8": len(nx.OracleQ8(ev)),
		"q9": len(nx.OracleQ9(ev)), "q11": len(nx.OracleQ11(ev)), "q12": len(nx.OracleQ12(ev)), "q14": len(nx.OracleQ14(ev)),
		"q15": len(nx.OracleQ15(ev)), "q16": len(nx.OracleQ16(ev)), "q17": len(nx.OracleQ17(ev)), "q18": len(nx.OracleQ18(ev)),
		"q19": len(nx.OracleQ19(ev)), "q20": len(nx.OracleQ20(ev)), "q21": len(nx.OracleQ21(ev)), "q22": len(nx.OracleQ22(ev)),
	}
	var empty []string
	for q, n := range sizes {
		if n == 0 {
			empty = append(empty, q)
		}
	}
	slices.Sort(empty)
	if len(empty) > 0 {
		t.Fatalf("empty oracles: %s (sizes %v)", strings.Join(empty, ", "), sizes)
	}
	t.Logf("oracle rows: %v", sizes)
}
