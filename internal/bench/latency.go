package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/connector"
)

// End-to-end latency at a fixed rate, measured the same way on both
// sides. The events are those of a generator configuration whose rate is
// the rate wanted; the source releases each event at its event time plus
// a shift of wall-clock time, so that event time is the time of
// generation on the shifted clock. The shift is decided once per run by
// the first source reader to start: the wall-clock time a second after
// it, less the configuration's base time, written to the start file of
// the run's latency directory (LatencyStartFile), which the other readers
// and the sinks read. Each row has a due time (nexmark.LatencySpec); a
// sink takes the wall-clock time a row reaches it less the row's due time
// plus the shift, and counts it in a histogram (LatencyHistogram) if the
// due time falls in the counted span (the run's first seconds, while a JIT
// warms up, and its last, whose windows fire at the end of the input,
// left out). Each sink subtask writes its histogram to latency-N.txt in
// the directory; bench/flink's NexmarkSql does the same in Java.

// LatencyStartFile is the name of the start file in a latency directory:
// the shift in milliseconds, as decimal text.
const LatencyStartFile = "start"

// latencyStartDelay is how far after the first reader starts the first
// events are released, so that every reader and sink is running by then.
const latencyStartDelay = time.Second

// LatencyShift returns the shift of the run whose latency directory is
// dir: read from its start file, or, if there is none yet, decided now
// (a second from now, less base, in milliseconds) and written there. It
// is safe for concurrent use by the readers of one or more processes:
// the file appears whole, once (linked from a temporary file).
func LatencyShift(dir string, base int64) (int64, error) {
	start := filepath.Join(dir, LatencyStartFile)
	if v, err := readShift(start); err == nil {
		return v, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	shift := time.Now().Add(latencyStartDelay).UnixMilli() - base
	tmp, err := os.CreateTemp(dir, ".start-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strconv.FormatInt(shift, 10)); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Link(tmp.Name(), start); err != nil && !errors.Is(err, os.ErrExist) {
		return 0, err
	}
	return readShift(start)
}

func readShift(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// LatencyHistogram counts latencies in microseconds in buckets of two
// significant binary digits … seven: values below 128 µs exactly, larger
// ones in 64 buckets per power of two (within 1.6 %). A bucket is named
// by its least value. The zero value is empty; Add does not allocate.
type LatencyHistogram struct {
	counts [latencyBuckets]int64
}

const latencyBuckets = 128 + 57*64 // up to 2^63 µs

// latencyBucket returns v's bucket (v ≥ 0).
func latencyBucket(v int64) int {
	if v < 128 {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 7 // ≥ 1
	return 128 + (e-1)*64 + int(v>>e) - 64
}

// latencyLow is the least value of bucket i.
func latencyLow(i int) int64 {
	if i < 128 {
		return int64(i)
	}
	e := (i-128)/64 + 1
	return int64((i-128)%64+64) << e
}

// Add counts a latency of us microseconds (a negative one as 0).
func (h *LatencyHistogram) Add(us int64) { h.counts[latencyBucket(max(us, 0))]++ }

// Count is how many latencies h counted.
func (h *LatencyHistogram) Count() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// Merge adds o's counts to h's.
func (h *LatencyHistogram) Merge(o *LatencyHistogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// Quantile is the q-quantile of the latencies (nearest rank), as the
// middle of its bucket; 0 if h is empty.
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := max(int64(q*float64(n)+0.999999), 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := latencyLow(i), latencyLow(i+1)
			return time.Duration(lo+(hi-lo)/2) * time.Microsecond
		}
	}
	return 0
}

// writeFile writes h to file name as text: a line "LEAST COUNT" per bucket counted, the
// format of bench/flink's latency sink.
func (h *LatencyHistogram) writeFile(name string) error {
	var b strings.Builder
	for i, c := range h.counts {
		if c > 0 {
			fmt.Fprintf(&b, "%d %d\n", latencyLow(i), c)
		}
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

// ReadLatencyDir merges the histograms of dir's latency-*.txt files, one
// per sink subtask; it fails if there is none.
func ReadLatencyDir(dir string) (*LatencyHistogram, error) {
	names, err := filepath.Glob(filepath.Join(dir, "latency-*.txt"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no latency-*.txt: the run's sinks wrote no latencies", dir)
	}
	slices.Sort(names)
	var h LatencyHistogram
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 {
				continue
			}
			var lo, c int64
			if len(fs) == 2 {
				lo, err = strconv.ParseInt(fs[0], 10, 64)
				if err == nil {
					c, err = strconv.ParseInt(fs[1], 10, 64)
				}
			}
			if len(fs) != 2 || err != nil || lo < 0 || c < 0 || latencyLow(latencyBucket(lo)) != lo {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %q: want a bucket's least latency in µs and a count", name, line, sc.Text())
			}
			h.counts[latencyBucket(lo)] += c
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return &h, nil
}

// LatencyRun is where a latency run writes and which rows it counts.
type LatencyRun struct {
	Dir string
	// Base is the event time of every split's first event (the
	// generator's BaseTime).
	Base int64
	// From and Until bound the due times counted: [From, Until).
	From, Until int64
}

// latencySink counts each due time's latency: a sink of due times (the
// rows of nexmark.DueTimes).
type latencySink struct {
	run   LatencyRun
	shift func() (int64, error)
}

// shiftOnce returns LatencyShift of run's directory, asked once.
func (run LatencyRun) shiftOnce() func() (int64, error) {
	var once sync.Once
	var shift int64
	var err error
	return func() (int64, error) {
		once.Do(func() { shift, err = LatencyShift(run.Dir, run.Base) })
		return shift, err
	}
}

// newLatencySink returns a sink counting latencies for run, whose shift
// is shift's.
func newLatencySink(run LatencyRun, shift func() (int64, error)) connector.Sink[int64] {
	return &latencySink{run: run, shift: shift}
}

func (s *latencySink) NewWriter(_ context.Context, info connector.WriterInfo) (connector.SinkWriter[int64], error) {
	return &latencyWriter{sink: s, subtask: info.Subtask}, nil
}

type latencyWriter struct {
	sink    *latencySink
	subtask int
	shift   int64
	shifted bool
	h       LatencyHistogram
}

func (w *latencyWriter) Write(due, _ int64) error {
	now := time.Now().UnixMicro()
	if due < w.sink.run.From || due >= w.sink.run.Until {
		return nil
	}
	if !w.shifted {
		// The start file exists: a reader wrote it before releasing the
		// event this row came from.
		v, err := w.sink.shift()
		if err != nil {
			return err
		}
		w.shift, w.shifted = v, true
	}
	w.h.Add(now - (due+w.shift)*1000)
	return nil
}

func (w *latencyWriter) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }

// Close writes the histogram, which a run that fails leaves incomplete
// (the run's error is what counts then).
func (w *latencyWriter) Close() error {
	return w.h.writeFile(filepath.Join(w.sink.run.Dir, fmt.Sprintf("latency-%d.txt", w.subtask)))
}
