package file_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
)

// writeFiles creates the named files under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rec is a Line in a comparable form.
type rec struct {
	File   string
	Offset int64
	Text   string
}

func (r rec) String() string { return fmt.Sprintf("%s@%d:%q", r.File, r.Offset, r.Text) }

// expected returns the lines of content as the source should emit them.
func expected(split, content string) []rec {
	var out []rec
	off := 0
	for off < len(content) {
		end := strings.IndexByte(content[off:], '\n')
		next := len(content)
		text := content[off:]
		if end >= 0 {
			text = content[off : off+end]
			next = off + end + 1
			text = strings.TrimSuffix(text, "\r")
		}
		out = append(out, rec{split, int64(off), text})
		off = next
	}
	return out
}

// drain reads r to its end, checking each fetch's Next and EndOfSplit
// against the lines, and returns the lines and the fetches' sizes by split.
func drain(t *testing.T, r connector.Reader[file.Line], sizes map[string]int64) (map[string][]rec, map[string][]int) {
	t.Helper()
	got := map[string][]rec{}
	batches := map[string][]int{}
	ended := map[string]bool{}
	for {
		f, err := r.Fetch(context.Background())
		if errors.Is(err, connector.ErrEndOfInput) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ended[f.Split] {
			t.Fatalf("fetch from split %s after its end", f.Split)
		}
		if f.Timestamps != nil {
			t.Fatalf("fetch has source timestamps")
		}
		for _, l := range f.Records {
			if l.File != f.Split {
				t.Fatalf("line of split %s says file %s", f.Split, l.File)
			}
			got[f.Split] = append(got[f.Split], rec{l.File, l.Offset, string(l.Text)})
		}
		batches[f.Split] = append(batches[f.Split], len(f.Records))
		if f.EndOfSplit {
			ended[f.Split] = true
			if f.Next != sizes[f.Split] {
				t.Fatalf("split %s ended at offset %d, want its size %d", f.Split, f.Next, sizes[f.Split])
			}
		} else if f.Next >= sizes[f.Split] {
			t.Fatalf("split %s at offset %d (size %d) did not end", f.Split, f.Next, sizes[f.Split])
		}
	}
	for s := range sizes {
		if !ended[s] {
			t.Fatalf("split %s never ended", s)
		}
	}
	return got, batches
}

func startAll(splits []string) []connector.SplitStart {
	var out []connector.SplitStart
	for _, s := range splits {
		out = append(out, connector.SplitStart{Split: s, Offset: connector.StartDefault})
	}
	return out
}

var traces = map[string]string{
	"part-00000.jsonl": "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n",
	"part-00001.jsonl": "first\nno newline at the end",
	"part-00002.jsonl": "\n\nafter two empty lines\n\n{broken\r\ncrlf\r\n",
	"part-00003.jsonl": "",
	"part-00004.jsonl": "only\n",
	".hidden":          "never read\n",
	"_SUCCESS":         "",
	"sub/nested.jsonl": "not read from a directory source\n",
}

func TestLinesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, traces)
	for _, batch := range []int{1, 2, 3, 1024} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			src, err := file.Lines(dir, file.BatchLines(batch))
			if err != nil {
				t.Fatal(err)
			}
			if !src.Bounded() {
				t.Fatal("line source is not bounded")
			}
			splits, _ := src.Splits(context.Background())
			want := []string{"part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl", "part-00003.jsonl", "part-00004.jsonl"}
			if !slices.Equal(splits, want) {
				t.Fatalf("splits %q, want %q", splits, want)
			}
			r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll(splits))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			sizes := map[string]int64{}
			for _, s := range splits {
				sizes[s] = int64(len(traces[s]))
			}
			got, batches := drain(t, r, sizes)
			for _, s := range splits {
				if w := expected(s, traces[s]); !slices.Equal(got[s], w) {
					t.Errorf("split %s:\n got %v\nwant %v", s, got[s], w)
				}
				for i, n := range batches[s] {
					if n > batch || n < batch && i < len(batches[s])-1 {
						t.Errorf("split %s: batch sizes %v with batch lines %d", s, batches[s], batch)
					}
				}
			}
		})
	}
}

