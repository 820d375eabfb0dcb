package state

import (
	"iter"

	"github.com/weirstream/weir/codec"
)

// ValueState holds one value per key (and namespace).
type ValueState[T any] interface {
	// Value returns the current key's value, and false if it has none.
	Value() (T, bool)
	// Update sets the current key's value.
	Update(v T)
	// Clear removes the current key's value.
	Clear()
}

// ListState holds a list of values per key (and namespace). An empty list
// and an absent list are the same.
type ListState[T any] interface {
	// Get returns the current key's list, nil if it is empty. The slice
	// must not be modified; appending to it does not affect the state.
	Get() []T
	// Add appends v to the current key's list.
	Add(v T)
	// AddAll appends vs to the current key's list.
	AddAll(vs []T)
	// Update replaces the current key's list with a copy of vs.
	Update(vs []T)
	// Clear empties the current key's list.
	Clear()
}

// MapState holds a map per key (and namespace). An empty map and an absent
// map are the same.
type MapState[UK comparable, UV any] interface {
	// Get returns the value for uk in the current key's map.
	Get(uk UK) (UV, bool)
	// Put sets the value for uk in the current key's map.
	Put(uk UK, uv UV)
	// Remove deletes uk from the current key's map.
	Remove(uk UK)
	// Contains reports whether the current key's map has uk.
	Contains(uk UK) bool
	// All iterates over the current key's map in unspecified order. The map
	// may be modified during the iteration, with the semantics of a Go map.
	All() iter.Seq2[UK, UV]
	// Len returns the size of the current key's map.
	Len() int
	// IsEmpty reports whether the current key's map is empty.
	IsEmpty() bool
	// Clear empties the current key's map.
	Clear()
}

// ReducingState folds the values added for a key (and namespace) into one
// with a reduce function.
type ReducingState[T any] interface {
	// Get returns the reduced value, and false if nothing was added.
	Get() (T, bool)
	// Add folds v into the current key's value: the first value is stored
	// as is, every later one as reduce(current, v).
	Add(v T)
	// Clear removes the current key's value.
	Clear()
}

// AggregatingState folds values of type IN into an accumulator per key
// (and namespace) and reads it out as OUT.
type AggregatingState[IN, OUT any] interface {
	// Get returns the result for the current key's accumulator, and false
	// if nothing was added.
	Get() (OUT, bool)
	// Add folds v into the current key's accumulator, creating it first if
	// there is none.
	Add(v IN)
	// Clear removes the current key's accumulator.
	Clear()
}

// AggregateFunction describes an aggregation (Flink's AggregateFunction).
//
// Add and Merge may modify the accumulator they are given and return it:
// the backend passes them an accumulator that no pending snapshot shares,
// copying it (with the descriptor's codec) first if necessary.
type AggregateFunction[IN, ACC, OUT any] interface {
	// CreateAccumulator returns a new, empty accumulator.
	CreateAccumulator() ACC
	// Add folds value into acc.
	Add(value IN, acc ACC) ACC
	// GetResult computes the result from acc. It must not modify acc.
	GetResult(acc ACC) OUT
	// Merge combines two accumulators (merging windows).
	Merge(a, b ACC) ACC
}

// Namespaced is implemented by the internal, namespaced variants of the
// keyed states (ValueNS, ListNS, ...). Window operators scope state to a
// window by setting the namespace; user-facing state uses the void
// namespace.
type Namespaced[N comparable] interface {
	// SetNamespace sets the namespace that subsequent calls apply to.
	SetNamespace(n N)
	// Namespace returns the current namespace.
	Namespace() N
	// Namespaces returns the namespaces that hold state for the current key,
	// in unspecified order. It costs a scan of the key's shard (a few
	// thousand entries at most, plus every namespace of the key).
	Namespaces() []N
	// ClearAllNamespaces removes the current key's state in every namespace.
	ClearAllNamespaces()
}

// Merger is implemented by namespaced states whose contents can be merged,
// as session windows merge.
type Merger[N comparable] interface {
	// MergeNamespaces folds the current key's state in each source
	// namespace into the target namespace and clears the sources. Sources
	// equal to target are ignored.
	MergeNamespaces(target N, sources ...N)
}

// ValueStateNS is a ValueState scoped to a namespace.
type ValueStateNS[N comparable, T any] interface {
	ValueState[T]
	Namespaced[N]
}

// ListStateNS is a ListState scoped to a namespace.
type ListStateNS[N comparable, T any] interface {
	ListState[T]
	Namespaced[N]
	Merger[N]
	PresenceAdder[T]
}

// MapStateNS is a MapState scoped to a namespace.
type MapStateNS[N comparable, UK comparable, UV any] interface {
	MapState[UK, UV]
	Namespaced[N]
}

// ReducingStateNS is a ReducingState scoped to a namespace.
type ReducingStateNS[N comparable, T any] interface {
	ReducingState[T]
	Namespaced[N]
	Merger[N]
	PresenceAdder[T]
}

// AggregatingStateNS is an AggregatingState scoped to a namespace.
type AggregatingStateNS[N comparable, IN, OUT any] interface {
	AggregatingState[IN, OUT]
	Namespaced[N]
	Merger[N]
	PresenceAdder[IN]
}

// PresenceAdder is implemented by the namespaced states a window operator
// adds to: the operator registers a window's timer when the window's
// state comes into being, and not again for every record after.
type PresenceAdder[T any] interface {
	// AddWasPresent is Add that also reports whether the current key held
	// state in the current namespace before it. True is always exact;
	// false may also mean the backend could not tell without a read (a
	// list on the pebble backend whose elements are all in the store).
	AddWasPresent(v T) bool
}

// ValueDescriptor names a value state. A nil Codec means codec.For[T]().
// A non-nil TTL gives its values a time to live.
type ValueDescriptor[T any] struct {
	Name  string
	Codec codec.Codec[T]
	TTL   *TTLConfig
}

// ListDescriptor names a list state. Codec encodes one element; nil means
// codec.For[T](). A non-nil TTL gives each element a time to live.
type ListDescriptor[T any] struct {
	Name  string
	Codec codec.Codec[T]
	TTL   *TTLConfig
}

// MapDescriptor names a map state. Nil codecs mean codec.For. A non-nil
// TTL gives each entry a time to live.
type MapDescriptor[UK comparable, UV any] struct {
	Name       string
	KeyCodec   codec.Codec[UK]
	ValueCodec codec.Codec[UV]
	TTL        *TTLConfig
}

// ReducingDescriptor names a reducing state and its reduce function. A nil
// Codec means codec.For[T](). Reduce may modify and return its first
// argument (see AggregateFunction).
type ReducingDescriptor[T any] struct {
	Name   string
	Codec  codec.Codec[T]
	Reduce func(acc, v T) T
	// TTL, if set, gives the reduced value a time to live.
	TTL *TTLConfig
}

// AggregatingDescriptor names an aggregating state, its function, and the
// codec of its accumulator (nil means codec.For[ACC]()).
type AggregatingDescriptor[IN, ACC, OUT any] struct {
	Name     string
	Function AggregateFunction[IN, ACC, OUT]
	AccCodec codec.Codec[ACC]
	// TTL, if set, gives the accumulator a time to live.
	TTL *TTLConfig
}

// VoidNamespace is the namespace of user-facing keyed state.
type VoidNamespace struct{}
