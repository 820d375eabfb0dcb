package failover

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// --- graph building helpers ---

// vertex returns the n subtasks of a job vertex.
func vertex(name string, n int) []TaskID {
	out := make([]TaskID, n)
	for i := range out {
		out[i] = TaskID{name, i}
	}
	return out
}

// allToAll connects every producer to every consumer, as a keyBy (hash),
// rebalance or broadcast exchange does.
func allToAll(from, to []TaskID, blocking bool) []Edge {
	var out []Edge
	for _, f := range from {
		for _, t := range to {
			out = append(out, Edge{f, t, blocking})
		}
	}
	return out
}

// pointwise connects producers to consumers the way Flink's forward and
// rescale exchanges do: with equal parallelism subtask i feeds subtask i;
// otherwise each consumer (or producer) takes a contiguous range.
func pointwise(from, to []TaskID, blocking bool) []Edge {
	var out []Edge
	if len(from) >= len(to) {
		for i, f := range from {
			out = append(out, Edge{f, to[i*len(to)/len(from)], blocking})
		}
	} else {
		for i, t := range to {
			out = append(out, Edge{from[i*len(from)/len(to)], t, blocking})
		}
	}
	return out
}

func graph(vertices [][]TaskID, edges ...[]Edge) Graph {
	var g Graph
	for _, v := range vertices {
		g.Tasks = append(g.Tasks, v...)
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, e...)
	}
	return g
}

// task parses "assemble[2]".
func task(s string) TaskID {
	name, idx, ok := strings.Cut(strings.TrimSuffix(s, "]"), "[")
	if !ok {
		panic("bad task " + s)
	}
	i, err := strconv.Atoi(idx)
	if err != nil {
		panic("bad task " + s)
	}
	return TaskID{name, i}
}

func render(ts []TaskID) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, " ")
}

// --- the graphs ---

// gatewayMeter is the flagship streaming job at parallelism 4 with 8 Kafka
// partitions: source and parse chained, keyBy to assemble, then keyBy to
// tenant-cost (forward to its sink) and to model-latency (forward to
// alerts). Every keyBy is an all-to-all pipelined exchange.
func gatewayMeter() Graph {
	src := vertex("source-parse", 8)
	asm := vertex("assemble", 4)
	cost := vertex("tenant-cost", 4)
	costSink := vertex("tenant-cost-sink", 4)
	lat := vertex("model-latency", 4)
	alerts := vertex("alerts", 4)
	return graph([][]TaskID{src, asm, cost, costSink, lat, alerts},
		allToAll(src, asm, false),
		allToAll(asm, cost, false),
		pointwise(cost, costSink, false),
		allToAll(asm, lat, false),
		pointwise(lat, alerts, false))
}

// twoPipelines is one job with two unconnected pipelines.
func twoPipelines() Graph {
	osrc, oagg := vertex("orders-src", 2), vertex("orders-agg", 2)
	csrc, csink := vertex("clicks-src", 2), vertex("clicks-sink", 2)
	return graph([][]TaskID{osrc, oagg, csrc, csink},
		allToAll(osrc, oagg, false),
		pointwise(csrc, csink, false))
}

// chains is source i → map i → sink i with forward exchanges only.
func chains() Graph {
	src, m, sink := vertex("src", 4), vertex("map", 4), vertex("sink", 4)
	return graph([][]TaskID{src, m, sink}, pointwise(src, m, false), pointwise(m, sink, false))
}

// rescale feeds 4 sources into 2 maps pointwise: sources 0,1 → map 0 and
// 2,3 → map 1.
func rescale() Graph {
	src, m := vertex("src", 4), vertex("map", 2)
	return graph([][]TaskID{src, m}, pointwise(src, m, false))
}

// shuffleBatch is a batch job: scan writes blocking results that agg reads
// all-to-all.
func shuffleBatch() Graph {
	scan, agg := vertex("scan", 2), vertex("agg", 2)
	return graph([][]TaskID{scan, agg}, allToAll(scan, agg, true))
}

// pointwiseBatch is scan i → agg i with blocking forward exchanges.
func pointwiseBatch() Graph {
	scan, agg := vertex("scan", 2), vertex("agg", 2)
	return graph([][]TaskID{scan, agg}, pointwise(scan, agg, true))
}

// stagedBatch is a batch job of two pipelined stages joined by a blocking
// shuffle: src → map (forward, pipelined), map → reduce (all-to-all,
// blocking), reduce → sink (forward, pipelined).
func stagedBatch() Graph {
	src, m := vertex("src", 2), vertex("map", 2)
	red, sink := vertex("reduce", 2), vertex("sink", 2)
	return graph([][]TaskID{src, m, red, sink},
		pointwise(src, m, false),
		allToAll(m, red, true),
		pointwise(red, sink, false))
}

// blockingChain is a → b → c, each exchange blocking.
func blockingChain() Graph {
	a, b, c := vertex("a", 1), vertex("b", 1), vertex("c", 1)
	return graph([][]TaskID{a, b, c}, allToAll(a, b, true), allToAll(b, c, true))
}

// --- tests ---

