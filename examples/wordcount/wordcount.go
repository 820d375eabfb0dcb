// Package wordcount is the smallest job worth running on a cluster: the
// words of a directory of text files, counted per word, each count
// written as it changes, exactly once. It shows how a program carries its
// own jobs (see cmd/wordcount): weir.Main gives it run, jobmanager,
// taskmanager, list and cancel.
package wordcount

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"unicode"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// Count is a word's count after one more occurrence.
type Count struct {
	Word  string `json:"word"`
	Count int64  `json:"count"`
}

// Job returns the job, named "wordcount". Its arguments are --input DIR
// (the text files) and --output DIR (JSON lines of Count, written
// exactly once through checkpoints).
func Job() weir.Job {
	return weir.Job{Name: "wordcount", Short: "count the words of text files", Build: build}
}

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	input := fs.String("input", "", "directory of text files (required)")
	output := fs.String("output", "", "directory of the counts, JSON lines (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" {
		return errors.New("--input and --output are required")
	}
	src, err := file.Lines(*input)
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	sink, err := file.JSONLines[Count](*output)
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	lines := stream.FromSource(env, src, "lines", stream.NoWatermarks[file.Line]())
	words := stream.FlatMap(lines, func(l file.Line, emit func(string)) error {
		for _, w := range Words(string(l.Text)) {
			emit(w)
		}
		return nil
	}, stream.Uid("words"))
	counts := stream.Process(stream.KeyBy(words, func(w string) string { return w }),
		stream.KeyedProcessFunction[string, string, Count](&counter{}), stream.Uid("count"))
	stream.SinkTo(counts, sink, stream.Uid("sink"))
	return nil
}

// Words splits text into lower-case words of letters and digits.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

type counter struct{ n state.ValueState[int64] }

func (c *counter) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	c.n, err = stream.ValueState[int64](rc, "n")
	return err
}

func (c *counter) ProcessElement(ctx *stream.Context[string, Count], w string) error {
	n, _ := c.n.Value()
	n++
	c.n.Update(n)
	return ctx.Emit(Count{Word: w, Count: n})
}
