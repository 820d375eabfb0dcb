package stream

import "github.com/weirstream/weir/internal/runtime"

// OutputTag names a side output of type S: an operator emits to it with
// SideOutput, and SideOutputOf turns it into a stream.
type OutputTag[S any] struct {
	id string
}

// NewOutputTag returns the tag called id.
func NewOutputTag[S any](id string) OutputTag[S] { return OutputTag[S]{id: id} }

// ID returns the tag's id.
func (t OutputTag[S]) ID() string { return t.id }

// SideOutputOf returns the records s's operator emitted to tag.
func SideOutputOf[S, T any](s Stream[T], tag OutputTag[S]) Stream[S] {
	if tag.id == "" {
		s.env.setErr(errorf("SideOutputOf: the output tag has no id"))
	}
	if _, ok := s.node.outs[tag.id]; !ok {
		s.node.outs[tag.id] = newOutType[S]()
	} else if _, ok := s.node.outs[tag.id].fanOut(nil).(interface{ Collect(S, int64) error }); !ok {
		s.env.setErr(errorf("SideOutputOf: tag %q is used with two types", tag.id))
	}
	return Stream[S]{env: s.env, node: s.node, tag: tag.id}
}

// SideOutputs is a function context that can emit to side outputs: the
// Context of keyed functions and the RecordContext of ProcessRecords.
type SideOutputs interface {
	sideOutput(id string) (out any, ts int64)
}

// SideOutput sends v, with the current record's timestamp, to the side
// output tag (see SideOutputOf). Nothing happens if no operator consumes
// the side output.
func SideOutput[S any](c SideOutputs, tag OutputTag[S], v S) error {
	o, ts := c.sideOutput(tag.id)
	if o == nil {
		return nil
	}
	return o.(runtime.Output[S]).Collect(v, ts)
}
