package failover

import (
	"fmt"
	"slices"
	"strings"
)

// Regions is an execution graph partitioned into pipelined regions, with the
// blocking exchanges between regions recorded for failover. It is immutable
// once built and safe to share.
//
// Regions are numbered 0..Len()-1 in the order of their first task in
// Graph.Tasks, and list their tasks in that order, so the result does not
// depend on the order of Graph.Edges.
type Regions struct {
	tasks    []TaskID
	index    map[TaskID]int // task → position in tasks
	regionOf []int          // task position → region
	members  [][]int        // region → task positions, ascending

	// consumers[r] lists the regions, other than r, that read from a task
	// of r; inputs[r] lists the tasks outside r whose blocking results a
	// task of r reads. Both ascending, without duplicates.
	consumers [][]int
	inputs    [][]int
}

// NewRegions validates g and computes its pipelined regions, the way Flink's
// SchedulingPipelinedRegionComputeUtil does: tasks joined by pipelined edges
// share a region, and regions that reach each other through blocking edges (a
// cycle) are merged. It fails if a task is listed twice or an edge names a
// task that is not listed.
func NewRegions(g Graph) (*Regions, error) {
	n := len(g.Tasks)
	r := &Regions{
		tasks: slices.Clone(g.Tasks),
		index: make(map[TaskID]int, n),
	}
	for i, t := range g.Tasks {
		if _, dup := r.index[t]; dup {
			return nil, fmt.Errorf("failover: task %v is listed twice", t)
		}
		r.index[t] = i
	}
	type edge struct {
		from, to int
		blocking bool
	}
	edges := make([]edge, len(g.Edges))
	for i, e := range g.Edges {
		from, ok := r.index[e.From]
		if !ok {
			return nil, fmt.Errorf("failover: edge %v → %v: %w", e.From, e.To, unknownTask(e.From))
		}
		to, ok := r.index[e.To]
		if !ok {
			return nil, fmt.Errorf("failover: edge %v → %v: %w", e.From, e.To, unknownTask(e.To))
		}
		edges[i] = edge{from, to, e.Blocking}
	}

	// Raw regions: the components of the pipelined edges.
	uf := newUnionFind(n)
	for _, e := range edges {
		if !e.blocking {
			uf.union(e.from, e.to)
		}
	}

	// Merge the raw regions on every cycle of blocking edges: each strongly
	// connected component of the graph of raw regions becomes one region.
	raw := make([]int, n) // task → raw region
	rawIDs := make(map[int]int)
	for t := range n {
		root := uf.find(t)
		id, ok := rawIDs[root]
		if !ok {
			id = len(rawIDs)
			rawIDs[root] = id
		}
		raw[t] = id
	}
	rawFirst := make([]int, len(rawIDs)) // raw region → its first task
	for t := n - 1; t >= 0; t-- {
		rawFirst[raw[t]] = t
	}
	out := make([][]int, len(rawIDs))
	for _, e := range edges {
		if e.blocking && raw[e.from] != raw[e.to] {
			out[raw[e.from]] = append(out[raw[e.from]], raw[e.to])
		}
	}
	for _, scc := range stronglyConnected(out) {
		for _, rr := range scc[1:] {
			uf.union(rawFirst[scc[0]], rawFirst[rr])
		}
	}

	// Number the final regions by their first task.
	r.regionOf = make([]int, n)
	ids := make(map[int]int)
	for t := range n {
		root := uf.find(t)
		id, ok := ids[root]
		if !ok {
			id = len(ids)
			ids[root] = id
			r.members = append(r.members, nil)
		}
		r.regionOf[t] = id
		r.members[id] = append(r.members[id], t)
	}

	r.consumers = make([][]int, len(r.members))
	r.inputs = make([][]int, len(r.members))
	for _, e := range edges {
		from, to := r.regionOf[e.from], r.regionOf[e.to]
		if from == to {
			continue
		}
		// Only blocking edges cross regions.
		r.consumers[from] = append(r.consumers[from], to)
		r.inputs[to] = append(r.inputs[to], e.from)
	}
	for i := range r.members {
		slices.Sort(r.consumers[i])
		r.consumers[i] = slices.Compact(r.consumers[i])
		slices.Sort(r.inputs[i])
		r.inputs[i] = slices.Compact(r.inputs[i])
	}
	return r, nil
}

// Len returns the number of regions.
func (r *Regions) Len() int { return len(r.members) }

// Region returns the tasks of region i in graph order.
func (r *Regions) Region(i int) []TaskID { return r.ids(r.members[i]) }

// Of returns the region of task t, and false if t is not in the graph.
func (r *Regions) Of(t TaskID) (int, bool) {
	i, ok := r.index[t]
	if !ok {
		return 0, false
	}
	return r.regionOf[i], true
}

// Tasks returns every task in graph order.
func (r *Regions) Tasks() []TaskID { return slices.Clone(r.tasks) }

// String renders the regions in order, one brace group each:
// "{a[0] b[0]} {a[1] b[1]}".
func (r *Regions) String() string {
	var b strings.Builder
	for i, m := range r.members {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('{')
		for j, t := range m {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(r.tasks[t].String())
		}
		b.WriteByte('}')
	}
	return b.String()
}

func (r *Regions) ids(positions []int) []TaskID {
	out := make([]TaskID, len(positions))
	for i, p := range positions {
		out[i] = r.tasks[p]
	}
	return out
}

type unionFind []int

func newUnionFind(n int) unionFind {
	uf := make(unionFind, n)
	for i := range uf {
		uf[i] = i
	}
	return uf
}

func (uf unionFind) find(x int) int {
	for uf[x] != x {
		uf[x] = uf[uf[x]]
		x = uf[x]
	}
	return x
}

func (uf unionFind) union(a, b int) {
	a, b = uf.find(a), uf.find(b)
	if a == b {
		return
	}
	// Keep the smaller index as the root; any choice would do.
	if b < a {
		a, b = b, a
	}
	uf[b] = a
}

// stronglyConnected returns the strongly connected components of the graph
// with the given adjacency lists (Tarjan's algorithm), each as a list of
// vertices.
func stronglyConnected(out [][]int) [][]int {
	n := len(out)
	const unvisited = -1
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = unvisited
	}
	var (
		stack []int
		sccs  [][]int
		next  int
		visit func(v int)
	)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range out[v] {
			switch {
			case index[w] == unvisited:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			sccs = append(sccs, scc)
		}
	}
	for v := range n {
		if index[v] == unvisited {
			visit(v)
		}
	}
	return sccs
}
