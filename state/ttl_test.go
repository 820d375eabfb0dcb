package state

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTTL drives every kind of state with a time to live by a manual
// clock, on both backends: values expire TTL after their last write (or
// read, with UpdateOnReadAndWrite), an expired value is not returned (or
// once, with ReturnExpiredIfNotCleanedUp) and is removed, and a restored
// state keeps its values' times.
func TestTTL(t *testing.T) { eachBackend(t, testTTL) }

func testTTL(t *testing.T, opts ...BackendOption) {
	var now int64
	clock := WithProcessingTime(func() int64 { return now })
	b := newBackend(t, append(opts, clock)...)
	ttl := &TTLConfig{TTL: 10 * time.Millisecond}
	v := must(Value(b, ValueDescriptor[string]{Name: "v", TTL: ttl}))
	l := must(List(b, ListDescriptor[int]{Name: "l", TTL: ttl}))
	m := must(Map(b, MapDescriptor[string, int]{Name: "m", TTL: ttl}))
	r := must(Reducing(b, ReducingDescriptor[int]{Name: "r", Reduce: func(a, x int) int { return a + x }, TTL: ttl}))
	a := must(Aggregating(b, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "a", Function: avg{}, TTL: ttl}))
	renewed := must(Value(b, ValueDescriptor[string]{Name: "renewed", TTL: &TTLConfig{TTL: 10 * time.Millisecond, Update: UpdateOnReadAndWrite}}))
	// Without background cleanup, which could remove the expired value
	// before the read that returns it once.
	lenient := must(Value(b, ValueDescriptor[string]{Name: "lenient", TTL: &TTLConfig{TTL: 10 * time.Millisecond, Visibility: ReturnExpiredIfNotCleanedUp, DisableCleanupInBackground: true}}))

	b.SetCurrentKey("k")
	v.Update("x")
	l.Add(1)
	m.Put("a", 1)
	r.Add(2)
	a.Add(4)
	renewed.Update("y")
	lenient.Update("z")
	now = 6
	l.Add(2)
	m.Put("b", 2)
	r.Add(3)
	if got, ok := renewed.Value(); !ok || got != "y" { // renews it to 6
		t.Fatalf("renewed at 6 = %q, %v", got, ok)
	}
	if got, ok := v.Value(); !ok || got != "x" {
		t.Fatalf("value at 6 = %q, %v", got, ok)
	}
	if got, _ := r.Get(); got != 5 {
		t.Fatalf("reduced at 6 = %d, want 5", got)
	}

	// A snapshot keeps the times: restored at 10, what was written at 0
	// has expired.
	var buf bytes.Buffer
	s := b.Snapshot(1)
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	blob := buf.Bytes()

	now = 10
	if _, ok := v.Value(); ok {
		t.Fatal("value written at 0 is visible at 10 with a TTL of 10 ms")
	}
	if got := l.Get(); !slices.Equal(got, []int{2}) {
		t.Fatalf("list at 10 = %v, want [2]", got)
	}
	if _, ok := m.Get("a"); ok || m.Len() != 1 || !m.Contains("b") {
		t.Fatalf("map at 10: a visible %v, %d entries", ok, m.Len())
	}
	if got, _ := r.Get(); got != 5 { // last written at 6
		t.Fatalf("reduced at 10 = %d, want 5", got)
	}
	if _, ok := a.Get(); ok {
		t.Fatal("accumulator written at 0 is visible at 10")
	}
	if got, ok := renewed.Value(); !ok || got != "y" {
		t.Fatalf("renewed (read at 6) at 10 = %q, %v", got, ok)
	}
	if got, ok := lenient.Value(); !ok || got != "z" {
		t.Fatalf("lenient at 10 = %q, %v: an expired value not yet removed is returned once", got, ok)
	}
	if _, ok := lenient.Value(); ok {
		t.Fatal("lenient at 10, read again: the expired value was not removed")
	}
	now = 16
	if _, ok := r.Get(); ok {
		t.Fatal("reduced value written at 6 is visible at 16")
	}
	r.Add(7) // starts over
	if got, _ := r.Get(); got != 7 {
		t.Fatalf("reduced after expiry = %d, want 7", got)
	}
	a.Add(8)
	if got, _ := a.Get(); got != 8 {
		t.Fatalf("aggregated after expiry = %v, want 8", got)
	}

	// Restored into the other backend at 10.
	now = 10
	other := []BackendOption{clock}
	if len(opts) == 0 {
		other = append(other, pebbleBackend(t))
	}
	rb := newBackend(t, other...)
	if err := rb.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	rv := must(Value(rb, ValueDescriptor[string]{Name: "v", TTL: ttl}))
	rl := must(List(rb, ListDescriptor[int]{Name: "l", TTL: ttl}))
	rb.SetCurrentKey("k")
	if _, ok := rv.Value(); ok {
		t.Fatal("restored: value written at 0 is visible at 10")
	}
	if got := rl.Get(); !slices.Equal(got, []int{2}) {
		t.Fatalf("restored: list at 10 = %v, want [2]", got)
	}

	// A state restored without its TTL, or with one it did not have,
	// fails naming it.
	nb := newBackend(t, opts...)
	if err := nb.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := Value(nb, ValueDescriptor[string]{Name: "v"}); err == nil || !strings.Contains(err.Error(), `"v"`) || !strings.Contains(err.Error(), "time to live") {
		t.Fatalf("restoring a state with a TTL as one without: %v", err)
	}
	if _, err := Value(b, ValueDescriptor[string]{Name: "bad", TTL: &TTLConfig{}}); err == nil {
		t.Fatal("a TTL of 0 was accepted")
	}
	if _, err := ValueNS[string, window, string](b, nil, ValueDescriptor[string]{Name: "ns", TTL: ttl}); err == nil {
		t.Fatal("a TTL on namespaced state was accepted")
	}
}
