package kafka_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/kafka"
)

// TestSourceOffsetNoLongerInTheLog restores a reader at offset 20 of a
// partition whose records below 60 have been deleted (as retention or
// DeleteRecords deletes them) before the job read them. By default the
// reader fails with an error naming the split, its offset and where the
// log now begins, rather than skipping 40 records unasked; with
// ResetOnOutOfRange it goes on from offset 60.
func TestSourceOffsetNoLongerInTheLog(t *testing.T) {
	brokers := newCluster(t, 1, []string{"events"})
	produce(t, brokers, "events", 1, 100, 1_000_000)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "events", Partition: 0, At: 60})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}

	open := func(opts ...kafka.SourceOption) connector.Reader[string] {
		src, err := kafka.NewSource(value, append([]kafka.SourceOption{kafka.BootstrapServers(brokers...), kafka.Topics("events"), kafka.Bounded()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, []connector.SplitStart{{Split: "events-0", Offset: 20}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}

	r := open()
	for {
		f, err := r.Fetch(ctx)
		if err == nil {
			if len(f.Records) > 0 {
				t.Fatalf("read %q from offset %d: records 20 to 59 were skipped unasked", f.Records[0], f.Next-int64(len(f.Records)))
			}
			continue
		}
		if errors.Is(err, connector.ErrEndOfInput) {
			t.Fatal("the reader ended without reading or failing")
		}
		for _, want := range []string{"events-0", "offset 20", "begins at 60", "ResetOnOutOfRange"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		break
	}

	got, _ := readAll(t, open(kafka.ResetOnOutOfRange()))
	if w := want([]int{0}, 60, 100); !slices.Equal(got, w) {
		t.Fatalf("with ResetOnOutOfRange: read %d records (%q...), want offsets 60 to 99", len(got), got[:min(3, len(got))])
	}
}
