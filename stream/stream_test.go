package stream_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

func newEnv(t *testing.T, kv ...string) *stream.Environment {
	t.Helper()
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestMapFilterPipeline(t *testing.T) {
	env := newEnv(t, "parallelism.default=3")
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000_000 + seq }, datagen.Partitions(4), datagen.Count(1000), datagen.BatchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	nums := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
	even := stream.Filter(nums, func(v int64) bool { return v%2 == 0 })
	strs := stream.Map(even, func(v int64) string { return strconv.FormatInt(v, 10) }, stream.Parallelism(2))
	sink := streamtest.NewCollector[string](false)
	stream.SinkTo(strs, sink)
	if err := env.Execute(context.Background(), "pipeline"); err != nil {
		t.Fatal(err)
	}
	got := sink.Results()
	var want []string
	for p := range 4 {
		for seq := int64(0); seq < 1000; seq++ {
			if v := int64(p)*1_000_000 + seq; v%2 == 0 {
				want = append(want, strconv.FormatInt(v, 10))
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
}
