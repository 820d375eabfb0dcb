package connector

import "context"

// Discard returns a sink that drops every record (Flink's DiscardingSink):
// for benchmarks, and for jobs whose output does not matter. It keeps no
// state and commits nothing.
func Discard[T any]() Sink[T] { return discard[T]{} }

type discard[T any] struct{}

func (discard[T]) NewWriter(context.Context, WriterInfo) (SinkWriter[T], error) {
	return discardWriter[T]{}, nil
}

type discardWriter[T any] struct{}

func (discardWriter[T]) Write(T, int64) error                                   { return nil }
func (discardWriter[T]) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }
func (discardWriter[T]) Close() error                                           { return nil }
