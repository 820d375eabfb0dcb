package stream

import (
	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/state"
)

// KeyedStream is a stream partitioned by a key: every record with the same
// key goes to the same subtask, where keyed state and timers are scoped to
// it. Keys map to one of pipeline.max-parallelism key groups, and key
// groups to subtasks in contiguous ranges.
type KeyedStream[T any, K comparable] struct {
	Stream[T]
	key      func(T) K
	keyCodec codec.Codec[K]
	hasher   func(K) uint32
}

// KeyBy partitions s by key. K must be a type the codec package can encode
// (strings, integers, and structs of those, for instance): keys are part of
// checkpointed state.
func KeyBy[T any, K comparable](s Stream[T], key func(T) K) KeyedStream[T, K] {
	kc, err := codec.For[K]()
	if err != nil {
		s.env.setErr(errorf("KeyBy: the key type cannot be checkpointed: %w", err))
	}
	return KeyedStream[T, K]{Stream: s, key: key, keyCodec: kc, hasher: state.HasherFor[K]()}
}

// partitioner returns the hash partitioner of the keyed edge into an
// operator with the given number of key groups.
func (ks KeyedStream[T, K]) partitioner(maxParallelism int) any {
	key, hash := ks.key, ks.hasher
	return runtime.Partitioner[T](runtime.HashPartitioner[T]{
		KeyGroup:       func(v T) int { return state.KeyGroupFor(hash(key(v)), maxParallelism) },
		MaxParallelism: maxParallelism,
	})
}

// connectKeyed adds the hash edge from ks into n's input.
func connectKeyed[T any, K comparable](ks KeyedStream[T, K], n *node, input int) {
	n.keyed = true
	connect(ks.node, ks.tag, n, input, runtime.Hash, true, ks.partitioner)
}
