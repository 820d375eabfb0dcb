package file

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CommittedFiles returns the names of the committed part files in dir
// ("part-*.jsonl", not the in-progress files), ordered by name with runs
// of digits compared as numbers, so that a subtask's files come in
// checkpoint order. A directory without part files gives none; a missing
// directory is an error.
func CommittedFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("file: output directory %s: %w", dir, unwrapPath(err))
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "part-") && strings.HasSuffix(n, ".jsonl") && isRegular(filepath.Join(dir, n)) {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, naturalCompare)
	return names, nil
}

// ReadLines returns every line of the committed part files of dir, file
// by file in CommittedFiles order. Each Line's File is the part file's
// name.
func ReadLines(dir string) ([]Line, error) {
	var out []Line
	err := eachLine(dir, func(l Line) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

// ReadJSONLines decodes every line of the committed part files of dir as
// a T, file by file in CommittedFiles order. A line that does not decode
// is an error naming its file and offset.
func ReadJSONLines[T any](dir string) ([]T, error) {
	var out []T
	err := eachLine(dir, func(l Line) error {
		var v T
		if err := json.Unmarshal(l.Text, &v); err != nil {
			return fmt.Errorf("file: %s at offset %d: %w", filepath.Join(dir, l.File), l.Offset, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

func eachLine(dir string, fn func(Line) error) error {
	names, err := CommittedFiles(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := eachLineOf(filepath.Join(dir, name), name, fn); err != nil {
			return err
		}
	}
	return nil
}

// eachLineOf calls fn for each line of the file at path. The lines of a
// file share one buffer.
func eachLineOf(path, name string, fn func(Line) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("file: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var buf []byte
	var off int64
	for {
		start := len(buf)
		buf, err = appendLine(br, buf)
		if err != nil && err != io.EOF {
			return fmt.Errorf("file: reading %s at offset %d: %w", path, off, err)
		}
		if len(buf) == start {
			return nil
		}
		text := trimEOL(buf[start:])
		if err := fn(Line{File: name, Offset: off, Text: text[:len(text):len(text)]}); err != nil {
			return err
		}
		off += int64(len(buf) - start)
		if len(buf) > 1<<20 { // later lines go to a new buffer; earlier ones keep theirs
			buf = nil
		}
	}
}

// naturalCompare orders strings with runs of ASCII digits compared by
// value: "part-a-0-2" before "part-a-0-10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := len(na) - len(nb); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if c := da - db; c != 0 { // more leading zeros last
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}
