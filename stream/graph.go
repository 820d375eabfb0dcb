package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/runtime"
)

// OpOption configures one operator.
type OpOption func(*opSettings)

type opSettings struct {
	uid, name   string
	parallelism int
	noChain     bool
}

// Uid sets the operator's stable id: its state in checkpoints and
// savepoints is stored under it, so it must not change between versions of
// a job. Set it on every stateful operator.
func Uid(uid string) OpOption { return func(s *opSettings) { s.uid = uid } }

// Name sets the operator's display name (default: its uid or kind).
func Name(name string) OpOption { return func(s *opSettings) { s.name = name } }

// Parallelism sets the operator's number of subtasks (default:
// parallelism.default).
func Parallelism(n int) OpOption { return func(s *opSettings) { s.parallelism = n } }

// DisableChaining keeps the operator out of its predecessor's chain.
func DisableChaining() OpOption { return func(s *opSettings) { s.noChain = true } }

// node is one transformation. Its typed behaviour hides in closures made
// by the generic function that created it.
type node struct {
	env      *Environment
	id       int
	kind     string
	settings opSettings
	inputs   []*edge
	outputs  []*edge
	source   bool

	// build makes the operator for one subtask, writing to out (a
	// runtime.Output[OUT]; side outputs are in b.side); it returns the
	// operator and its typed inputs (runtime.Input[IN] per logical input).
	build func(b *buildCtx, out any) (runtime.Operator, []any, error)
	// outs holds the typed plumbing of the main output ("") and of each
	// side output, by tag.
	outs map[string]*outType
	// deliver makes the vertex's Deliver from its head's inputs.
	deliver func(inputs []any) runtime.DeliverFunc

	// sink is the connector a sink node writes to (nil for other nodes).
	sink any
	// listSplits lists a source node's splits, which the job master
	// assigns, again every discovery if it is not 0.
	listSplits func(ctx context.Context) ([]string, error)
	discovery  time.Duration
	// alignment is a source node's watermark alignment (nil: none).
	alignment *runtime.WatermarkAlignment

	// keyed marks an operator on a keyed stream, which keeps keyed state.
	keyed bool

	// resolved by prepare
	uid, name   string
	parallelism int
	maxPar      int
}

// outType is the typed plumbing of one output of a node.
type outType struct {
	// fanOut turns []any of runtime.Output[T] into one.
	fanOut func(outs []any) any
	// chainOut wraps the next operator's input (a runtime.Input[T]).
	chainOut func(in any, op runtime.Operator) any
	// writer makes the record writer towards a network edge.
	writer func(tc *runtime.TaskContext, e *runtime.Edge, part any) (any, error)
	// withSides makes the main output (a runtime.Output[T]) forward its
	// watermarks to the side outputs too.
	withSides func(main any, sides []watermarker) any
	// codec makes the codec of T's batches for channels between
	// processes.
	codec func() (runtime.BatchCodec, error)
	// selectKeyGroups makes an edge's SelectKeyGroups from its
	// partitioner (a runtime.Partitioner[T]); nil unless it hashes keys.
	selectKeyGroups func(part any) func(batch any, keep func(keyGroup int) bool) (any, int)
}

type watermarker interface{ EmitWatermark(wm int64) error }

// sidesOutput is a main output whose watermarks also go to the side
// outputs, so that event time advances downstream of them.
type sidesOutput[T any] struct {
	runtime.Output[T]
	sides []watermarker
}

func (o sidesOutput[T]) EmitWatermark(wm int64) error {
	for _, s := range o.sides {
		if err := s.EmitWatermark(wm); err != nil {
			return err
		}
	}
	return o.Output.EmitWatermark(wm)
}

type edge struct {
	from, to    *node
	tag         string // the producer's output: "" main, else a side output
	part        runtime.PartitionerKind
	input       int
	explicit    bool // a repartitioning the user asked for: never chained
	partitioner func(maxParallelism int) any
}

// buildCtx is what an operator's build gets.
type buildCtx struct {
	tc             *runtime.TaskContext
	checkpointing  bool
	exactlyOnce    bool
	maxParallelism int
	// side holds the node being built's side outputs, by tag.
	side map[string]any
}

func newNode[OUT any](env *Environment, kind string, opts []OpOption) *node {
	n := &node{env: env, id: len(env.nodes), kind: kind, outs: map[string]*outType{"": newOutType[OUT]()}}
	for _, o := range opts {
		o(&n.settings)
	}
	env.nodes = append(env.nodes, n)
	return n
}