func TestRegions(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Graph
		want string
	}{
		{"gatewaymeter: keyBy makes one region", gatewayMeter(), "{" + render(gatewayMeter().Tasks) + "}"},
		{"two pipelines", twoPipelines(),
			"{orders-src[0] orders-src[1] orders-agg[0] orders-agg[1]} " +
				"{clicks-src[0] clicks-sink[0]} {clicks-src[1] clicks-sink[1]}"},
		{"forward chains", chains(),
			"{src[0] map[0] sink[0]} {src[1] map[1] sink[1]} {src[2] map[2] sink[2]} {src[3] map[3] sink[3]}"},
		{"rescale", rescale(), "{src[0] src[1] map[0]} {src[2] src[3] map[1]}"},
		{"blocking shuffle", shuffleBatch(), "{scan[0]} {scan[1]} {agg[0]} {agg[1]}"},
		{"pipelined stages joined by a blocking shuffle", stagedBatch(),
			"{src[0] map[0]} {src[1] map[1]} {reduce[0] sink[0]} {reduce[1] sink[1]}"},
		{"isolated task", Graph{Tasks: []TaskID{{"a", 0}, {"b", 0}}}, "{a[0]} {b[0]}"},
		{"empty graph", Graph{}, ""},
		{"blocking and pipelined between the same tasks", Graph{
			Tasks: []TaskID{{"a", 0}, {"b", 0}},
			Edges: []Edge{{TaskID{"a", 0}, TaskID{"b", 0}, true}, {TaskID{"a", 0}, TaskID{"b", 0}, false}},
		}, "{a[0] b[0]}"},
		{"a cycle of blocking edges is merged", Graph{
			Tasks: []TaskID{{"a", 0}, {"b", 0}, {"c", 0}, {"d", 0}},
			Edges: []Edge{
				{TaskID{"a", 0}, TaskID{"b", 0}, true},
				{TaskID{"b", 0}, TaskID{"c", 0}, false},
				{TaskID{"c", 0}, TaskID{"a", 0}, true},
				{TaskID{"c", 0}, TaskID{"d", 0}, true},
			},
		}, "{a[0] b[0] c[0]} {d[0]}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRegions(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tc.want {
				t.Errorf("regions:\n got  %s\n want %s", got, tc.want)
			}
		})
	}
}