// TestLinesBatchBoundaries: a file of exactly k batches ends in its last
// full batch (no empty fetch after it), and a restore from every batch
// boundary reads exactly the rest.
func TestLinesBatchBoundaries(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	content := b.String()
	writeFiles(t, dir, map[string]string{"a.txt": content})
	all := expected("a.txt", content)
	for _, batch := range []int{1, 3, 4, 5, 12, 13} {
		src, err := file.Lines(dir, file.BatchLines(batch))
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"a.txt"}))
		if err != nil {
			t.Fatal(err)
		}
		var nexts []int64
		read := 0
		for {
			f, err := r.Fetch(context.Background())
			if errors.Is(err, connector.ErrEndOfInput) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			read += len(f.Records)
			if len(f.Records) == 0 {
				t.Fatalf("batch %d: empty fetch after %d lines", batch, read)
			}
			if f.EndOfSplit != (read == len(all)) {
				t.Fatalf("batch %d: EndOfSplit %v after %d of %d lines", batch, f.EndOfSplit, read, len(all))
			}
			nexts = append(nexts, f.Next)
		}
		r.Close()
		if want := (len(all) + batch - 1) / batch; len(nexts) != want {
			t.Fatalf("batch %d: %d fetches, want %d", batch, len(nexts), want)
		}
		for i, next := range nexts {
			r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, []connector.SplitStart{{Split: "a.txt", Offset: next}})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := drain(t, r, map[string]int64{"a.txt": int64(len(content))})
			r.Close()
			rest := all[min(len(all), (i+1)*batch):]
			if !slices.Equal(got["a.txt"], rest) {
				t.Fatalf("batch %d: restore at %d read %v, want %v", batch, next, got["a.txt"], rest)
			}
		}
	}
}

func TestLinesSeekMidFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, traces)
	src, err := file.Lines(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := expected("part-00002.jsonl", traces["part-00002.jsonl"])
	for i, l := range all {
		r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, []connector.SplitStart{{Split: l.File, Offset: l.Offset}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := drain(t, r, map[string]int64{l.File: int64(len(traces[l.File]))})
		r.Close()
		if !slices.Equal(got[l.File], all[i:]) {
			t.Fatalf("seek to %d: got %v, want %v", l.Offset, got[l.File], all[i:])
		}
	}
	// A file without a trailing newline restored at its end reads nothing.
	size := int64(len(traces["part-00001.jsonl"]))
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, []connector.SplitStart{{Split: "part-00001.jsonl", Offset: size}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, r, map[string]int64{"part-00001.jsonl": size})
	if len(got["part-00001.jsonl"]) != 0 {
		t.Fatalf("restore at the end read %v", got)
	}
}

func TestLinesRejectsOffsetsThatAreNotLineStarts(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, traces)
	src, err := file.Lines(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		split  string
		offset int64
		want   string
	}{
		{"part-00000.jsonl", 3, "not at the start of a line"},
		{"part-00000.jsonl", 1000, "past the end"},
		{"part-00000.jsonl", -5, "invalid offset"},
		{"part-00009.jsonl", 0, "unknown split"},
	} {
		_, err := src.NewReader(context.Background(), connector.ReaderInfo{}, []connector.SplitStart{{Split: tc.split, Offset: tc.offset}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s at %d: error %v, want one saying %q", tc.split, tc.offset, err, tc.want)
		}
	}
}

// TestLinesLongLinesAndSharedBuffer reads lines longer than the read
// buffer and checks that lines of one fetch do not overwrite each other.
func TestLinesLongLinesAndSharedBuffer(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 1000)
	content := long + "\nshort\n" + long + "y"
	writeFiles(t, dir, map[string]string{"long": content})
	src, err := file.Lines(filepath.Join(dir, "long"), file.ReadBufferSize(16))
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"long"}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []rec
	for _, l := range f.Records {
		got = append(got, rec{l.File, l.Offset, string(l.Text)})
	}
	if want := expected("long", content); !slices.Equal(got, want) || !f.EndOfSplit {
		t.Fatalf("got %v (end %v), want %v", got, f.EndOfSplit, want)
	}
	_ = append(f.Records[0].Text, "zzzzz"...)
	if string(f.Records[1].Text) != "short" {
		t.Fatalf("appending to one line changed the next: %q", f.Records[1].Text)
	}
}

