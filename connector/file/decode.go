package file

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/weirstream/weir/connector"
)

// DecodedSource is a LineSource whose lines are decoded into records of
// type T where they are read. It implements connector.Source[T].
type DecodedSource[T any] struct {
	*LineSource
	newDecoder func() func(Line) (T, error)
}

// Decode returns a source of the lines of the files at path, each decoded
// into a T on the reader's goroutine as it is read: the splits, offsets
// and options of Lines, without a Line record per line in between.
// newDecoder is called once per reader, so that a decoder may keep state
// (a cache, a scratch buffer) without locking.
//
// The Line a decoder gets is valid only during the call: its Text is in
// the reader's buffer, which the next line overwrites, so the decoder
// copies what it keeps. In return, reading allocates nothing per line:
// lines are decoded from the read buffer (a line longer than it is put
// together in a scratch buffer that is kept), and each fetch's slice of
// records is reused once the job has emitted it (connector.Fetch.Recycle).
//
// A decoder's error fails the fetch, naming the file and the line's
// offset. A job that routes undecodable lines elsewhere (dead letters)
// decodes them into a record that says so instead.
func Decode[T any](path string, newDecoder func() func(Line) (T, error), opts ...SourceOption) (*DecodedSource[T], error) {
	if newDecoder == nil {
		return nil, fmt.Errorf("file: Decode of %s: no decoder", path)
	}
	s, err := Lines(path, opts...)
	if err != nil {
		return nil, err
	}
	return &DecodedSource[T]{LineSource: s, newDecoder: newDecoder}, nil
}

// NewReader implements connector.Source, with the offsets of
// LineSource.NewReader.
func (s *DecodedSource[T]) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[T], error) {
	lr, err := s.newReader(splits)
	if err != nil {
		return nil, err
	}
	return &decodeReader[T]{lineReader: lr, decode: s.newDecoder(), free: make(chan []T, freeBatches)}, nil
}

// freeBatches is how many emitted batches a reader keeps for reuse: the
// source holds up to two fetched batches and emits a third while the
// reader fills a fourth.
const freeBatches = 4

type decodeReader[T any] struct {
	*lineReader
	decode func(Line) (T, error)
	// long holds a line longer than the read buffer.
	long []byte
	// free holds batches the job has emitted (Recycle runs on the
	// subtask's goroutine, Fetch on the fetcher's).
	free chan []T
}

func (r *decodeReader[T]) Fetch(ctx context.Context) (connector.Fetch[T], error) {
	sp, err := r.next(ctx)
	if err != nil {
		return connector.Fetch[T]{}, err
	}
	var recs []T
	select {
	case recs = <-r.free:
	default:
		recs = make([]T, 0, r.batch)
	}
	off := sp.next
	for len(recs) < r.batch {
		line, err := r.line(sp.br)
		if err != nil && err != io.EOF {
			return connector.Fetch[T]{}, fmt.Errorf("file: reading %s at offset %d: %w", sp.path, off, err)
		}
		if len(line) == 0 { // nothing left
			sp.done = true
			break
		}
		v, derr := r.decode(Line{File: sp.id, Offset: off, Text: trimEOL(line)})
		if derr != nil {
			return connector.Fetch[T]{}, fmt.Errorf("file: decoding the line of %s at offset %d: %w", sp.path, off, derr)
		}
		recs = append(recs, v)
		off += int64(len(line))
		if err == io.EOF { // a last line without a newline
			sp.done = true
			break
		}
	}
	if err := sp.finish(off, len(recs)); err != nil {
		return connector.Fetch[T]{}, err
	}
	return connector.Fetch[T]{Split: sp.id, Records: recs, Next: off, EndOfSplit: sp.done, Recycle: func() {
		select {
		case r.free <- recs[:0]:
		default:
		}
	}}, nil
}

// line returns the next line of br with its newline, if it has one,
// valid until the next call. At the end of the input it returns io.EOF,
// with the last line if that has no newline.
func (r *decodeReader[T]) line(br *bufio.Reader) ([]byte, error) {
	chunk, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return chunk, err
	}
	r.long = append(r.long[:0], chunk...)
	for err == bufio.ErrBufferFull {
		chunk, err = br.ReadSlice('\n')
		r.long = append(r.long, chunk...)
	}
	return r.long, err
}