func newOutType[OUT any]() *outType {
	var t outType
	t.fanOut = func(outs []any) any {
		switch len(outs) {
		case 0:
			return runtime.Output[OUT](runtime.Discard[OUT]{})
		case 1:
			return outs[0].(runtime.Output[OUT])
		}
		f := make(runtime.FanOut[OUT], len(outs))
		for i, o := range outs {
			f[i] = o.(runtime.Output[OUT])
		}
		return runtime.Output[OUT](f)
	}
	t.chainOut = func(in any, op runtime.Operator) any {
		return runtime.Output[OUT](runtime.ChainOutput[OUT]{In: in.(runtime.Input[OUT]), Op: op})
	}
	t.writer = func(tc *runtime.TaskContext, e *runtime.Edge, part any) (any, error) {
		var p runtime.Partitioner[OUT]
		if part != nil {
			p = part.(runtime.Partitioner[OUT])
		}
		w, err := runtime.Writer(tc, e, p)
		if err != nil {
			return nil, err
		}
		return runtime.Output[OUT](w), nil
	}
	t.codec = runtime.BatchCodecFor[OUT]
	t.selectKeyGroups = func(part any) func(any, func(int) bool) (any, int) {
		hp, ok := part.(runtime.HashPartitioner[OUT])
		if !ok {
			return nil
		}
		return func(batch any, keep func(int) bool) (any, int) {
			var out []runtime.Rec[OUT]
			for _, r := range batch.([]runtime.Rec[OUT]) {
				if keep(hp.KeyGroup(r.V)) {
					out = append(out, r)
				}
			}
			return out, len(out)
		}
	}
	t.withSides = func(main any, sides []watermarker) any {
		if len(sides) == 0 {
			return main
		}
		return runtime.Output[OUT](sidesOutput[OUT]{Output: main.(runtime.Output[OUT]), sides: sides})
	}
	return &t
}

// connect adds an edge from output tag of `from` into n's logical input.
func connect(from *node, tag string, n *node, input int, part runtime.PartitionerKind, explicit bool, partitioner func(int) any) {
	e := &edge{from: from, tag: tag, to: n, part: part, input: input, explicit: explicit, partitioner: partitioner}
	from.outputs = append(from.outputs, e)
	n.inputs = append(n.inputs, e)
}

// graph resolves parallelism and uids, chains operators, and builds the
// runtime's job graph.
func (e *Environment) graph(name string, pipe config.Pipeline) (*runtime.JobGraph, error) {
	if e.err != nil {
		return nil, e.err
	}
	if len(e.nodes) == 0 {
		return nil, errorf("job %q has no operators", name)
	}
	uids := map[string]*node{}
	for _, n := range e.nodes {
		n.parallelism = n.settings.parallelism
		if n.parallelism <= 0 {
			n.parallelism = pipe.Parallelism
		}
		n.maxPar = pipe.MaxParallelismFor(n.parallelism)
		if n.parallelism > n.maxPar {
			return nil, errorf("operator %s: parallelism %d exceeds max parallelism %d (pipeline.max-parallelism)", n.describe(), n.parallelism, n.maxPar)
		}
		n.uid = n.settings.uid
		if n.uid == "" {
			n.uid = fmt.Sprintf("%s-%d", n.kind, n.id)
		}
		if other, dup := uids[n.uid]; dup {
			return nil, errorf("uid %q is used by two operators (%s and %s)", n.uid, other.describe(), n.describe())
		}
		uids[n.uid] = n
		n.name = n.settings.name
		if n.name == "" {
			n.name = n.uid
		}
	}
	// An edge between equal parallelisms that nobody repartitioned is a
	// forward edge; otherwise records are rebalanced.
	for _, n := range e.nodes {
		for _, ed := range n.inputs {
			if !ed.explicit {
				ed.part = runtime.Forward
				if ed.from.parallelism != n.parallelism {
					ed.part = runtime.Rebalance
				}
			}
		}
	}
	chained := func(ed *edge) bool {
		return len(ed.to.inputs) == 1 && ed.part == runtime.Forward && !ed.explicit &&
			!ed.to.settings.noChain && ed.from.parallelism == ed.to.parallelism
	}
	g := &runtime.JobGraph{Name: name}
	vertexOf := map[*node]*runtime.Vertex{}
	members := map[*runtime.Vertex][]*node{}
	for _, n := range e.nodes { // nodes are in topological order
		if len(n.inputs) == 1 && chained(n.inputs[0]) {
			v := vertexOf[n.inputs[0].from]
			vertexOf[n] = v
			members[v] = append(members[v], n)
			continue
		}
		v := &runtime.Vertex{ID: len(g.Vertices), Name: n.name, UID: n.uid, Parallelism: n.parallelism, MaxParallelism: n.maxPar}
		g.Vertices = append(g.Vertices, v)
		vertexOf[n] = v
		members[v] = []*node{n}
	}
	netEdge := map[*edge]*runtime.Edge{}
	for _, n := range e.nodes {
		for _, ed := range n.inputs {
			if chained(ed) {
				continue
			}
			re := &runtime.Edge{ID: len(g.Edges), From: vertexOf[ed.from], To: vertexOf[n], Partitioner: ed.part, Input: ed.input, Codec: ed.from.outs[ed.tag].codec}
			if ed.partitioner != nil {
				re.SelectKeyGroups = ed.from.outs[ed.tag].selectKeyGroups(ed.partitioner(n.maxPar))
			}
			g.Edges = append(g.Edges, re)
			re.From.Outputs = append(re.From.Outputs, re)
			re.To.Inputs = append(re.To.Inputs, re)
			netEdge[ed] = re
		}
	}
	for _, v := range g.Vertices {
		chainNodes := members[v]
		for _, n := range chainNodes {
			v.OperatorUIDs = append(v.OperatorUIDs, n.uid)
			if n.keyed {
				v.KeyedOperators++
			}
		}
		names := make([]string, len(chainNodes))
		for i, n := range chainNodes {
			names[i] = n.name
		}
		if len(names) > 1 {
			v.Name = fmt.Sprint(names)
		}
		head := chainNodes[0]
		v.ListSplits, v.DiscoveryInterval = head.listSplits, head.discovery
		v.Alignment = head.alignment
		v.Build = func(tc *runtime.TaskContext) (*runtime.Chain, error) {
			return buildChain(tc, head, chained, netEdge)
		}
	}
	return g, nil
}

