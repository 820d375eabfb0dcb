package netio

import (
	"testing"

	"github.com/weirstream/weir/codec"
)

type benchRec struct {
	Key   int64
	Value float64
	Ts    int64
}

// BenchmarkLoopbackTCP sends batches of 1024 small records over one
// loopback TCP connection and decodes them on the other side; one
// iteration is one batch.
func BenchmarkLoopbackTCP(b *testing.B) {
	c, err := codec.For[benchRec]()
	if err != nil {
		b.Fatal(err)
	}
	a, z := tcpPair(b)
	defer a.Close()
	defer z.Close()
	s := a.OpenSender(1)
	r := z.OpenReceiver(1, 8)
	batch := make([]benchRec, 1024)
	for i := range batch {
		batch[i] = benchRec{Key: int64(i), Value: float64(i) / 3, Ts: 1_700_000_000_000 + int64(i)}
	}
	ctx := b.Context()
	done := make(chan error, 1)
	go func() {
		var dst []benchRec
		for {
			f, recs, err := RecvBatch(ctx, r, c, dst[:0])
			if err != nil {
				done <- err
				return
			}
			if f.Kind == KindEnd {
				done <- nil
				return
			}
			dst = recs
		}
	}()
	b.ResetTimer()
	for range b.N {
		if err := SendBatch(ctx, s, c, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.SendEnd(ctx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}
