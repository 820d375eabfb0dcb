package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

// TestReaderFetchMaxWait: a reader's client holds a fetch for at most
// DefaultFetchMaxWait, and kgo.FetchMaxWait in ClientOptions overrides it.
func TestReaderFetchMaxWait(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := func(r *kgo.Record) (string, error) { return string(r.Value), nil }
	for _, tc := range []struct {
		name string
		opts []SourceOption
		want time.Duration
	}{
		{"default", nil, DefaultFetchMaxWait},
		{"ClientOptions", []SourceOption{ClientOptions(kgo.FetchMaxWait(2 * time.Second))}, 2 * time.Second},
	} {
		opts := append([]SourceOption{BootstrapServers(c.ListenAddrs()...), Topics("t"), GroupID("g")}, tc.opts...)
		src, err := NewSource(value, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := src.NewReader(ctx, connector.ReaderInfo{}, []connector.SplitStart{{Split: SplitID("t", 0)}})
		if err != nil {
			t.Fatal(err)
		}
		got := rd.(*reader[string]).cl.OptValue(kgo.FetchMaxWait)
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: the reader's fetch max wait is %v, want %v", tc.name, got, tc.want)
		}
	}
}
