package weir

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
)

// statusLine shows the job's state, throughput, event time and
// checkpoints. On a terminal it redraws one line in place; log lines
// written through logWriter clear it first and redraw it after, so the
// two never run into each other.
type statusLine struct {
	w   io.Writer
	tty bool

	mu       sync.Mutex
	c        *stream.JobClient
	last     stream.JobMetrics
	lastAt   time.Time
	line     string // what the terminal shows, "" if nothing
	lastShow time.Time
}

func newStatusLine(w io.Writer) *statusLine {
	s := &statusLine{w: w, lastAt: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

// follow starts showing c.
func (s *statusLine) follow(c *stream.JobClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c, s.lastAt = c, time.Now()
}

func (s *statusLine) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return
	}
	m := s.c.Metrics()
	now := time.Now()
	dt := now.Sub(s.lastAt).Seconds()
	in := float64(max(m.RecordsIn-s.last.RecordsIn, 0)) / dt
	out := float64(max(m.RecordsOut-s.last.RecordsOut, 0)) / dt
	s.last, s.lastAt = m, now
	wm := "-"
	if m.Watermark != runtime.MinWatermark && m.Watermark != runtime.MaxWatermark {
		wm = time.UnixMilli(m.Watermark).UTC().Format("2006-01-02T15:04:05Z")
	}
	ck := "none yet"
	if c := m.LastCheckpoint; c.ID > 0 {
		ck = fmt.Sprintf("%d (%v, %s) %v ago", c.ID, c.Duration.Round(time.Millisecond), bytesString(c.Size), now.Sub(c.At).Round(time.Second))
	}
	line := fmt.Sprintf("%s  in %.0f/s  out %.0f/s  watermark %s  checkpoint %s  restarts %d", m.Status, in, out, wm, ck, m.Restarts)
	if f := m.LastFailure; f != nil && (m.Status == stream.StatusRestarting || m.Status == stream.StatusFailing || ck == "none yet") {
		line += "  last failure: " + oneLine(f.Err.Error(), 160)
	}
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s", line)
		s.line = line
		return
	}
	if now.Sub(s.lastShow) >= 10*time.Second {
		fmt.Fprintln(s.w, line)
		s.lastShow = now
	}
}

func (s *statusLine) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		fmt.Fprintln(s.w)
		s.line = ""
	}
}

// logWriter returns a writer for log lines to w that keeps them off the
// status line.
func (s *statusLine) logWriter(w io.Writer) io.Writer {
	if !s.tty {
		return w
	}
	return logWriter{s: s, w: w}
}

type logWriter struct {
	s *statusLine
	w io.Writer
}

func (l logWriter) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.line != "" {
		fmt.Fprint(l.s.w, "\r\033[K")
	}
	n, err := l.w.Write(p)
	if l.s.line != "" {
		fmt.Fprint(l.s.w, l.s.line)
	}
	return n, err
}

// oneLine shortens an error message for the status line.
func oneLine(msg string, max int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > max {
		msg = msg[:max] + "…"
	}
	return msg
}

func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