func TestTasksToRestart(t *testing.T) {
	all := func(g Graph) string { return render(g.Tasks) }
	lostSet := func(ts ...string) ResultAvailable {
		return func(p TaskID) bool {
			for _, s := range ts {
				if task(s) == p {
					return false
				}
			}
			return true
		}
	}
	readFailed := func(producer string) error {
		return fmt.Errorf("task agg: %w", &PartitionError{Producer: task(producer), Err: errors.New("connection reset")})
	}
	for _, tc := range []struct {
		name      string
		g         Graph
		strategy  string
		failed    string
		cause     error
		available ResultAvailable
		want      string
	}{
		// Streaming jobs: every exchange is pipelined.
		{"gatewaymeter region: one region, so everything", gatewayMeter(), Region, "tenant-cost[2]", nil, nil, all(gatewayMeter())},
		{"gatewaymeter region from a source", gatewayMeter(), Region, "source-parse[7]", nil, nil, all(gatewayMeter())},
		{"gatewaymeter full", gatewayMeter(), Full, "alerts[0]", nil, nil, all(gatewayMeter())},
		{"two pipelines region: only the failed one", twoPipelines(), Region, "orders-agg[1]", nil, nil,
			"orders-src[0] orders-src[1] orders-agg[0] orders-agg[1]"},
		{"two pipelines region: a forward chain of the other", twoPipelines(), Region, "clicks-sink[0]", nil, nil,
			"clicks-src[0] clicks-sink[0]"},
		{"two pipelines full", twoPipelines(), Full, "clicks-sink[0]", nil, nil, all(twoPipelines())},
		{"forward chains: only chain 2", chains(), Region, "map[2]", nil, nil, "src[2] map[2] sink[2]"},
		{"forward chains: a source restarts its chain", chains(), Region, "src[0]", nil, nil, "src[0] map[0] sink[0]"},
		{"rescale: the group of map 1", rescale(), Region, "src[3]", nil, nil, "src[2] src[3] map[1]"},

		// Batch jobs: blocking exchanges bound the regions.
		{"consumer fails, inputs stored: only it", shuffleBatch(), Region, "agg[0]", nil, nil, "agg[0]"},
		{"producer fails: all its consumers too", shuffleBatch(), Region, "scan[0]", nil, nil, "scan[0] agg[0] agg[1]"},
		{"consumer cannot read a result: its producer and that producer's consumers", shuffleBatch(), Region,
			"agg[0]", readFailed("scan[1]"), nil, "scan[1] agg[0] agg[1]"},
		{"result lost with its task manager: its producer and that producer's consumers", shuffleBatch(), Region,
			"agg[1]", nil, lostSet("scan[0]"), "scan[0] agg[0] agg[1]"},
		{"both results lost", shuffleBatch(), Region, "agg[1]", nil, lostSet("scan[0]", "scan[1]"),
			"scan[0] scan[1] agg[0] agg[1]"},
		{"a lost result the failed region reads through the shuffle", stagedBatch(), Region,
			"sink[1]", nil, lostSet("map[0]"), "src[0] map[0] reduce[0] reduce[1] sink[0] sink[1]"},
		{"a lost result nobody restarting reads is left alone", pointwiseBatch(), Region,
			"agg[1]", nil, lostSet("scan[0]"), "agg[1]"},
		{"pointwise batch: a lost input restarts only its producer", pointwiseBatch(), Region,
			"agg[1]", readFailed("scan[1]"), nil, "scan[1] agg[1]"},
		{"staged: a downstream stage task restarts its region", stagedBatch(), Region, "sink[1]", nil, nil,
			"reduce[1] sink[1]"},
		{"staged: an upstream task restarts its region and every downstream one", stagedBatch(), Region,
			"src[0]", nil, nil, "src[0] map[0] reduce[0] reduce[1] sink[0] sink[1]"},
		{"staged: a lost map result pulls in its region and all reducers", stagedBatch(), Region,
			"reduce[0]", nil, lostSet("map[1]"), "src[1] map[1] reduce[0] reduce[1] sink[0] sink[1]"},
		{"staged full", stagedBatch(), Full, "sink[1]", nil, nil, all(stagedBatch())},
		{"chain: the head restarts everything after it", blockingChain(), Region, "a[0]", nil, nil, "a[0] b[0] c[0]"},
		{"chain: the middle restarts itself and the tail", blockingChain(), Region, "b[0]", nil, nil, "b[0] c[0]"},
		{"chain: the tail alone", blockingChain(), Region, "c[0]", nil, nil, "c[0]"},
		{"chain: b's result lost", blockingChain(), Region, "c[0]", nil, lostSet("b[0]"), "b[0] c[0]"},
		{"chain: lost results are followed upstream", blockingChain(), Region, "c[0]", nil, lostSet("a[0]", "b[0]"),
			"a[0] b[0] c[0]"},
		{"chain: a's result lost but b's stored: a is not needed", blockingChain(), Region, "c[0]", nil, lostSet("a[0]"),
			"c[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRegions(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(tc.strategy, r, tc.available)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.TasksToRestart(task(tc.failed), tc.cause)
			if err != nil {
				t.Fatal(err)
			}
			if render(got) != tc.want {
				t.Errorf("%s fails, %s restarts:\n got  %s\n want %s", tc.failed, tc.strategy, render(got), tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	a, b := TaskID{"a", 0}, TaskID{"b", 0}
	for _, tc := range []struct {
		name string
		g    Graph
		want string
	}{
		{"duplicate task", Graph{Tasks: []TaskID{a, b, a}}, "a[0] is listed twice"},
		{"unknown producer", Graph{Tasks: []TaskID{b}, Edges: []Edge{{a, b, false}}}, "a[0] is not in the execution graph"},
		{"unknown consumer", Graph{Tasks: []TaskID{a}, Edges: []Edge{{a, b, true}}}, "b[0] is not in the execution graph"},
	} {
		if _, err := NewRegions(tc.g); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewRegions error = %v, want %q", tc.name, err, tc.want)
		}
	}

	r, err := NewRegions(Graph{Tasks: []TaskID{a}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Full, Region} {
		s, err := New(name, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, s.Name())
		}
		if _, err := s.TasksToRestart(b, nil); err == nil {
			t.Errorf("%s: no error for a task not in the graph", name)
		}
	}
	if _, err := New("individual", r, nil); err == nil || !strings.Contains(err.Error(), Key) {
		t.Errorf("New(individual): err = %v, want one naming %s", err, Key)
	}
	if s, err := New(" Region ", r, nil); err != nil || s.Name() != Region {
		t.Errorf("New(\" Region \") = %v, %v", s, err)
	}
	if _, err := New(Full, nil, nil); err == nil {
		t.Errorf("New with no regions: no error")
	}
}

func TestRegionsAccessors(t *testing.T) {
	r, err := NewRegions(chains())
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 4 {
		t.Fatalf("Len() = %d, want 4", r.Len())
	}
	i, ok := r.Of(task("sink[2]"))
	if !ok || i != 2 {
		t.Fatalf("Of(sink[2]) = %d, %v", i, ok)
	}
	if got := render(r.Region(i)); got != "src[2] map[2] sink[2]" {
		t.Errorf("Region(2) = %s", got)
	}
	if _, ok := r.Of(task("nope[0]")); ok {
		t.Errorf("Of(nope[0]) found a region")
	}
	ts := r.Tasks()
	ts[0] = task("changed[0]")
	if r.Tasks()[0] != task("src[0]") {
		t.Errorf("Tasks() shares its slice with Regions")
	}
}

func TestPartitionError(t *testing.T) {
	inner := errors.New("connection reset")
	err := fmt.Errorf("task agg[0]: %w", &PartitionError{Producer: task("scan[1]"), Err: inner})
	if !errors.Is(err, inner) {
		t.Errorf("PartitionError does not unwrap to its cause")
	}
	if got, want := err.Error(), "task agg[0]: reading the result of scan[1]: connection reset"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
