package stream

import (
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/runtime"
)

// Package launch starts the jobs stream describes; it reaches an
// environment and a job client through these hooks, so that stream
// exports none of the runtime's types.
func init() {
	launch.Register(func(env any, name string) (launch.Job, error) {
		e, ok := env.(*Environment)
		if !ok {
			return launch.Job{}, errorf("launch.Describe needs a *stream.Environment, not %T", env)
		}
		return e.describe(name)
	}, func(client any) (*launch.Handle, bool) {
		c, ok := client.(*JobClient)
		if !ok || c == nil || c.h == nil {
			return nil, false
		}
		return c.h, true
	})
}

// describe builds the job name of the environment for package launch.
func (e *Environment) describe(name string) (launch.Job, error) {
	pipe, err := e.cfg.Pipeline()
	if err != nil {
		return launch.Job{}, err
	}
	g, err := e.graph(name, pipe)
	if err != nil {
		return launch.Job{}, err
	}
	j := e.settings()
	j.Name, j.Graph, j.WithoutUID = name, g, e.withoutUID()
	return j, nil
}

// withoutUID returns the uids made for the operators that may hold
// state (sources, sinks, process functions and windows) and were given
// none (Uid): their state is matched on a restore by a uid made of their
// kind and position, which a change to the job's shape moves.
func (e *Environment) withoutUID() []string {
	var unnamed []string
	for _, n := range e.nodes {
		switch n.kind {
		case "source", "sink", "process", "coprocess":
			if n.settings.uid == "" {
				unnamed = append(unnamed, n.uid)
			}
		}
	}
	return unnamed
}

// settings returns what package launch needs of the environment besides
// a job graph.
func (e *Environment) settings() launch.Job {
	j := launch.Job{
		Config:          e.cfg,
		JobID:           e.jobID,
		Logger:          e.logger,
		BatchSize:       e.batchSize,
		ChannelCapacity: e.channelCapacity,
		Events:          e.runtimeEvents(),
		Unreconciled:    e.unreconciledSinks(),
	}
	if e.clock != nil {
		j.Clock = e.clock
	}
	if e.faults != nil {
		j.Faults = faultInjector(e.faults)
		j.StorageFaults = e.storageFaults()
	}
	return j
}

// unreconciledSinks returns the uids of the sinks that cannot undo, on a
// restore, what a newer checkpoint's transactions committed.
func (e *Environment) unreconciledSinks() []string {
	var sinks []string
	for _, n := range e.nodes {
		if n.sink == nil {
			continue
		}
		if r, ok := n.sink.(connector.Reconciler); ok && r.ReconcilesOnRestore() {
			continue
		}
		uid := n.settings.uid
		if uid == "" {
			uid = n.describe()
		}
		sinks = append(sinks, uid)
	}
	return sinks
}

// runtimeEvents adapts the environment's event callback to the runtime.
func (e *Environment) runtimeEvents() func(runtime.Event) {
	if e.events == nil {
		return nil
	}
	f := e.events
	return func(ev runtime.Event) { f(jobEvent(ev)) }
}
