package file_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
)

// copyLine is a decoder that keeps every field of the line.
func copyLine() func(file.Line) (rec, error) {
	return func(l file.Line) (rec, error) { return rec{l.File, l.Offset, string(l.Text)}, nil }
}

// fetchAll reads r to its end: every fetch's records, Next and
// EndOfSplit, recycling each fetch once read.
func fetchAll[T any](t *testing.T, r connector.Reader[T]) (recs []T, ends []string) {
	t.Helper()
	for {
		f, err := r.Fetch(context.Background())
		if errors.Is(err, connector.ErrEndOfInput) {
			return recs, ends
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, f.Records...)
		ends = append(ends, fmt.Sprintf("%s %d %d %v", f.Split, len(f.Records), f.Next, f.EndOfSplit))
		if f.Recycle != nil {
			f.Recycle()
		}
	}
}

// TestDecodeAgreesWithLines: a decoded source reads the same lines, with
// the same offsets, in the same fetches as Lines, for every batch size and
// read buffer size (lines longer than the buffer among them), from the
// start and restored at every fetch's Next.
func TestDecodeAgreesWithLines(t *testing.T) {
	dir := t.TempDir()
	files := maps2(traces, map[string]string{"zz-long": strings.Repeat("x", 1000) + "\nshort\n" + strings.Repeat("y", 40) + "\r\n" + strings.Repeat("z", 33)})
	writeFiles(t, dir, files)
	for _, batch := range []int{1, 2, 3, 1024} {
		for _, buf := range []int{16, 64 << 10} {
			t.Run(fmt.Sprintf("batch=%d,buffer=%d", batch, buf), func(t *testing.T) {
				opts := []file.SourceOption{file.BatchLines(batch), file.ReadBufferSize(buf)}
				lines, err := file.Lines(dir, opts...)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := file.Decode(dir, copyLine, opts...)
				if err != nil {
					t.Fatal(err)
				}
				splits, _ := dec.Splits(context.Background())
				if want, _ := lines.Splits(context.Background()); !slices.Equal(splits, want) {
					t.Fatalf("splits %q, want %q", splits, want)
				}
				read := func(starts []connector.SplitStart) (got, want []rec, gotEnds, wantEnds []string) {
					lr, err := lines.NewReader(context.Background(), connector.ReaderInfo{}, starts)
					if err != nil {
						t.Fatal(err)
					}
					defer lr.Close()
					ls, wantEnds := fetchAll(t, lr)
					for _, l := range ls {
						want = append(want, rec{l.File, l.Offset, string(l.Text)})
					}
					dr, err := dec.NewReader(context.Background(), connector.ReaderInfo{}, starts)
					if err != nil {
						t.Fatal(err)
					}
					defer dr.Close()
					got, gotEnds = fetchAll(t, dr)
					return got, want, gotEnds, wantEnds
				}
				got, want, gotEnds, wantEnds := read(startAll(splits))
				var all []rec
				for _, s := range splits {
					all = append(all, expected(s, files[s])...)
				}
				slices.SortFunc(want, cmpRec)
				if !slices.Equal(slices.SortedFunc(slices.Values(got), cmpRec), want) || !slices.Equal(want, slices.SortedFunc(slices.Values(all), cmpRec)) {
					t.Fatalf("decoded\n %v\nlines\n %v\nexpected\n %v", got, want, all)
				}
				if !slices.Equal(gotEnds, wantEnds) {
					t.Fatalf("fetches %q, Lines' %q", gotEnds, wantEnds)
				}
				for _, e := range gotEnds {
					var split string
					var n int
					var next int64
					var end bool
					fmt.Sscanf(e, "%s %d %d %v", &split, &n, &next, &end)
					got, want, gotEnds, wantEnds := read([]connector.SplitStart{{Split: split, Offset: next}})
					if !slices.Equal(got, want) || !slices.Equal(gotEnds, wantEnds) {
						t.Fatalf("restored at %s %d: decoded %v %q, Lines %v %q", split, next, got, gotEnds, want, wantEnds)
					}
				}
			})
		}
	}
}

func cmpRec(a, b rec) int {
	if c := strings.Compare(a.File, b.File); c != 0 {
		return c
	}
	return int(a.Offset - b.Offset)
}

func maps2(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// TestDecodeReusesBatches: a recycled fetch's slice carries the next
// fetch, and a fetch allocates nothing per line: one allocation per fetch
// (its Recycle) whatever the batch size.
func TestDecodeReusesBatches(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	writeFiles(t, dir, map[string]string{"a": b.String()})
	type pos struct{ off int64 }
	src, err := file.Decode(dir, func() func(file.Line) (pos, error) {
		return func(l file.Line) (pos, error) { return pos{l.Offset}, nil }
	}, file.BatchLines(256))
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"a"}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	first, err := r.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, last := &first.Records[0], first.Records[len(first.Records)-1].off
	first.Recycle()
	f, err := r.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if &f.Records[0] != p || f.Records[0].off <= last {
		t.Fatal("the recycled batch does not carry the next fetch")
	}
	f.Recycle()
	allocs := testing.AllocsPerRun(50, func() {
		f, err := r.Fetch(context.Background())
		if err != nil || len(f.Records) != 256 {
			t.Fatalf("fetch: %d records, %v", len(f.Records), err)
		}
		f.Recycle()
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per fetch of 256 lines, want at most 1", allocs)
	}
}

// TestDecodeErrors: a decoder's error fails the fetch and names the file
// and the line's offset; each reader gets a decoder of its own.
func TestDecodeErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "good\nbad\ngood\n"})
	decoders := 0
	src, err := file.Decode(filepath.Join(dir, "a"), func() func(file.Line) (string, error) {
		decoders++
		return func(l file.Line) (string, error) {
			if string(l.Text) == "bad" {
				return "", errors.New("no good")
			}
			return string(l.Text), nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, err := src.NewReader(context.Background(), connector.ReaderInfo{}, startAll([]string{"a"}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Fetch(context.Background())
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "offset 5") || !strings.Contains(err.Error(), filepath.Join(dir, "a")) || !strings.Contains(err.Error(), "no good") {
			t.Fatalf("error %v, want one naming the file, offset 5 and the decoder's error", err)
		}
	}
	if decoders != 2 {
		t.Fatalf("%d decoders for 2 readers", decoders)
	}
	if _, err := file.Decode[string](dir, nil); err == nil {
		t.Fatal("Decode without a decoder: no error")
	}
}
