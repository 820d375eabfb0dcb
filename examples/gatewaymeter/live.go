package gatewaymeter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
)

// LiveSource generates gateway-events as it is read: an unbounded trace
// (GenConfig with practically unlimited requests) paced at linesPerSecond
// per partition in processing time. It is deterministic: partition p's
// bytes are those GenerateFiles would write, so a restore that seeks to a
// byte offset resumes exactly where the checkpoint was taken (the lines
// before it are generated again and skipped, without pacing). Its reader
// parses each line as it returns it (LineParser).
type LiveSource struct {
	cfg  GenConfig
	rate float64
}

// NewLiveSource returns a live source; cfg.Requests is ignored.
func NewLiveSource(cfg GenConfig, linesPerSecond float64) (*LiveSource, error) {
	cfg.Requests = 1e12
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if linesPerSecond <= 0 {
		return nil, fmt.Errorf("gatewaymeter: lines per second must be positive, got %g", linesPerSecond)
	}
	return &LiveSource{cfg: cfg, rate: linesPerSecond}, nil
}

// Splits implements connector.Source: one split per partition.
func (s *LiveSource) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.cfg.Partitions)
	for p := range ids {
		ids[p] = TraceFileName(p)
	}
	return ids, nil
}

// Bounded implements connector.Source: the live trace does not end.
func (s *LiveSource) Bounded() bool { return false }

// NewReader implements connector.Source.
func (s *LiveSource) NewReader(ctx context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[Parsed], error) {
	rctx, cancel := context.WithCancel(ctx)
	r := &liveReader{cancel: cancel, start: time.Now(), rate: s.rate, parse: NewLineParser()}
	for _, sp := range splits {
		p, err := PartitionOf(sp.Split)
		if err != nil || p >= s.cfg.Partitions {
			cancel()
			return nil, fmt.Errorf("gatewaymeter: unknown split %q", sp.Split)
		}
		part := &livePart{id: sp.Split, lines: make(chan file.Line, 1024), skip: max(sp.Offset, 0)}
		r.parts = append(r.parts, part)
		go part.generate(rctx, s.cfg, p)
	}
	return r, nil
}

type livePart struct {
	id      string
	lines   chan file.Line
	skip    int64 // lines starting before this offset are replayed silently
	emitted int64 // lines emitted by this reader
	err     error
}

// generate runs the generator, keeping partition p's lines.
func (p *livePart) generate(ctx context.Context, cfg GenConfig, part int) {
	lw := &lineWriter{ctx: ctx, p: p}
	_, err := Generate(cfg, func(q int) io.Writer {
		if q == part {
			return lw
		}
		return io.Discard
	})
	if err != nil && ctx.Err() == nil {
		p.err = err
	}
	close(p.lines)
}

// lineWriter cuts the generator's bytes into lines with their offsets.
type lineWriter struct {
	ctx  context.Context
	p    *livePart
	buf  []byte
	base int64 // offset of buf[0]
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		off := w.base
		text := bytes.Clone(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.base += int64(i + 1)
		if off < w.p.skip {
			continue
		}
		select {
		case w.p.lines <- file.Line{File: w.p.id, Offset: off, Text: text}:
		case <-w.ctx.Done():
			return 0, w.ctx.Err()
		}
	}
}

type liveReader struct {
	parts  []*livePart
	rr     int
	cancel context.CancelFunc
	start  time.Time
	rate   float64
	parse  func(file.Line) (Parsed, error)
}

// Fetch returns the lines a partition may emit by now: linesPerSecond
// since the reader started.
func (r *liveReader) Fetch(ctx context.Context) (connector.Fetch[Parsed], error) {
	for {
		allowed := int64(r.rate*time.Since(r.start).Seconds()) + 1
		for range r.parts {
			p := r.parts[r.rr]
			r.rr = (r.rr + 1) % len(r.parts)
			n := min(allowed-p.emitted, 256)
			if n <= 0 {
				continue
			}
			f := connector.Fetch[Parsed]{Split: p.id}
			for int64(len(f.Records)) < n {
				select {
				case l, ok := <-p.lines:
					if !ok {
						if p.err != nil {
							return f, p.err
						}
						return f, errors.New("gatewaymeter: the live trace ended")
					}
					pl, err := r.parse(l)
					if err != nil {
						return connector.Fetch[Parsed]{}, err
					}
					f.Records = append(f.Records, pl)
					f.Next = l.Offset + int64(len(l.Text)) + 1
					continue
				default:
				}
				break
			}
			if len(f.Records) > 0 {
				p.emitted += int64(len(f.Records))
				return f, nil
			}
		}
		wait := time.Duration(float64(time.Second) / r.rate)
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return connector.Fetch[Parsed]{}, ctx.Err()
		case <-t.C:
		}
	}
}

func (r *liveReader) Close() error {
	r.cancel()
	return nil
}