func buildChain(tc *runtime.TaskContext, head *node, chained func(*edge) bool, netEdge map[*edge]*runtime.Edge) (*runtime.Chain, error) {
	enabled, exactlyOnce := tc.Checkpointing()
	b := &buildCtx{tc: tc, checkpointing: enabled, exactlyOnce: exactlyOnce, maxParallelism: tc.MaxParallelism}
	built := map[*node]runtime.Operator{}
	var build func(n *node) (runtime.Operator, []any, error)
	build = func(n *node) (runtime.Operator, []any, error) {
		outs := map[string][]any{}
		for _, ed := range n.outputs {
			ot := n.outs[ed.tag]
			if chained(ed) {
				op, ins, err := build(ed.to)
				if err != nil {
					return nil, nil, err
				}
				outs[ed.tag] = append(outs[ed.tag], ot.chainOut(ins[ed.input], op))
				continue
			}
			var part any
			if ed.partitioner != nil {
				part = ed.partitioner(ed.to.maxPar)
			}
			w, err := ot.writer(tc, netEdge[ed], part)
			if err != nil {
				return nil, nil, err
			}
			outs[ed.tag] = append(outs[ed.tag], w)
		}
		b.side = map[string]any{}
		var sides []watermarker
		for tag, os := range outs {
			if tag != "" {
				o := n.outs[tag].fanOut(os)
				b.side[tag] = o
				sides = append(sides, o.(watermarker))
			}
		}
		main := n.outs[""].withSides(n.outs[""].fanOut(outs[""]), sides)
		op, ins, err := n.build(b, main)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.describe(), err)
		}
		built[n] = op
		return op, ins, nil
	}
	op, ins, err := build(head)
	if err != nil {
		return nil, err
	}
	chain := &runtime.Chain{}
	// Head first, then the chained operators in pre-order.
	var order func(n *node)
	order = func(n *node) {
		chain.Operators = append(chain.Operators, runtime.ChainedOperator{UID: n.uid, Name: n.name, Op: built[n]})
		for _, ed := range n.outputs {
			if chained(ed) {
				order(ed.to)
			}
		}
	}
	order(head)
	if head.source {
		d, ok := op.(runtime.SourceDriver)
		if !ok {
			return nil, fmt.Errorf("%s is not a source", head.describe())
		}
		chain.Source = d
	} else {
		chain.Deliver = head.deliver(ins)
	}
	return chain, nil
}

func (n *node) describe() string {
	if n.settings.uid != "" {
		return fmt.Sprintf("%s %q", n.kind, n.settings.uid)
	}
	return fmt.Sprintf("%s #%d", n.kind, n.id)
}

// Stream is a stream of records of type T.
type Stream[T any] struct {
	env  *Environment
	node *node
	tag  string // a side output of node, or "" for its main output
}

// Env returns the stream's environment.
func (s Stream[T]) Env() *Environment { return s.env }

func oneInput[IN any](ins []any) runtime.DeliverFunc {
	return runtime.DeliverTo(ins[0].(runtime.Input[IN]))
}

// VertexInfo describes one vertex of a job's execution graph: a chain of
// operators run together by each of its subtasks.
type VertexInfo struct {
	// UID is the chain's head operator's uid: TaskInfo.Vertex.
	UID         string
	Name        string
	Parallelism int
}

// Plan returns the vertices the job built so far would run as, in
// topological order, under the environment's configuration.
func (e *Environment) Plan(name string) ([]VertexInfo, error) {
	pipe, err := e.cfg.Pipeline()
	if err != nil {
		return nil, err
	}
	g, err := e.graph(name, pipe)
	if err != nil {
		return nil, err
	}
	out := make([]VertexInfo, len(g.Vertices))
	for i, v := range g.Vertices {
		out[i] = VertexInfo{UID: v.UID, Name: v.Name, Parallelism: v.Parallelism}
	}
	return out, nil
}