func TestLinesGlob(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"day1/part-0.jsonl":  "a\n",
		"day1/part-1.jsonl":  "b\n",
		"day2/part-0.jsonl":  "c\n",
		"day2/other.txt":     "not matched\n",
		"day2/.part-9.jsonl": "hidden\n",
	})
	src, err := file.Lines(filepath.Join(dir, "day*", "part-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := src.Splits(context.Background())
	if want := []string{"day1/part-0.jsonl", "day1/part-1.jsonl", "day2/part-0.jsonl"}; !slices.Equal(splits, want) {
		t.Fatalf("splits %q, want %q", splits, want)
	}
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll(splits))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _ := drain(t, r, map[string]int64{splits[0]: 2, splits[1]: 2, splits[2]: 2})
	if len(got) != 3 || got["day2/part-0.jsonl"][0].Text != "c" {
		t.Fatalf("got %v", got)
	}
}

func TestLinesErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, empty, map[string]string{".hidden": "x\n"})
	for _, path := range []string{
		filepath.Join(dir, "missing"),
		empty,
		filepath.Join(dir, "nothing-*.jsonl"),
	} {
		_, err := file.Lines(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Lines(%s): error %v, want one naming the path", path, err)
		}
	}
	if _, err := file.Lines(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: error %v is not os.ErrNotExist", err)
	}
	if _, err := file.Lines(dir, file.BatchLines(0)); err == nil {
		t.Error("batch lines 0 accepted")
	}
}

func TestLinesFetchHonoursContext(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, traces)
	src, _ := file.Lines(dir)
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"part-00000.jsonl"}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Fetch(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch with a cancelled context: %v", err)
	}
}

func BenchmarkLines(b *testing.B) {
	dir := b.TempDir()
	var sb strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&sb, "{\"tenant\":\"t%d\",\"cost\":%d}\n", i%97, i)
	}
	writeFiles(b, dir, map[string]string{"a.jsonl": sb.String()})
	src, err := file.Lines(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(sb.Len()))
	b.ReportAllocs()
	for b.Loop() {
		r, _ := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"a.jsonl"}))
		for {
			if _, err := r.Fetch(context.Background()); err != nil {
				break
			}
		}
		r.Close()
	}
}

// TestLinesPerSecond: a paced source returns the same lines; a wait for
// the pace ends with the context.
func TestLinesPerSecond(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, traces)
	src, err := file.Lines(dir, file.LinesPerSecond(1e6))
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := src.Splits(context.Background())
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll(splits))
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, s := range splits {
		sizes[s] = int64(len(traces[s]))
	}
	got, _ := drain(t, r, sizes)
	r.Close()
	for _, s := range splits {
		if w := expected(s, traces[s]); !slices.Equal(got[s], w) {
			t.Errorf("split %s:\n got %v\nwant %v", s, got[s], w)
		}
	}

	// One line an hour: the second fetch waits, until the context ends.
	slow, _ := file.Lines(dir, file.LinesPerSecond(1.0/3600))
	r, err = slow.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"part-00000.jsonl"}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Fetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Fetch(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("paced fetch after cancel: %v", err)
	}
	if _, err := file.Lines(dir, file.LinesPerSecond(-1)); err == nil {
		t.Fatal("a negative rate was accepted")
	}
}
