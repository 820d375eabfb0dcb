package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/examples/nexmark"
)

// TestBenchNexmarkFromKafka has `weir gen nexmark` write events to files
// and to a topic, the same lines, and runs q5 and q8 from the topic, in a
// child as `weir bench nexmark` starts it, writing the rows:
// they are the rows of the same query over the events generated
// in-process, line for line. Then `weir bench nexmark --kafka` runs q1 and
// q7 whole: it fills a topic of its own, reads it, reports every query and
// deletes the topic. It asserts what ran and what the rows are, never a
// time.
func TestBenchNexmarkFromKafka(t *testing.T) {
	bin := weirBinary(t)
	bs := kafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gen := []string{"--events", "6000", "--splits", "3", "--rate", "300", "--seed", "9", "--parallelism", "2", "--checkpoint", "50ms"}
	// weir gen nexmark writes the events to files and to Kafka: the same
	// lines, partition i holding file i's.
	prefix := fmt.Sprintf("bench-from-kafka-%d-", time.Now().UnixNano())
	topic := prefix + nexmark.DefaultKafkaTopic
	files := filepath.Join(t.TempDir(), "events")
	genArgs := []string{"gen", "nexmark", "--events", "6000", "--partitions", "3", "--rate", "300", "--seed", "9", "--out", files, "--to-kafka", bs, "--topic-prefix", prefix}
	if b, err := exec.CommandContext(ctx, bin, genArgs...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", genArgs, err, b)
	}
	recs, err := kafka.ReadCommitted(ctx, strings.Split(bs, ","), topic, func(r *kgo.Record) (*kgo.Record, error) { return r, nil })
	if err != nil {
		t.Fatal(err)
	}
	inKafka := make([][]string, 3)
	for _, r := range recs {
		inKafka[r.Partition] = append(inKafka[r.Partition], string(r.Value))
	}
	for p := range inKafka {
		b, err := os.ReadFile(filepath.Join(files, fmt.Sprintf("part-%05d.jsonl", p)))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) < 1000 || !slices.Equal(lines, inKafka[p]) {
			t.Fatalf("partition %d holds %d records, its file %d lines, not the same", p, len(inKafka[p]), len(lines))
		}
	}
	for _, q := range []string{"q5", "q8"} {
		dir := t.TempDir()
		rows := map[string][]string{}
		for _, side := range []struct {
			name string
			args []string
		}{{"generated", nil}, {"kafka", []string{"--kafka", bs, "--kafka-topic", topic}}} {
			out := filepath.Join(dir, side.name)
			args := append(append([]string{"bench", "nexmark", "--child", "--query", q, "--output", out}, gen...), side.args...)
			if b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v\n%s", q, args, err, b)
			}
			lines, err := file.ReadLines(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				rows[side.name] = append(rows[side.name], string(l.Text))
			}
			slices.Sort(rows[side.name])
		}
		if len(rows["generated"]) == 0 {
			t.Fatalf("%s: no rows: the comparison shows nothing", q)
		}
		if !slices.Equal(rows["generated"], rows["kafka"]) {
			t.Fatalf("%s: %d rows from Kafka, %d from the generated events, not the same", q, len(rows["kafka"]), len(rows["generated"]))
		}
		t.Logf("%s: %d rows, the same from Kafka", q, len(rows["kafka"]))
	}

	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "nexmark", "--query", "q1,q7", "--kafka", bs}, gen...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	m := regexp.MustCompile(`read from Kafka: topic (weir-bench-nexmark-[0-9]+) on `).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("the output names no topic read:\n%s", out)
	}
	for _, q := range []string{"q1", "q7"} {
		if !regexp.MustCompile(`(?m)^  ` + q + ` +[0-9]+ `).Match(out) {
			t.Errorf("no line of results for %s:\n%s", q, out)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bs, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(m[1]) {
		t.Fatalf("the command left its topic %s", m[1])
	}

	for _, bad := range [][]string{
		{"--kafka", bs, "--vs-flink"},
		{"--kafka", bs, "--write-events", t.TempDir()},
		{"--kafka-topic", topic},
		{"--child", "--kafka", bs, "--query", "q1"},
	} {
		b, err := exec.CommandContext(ctx, bin, append([]string{"bench", "nexmark"}, bad...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(b), "--kafka") {
			t.Errorf("bench nexmark %v: %v, want a refusal naming --kafka:\n%s", bad, err, b)
		}
	}
}
