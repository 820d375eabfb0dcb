package weir

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/stream"
)

// faultPlan is the --fail-after schedule: failure i strikes once failure
// i-1 has, after a duration since the (re)start or after a subtask has
// processed a number of records; on the named subtask or, if none is
// named, on whichever subtask gets there first.
type faultPlan struct {
	mu      sync.Mutex
	faults  []faultSpec
	struck  int
	since   time.Time
	started bool
	rnd     *rand.Rand
}

type faultSpec struct {
	after   time.Duration
	records int64
	vertex  string
	subtask int // -1: any
	text    string
}

var faultRE = regexp.MustCompile(`^([0-9]+|[0-9.]+[a-zµ]+)(?:@([A-Za-z0-9_.-]+)(?:\[([0-9]+)\])?)?$`)

func parseFaults(specs []string) (*faultPlan, error) {
	p := &faultPlan{rnd: rand.New(rand.NewPCG(rand.Uint64(), 0))}
	for _, s := range specs {
		m := faultRE.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("--fail-after %q: want a duration (30s) or a record count (5000), optionally @vertex or @vertex[subtask]", s)
		}
		f := faultSpec{vertex: m[2], subtask: -1, text: s}
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			f.records = n
		} else if d, err := time.ParseDuration(m[1]); err == nil {
			f.after = d
		} else {
			return nil, fmt.Errorf("--fail-after %q: %q is neither a record count nor a duration", s, m[1])
		}
		if m[3] != "" {
			f.subtask, _ = strconv.Atoi(m[3])
		}
		p.faults = append(p.faults, f)
	}
	return p, nil
}

// check makes sure every failure names a vertex of plan, and a subtask it
// has.
func (p *faultPlan) check(plan []stream.VertexInfo) error {
	var names []string
	for _, v := range plan {
		names = append(names, fmt.Sprintf("%s[0..%d]", v.UID, v.Parallelism-1))
	}
	for _, f := range p.faults {
		if f.vertex == "" {
			continue
		}
		i := slices.IndexFunc(plan, func(v stream.VertexInfo) bool { return v.UID == f.vertex })
		switch {
		case i < 0:
			return fmt.Errorf("--fail-after %s: the job has no vertex %q; its vertices (chains of operators, named by their first operator's uid) are %s", f.text, f.vertex, strings.Join(names, ", "))
		case f.subtask >= plan[i].Parallelism:
			return fmt.Errorf("--fail-after %s: vertex %s has subtasks 0 to %d (parallelism %d)", f.text, f.vertex, plan[i].Parallelism-1, plan[i].Parallelism)
		}
	}
	return nil
}

// unstruck returns the failures that have not struck.
func (p *faultPlan) unstruck() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, f := range p.faults[p.struck:] {
		out = append(out, f.text)
	}
	return out
}

func (p *faultPlan) start(*stream.JobClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since, p.started = time.Now(), true
}

// event restarts the duration clock when the job is restored.
func (p *faultPlan) event(e stream.JobEvent) {
	if e.Kind != stream.EventRestored {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.since = time.Now()
}

// fn is the plan's stream.FaultFunc: failures strike between batches.
func (p *faultPlan) fn(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	task, attempt, records := site.Task, site.Attempt, site.Records
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.struck >= len(p.faults) || attempt != p.struck {
		return nil
	}
	f := p.faults[p.struck]
	if f.vertex != "" && (task.Vertex != f.vertex || f.subtask >= 0 && task.Subtask != f.subtask) {
		return nil
	}
	if f.after > 0 && time.Since(p.since) < f.after || f.records > 0 && records < f.records {
		return nil
	}
	p.struck++
	return fmt.Errorf("injected failure %d (--fail-after %s) at %s[%d] after %d records", p.struck, f.text, task.Vertex, task.Subtask, records)
}
