package failover

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naive is a deliberately simple second implementation of regions and region
// failover, defined task by task, that the real one is checked against.
//
// Two tasks share a region when each can reach the other, moving along
// pipelined edges either way and along blocking edges forwards: that is a
// component of the pipelined edges, merged with every other such component
// on a cycle of blocking edges. The tasks to restart are the least set that
// holds the failed task's region and is closed under "a restarting task's
// lost blocking input restarts its producer's region" and "a restarting
// task's consumers restart with their regions".
type naive struct {
	g      Graph
	idx    map[TaskID]int
	region [][]bool // region[u][v]: u and v share a region
}

func newNaive(g Graph) naive {
	n := len(g.Tasks)
	idx := make(map[TaskID]int)
	for i, t := range g.Tasks {
		idx[t] = i
	}
	reach := make([][]bool, n)
	for i := range reach {
		reach[i] = make([]bool, n)
		reach[i][i] = true
	}
	for _, e := range g.Edges {
		f, t := idx[e.From], idx[e.To]
		reach[f][t] = true
		if !e.Blocking {
			reach[t][f] = true
		}
	}
	for k := range n {
		for i := range n {
			for j := range n {
				if reach[i][k] && reach[k][j] {
					reach[i][j] = true
				}
			}
		}
	}
	region := make([][]bool, n)
	for i := range region {
		region[i] = make([]bool, n)
		for j := range n {
			region[i][j] = reach[i][j] && reach[j][i]
		}
	}
	return naive{g, idx, region}
}

func (nv naive) String() string {
	var groups []string
	seen := make([]bool, len(nv.g.Tasks))
	for i := range nv.g.Tasks {
		if seen[i] {
			continue
		}
		var members []string
		for j := range nv.g.Tasks {
			if nv.region[i][j] {
				seen[j] = true
				members = append(members, nv.g.Tasks[j].String())
			}
		}
		groups = append(groups, "{"+strings.Join(members, " ")+"}")
	}
	return strings.Join(groups, " ")
}

func (nv naive) restart(failed TaskID, lost func(TaskID) bool) string {
	in := make([]bool, len(nv.g.Tasks))
	add := func(t int) {
		for j := range in {
			if nv.region[t][j] {
				in[j] = true
			}
		}
	}
	add(nv.idx[failed])
	for changed := true; changed; {
		changed = false
		for _, e := range nv.g.Edges {
			f, t := nv.idx[e.From], nv.idx[e.To]
			if in[t] && !in[f] && e.Blocking && lost(e.From) {
				add(f)
				changed = true
			}
			if in[f] && !in[t] {
				add(t)
				changed = true
			}
		}
	}
	var out []TaskID
	for i, ok := range in {
		if ok {
			out = append(out, nv.g.Tasks[i])
		}
	}
	return render(out)
}

// randomGraph draws a graph of up to 10 tasks in up to 4 vertices, with
// self-loops, duplicate edges and cycles all allowed.
func randomGraph(rng *rand.Rand) Graph {
	var g Graph
	n := 1 + rng.IntN(10)
	for i := range n {
		g.Tasks = append(g.Tasks, TaskID{string(rune('a' + rng.IntN(4))), i})
	}
	for range rng.IntN(2 * n) {
		g.Edges = append(g.Edges, Edge{
			From:     g.Tasks[rng.IntN(n)],
			To:       g.Tasks[rng.IntN(n)],
			Blocking: rng.IntN(10) < 7,
		})
	}
	return g
}

func TestAgainstNaive(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xfa11))
		g := randomGraph(rng)
		nv := newNaive(g)
		r, err := NewRegions(g)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got, want := r.String(), nv.String(); got != want {
			t.Fatalf("seed %d: graph %v\nregions:\n got  %s\n want %s", seed, g, got, want)
		}

		// Edge order must not matter.
		shuffled := Graph{Tasks: g.Tasks, Edges: slices.Clone(g.Edges)}
		rng.Shuffle(len(shuffled.Edges), func(i, j int) {
			shuffled.Edges[i], shuffled.Edges[j] = shuffled.Edges[j], shuffled.Edges[i]
		})
		r2, err := NewRegions(shuffled)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if r2.String() != r.String() {
			t.Fatalf("seed %d: regions depend on edge order:\n %s\n %s", seed, r, r2)
		}

		lostTasks := make(map[TaskID]bool)
		for _, tk := range g.Tasks {
			if rng.IntN(3) == 0 {
				lostTasks[tk] = true
			}
		}
		available := func(p TaskID) bool { return !lostTasks[p] }
		s := NewRegion(r, available)
		for _, failed := range g.Tasks {
			var cause error
			lost := func(p TaskID) bool { return lostTasks[p] }
			if rng.IntN(3) == 0 {
				unreadable := g.Tasks[rng.IntN(len(g.Tasks))]
				cause = &PartitionError{Producer: unreadable}
				lost = func(p TaskID) bool { return lostTasks[p] || p == unreadable }
			}
			got, err := s.TasksToRestart(failed, cause)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if want := nv.restart(failed, lost); render(got) != want {
				t.Fatalf("seed %d: graph %v, lost %v, cause %v\n%v fails:\n got  %s\n want %s",
					seed, g, lostTasks, cause, failed, render(got), want)
			}
		}
	}
}
