package stream

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
