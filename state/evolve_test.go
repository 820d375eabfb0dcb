package state

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// acctV1 and acctV2 are one value type in two versions of a job: V2
// reorders the fields, drops Note and adds Region.
type acctV1 struct {
	Tenant string
	Cents  int64
	Note   string
}

type acctV2 struct {
	Cents  int64
	Region string
	Tenant string
}

// sumV1 and sumV2 aggregate cents into an acct.
type sumV1 struct{}

func (sumV1) CreateAccumulator() acctV1    { return acctV1{} }
func (sumV1) Add(v int64, a acctV1) acctV1 { a.Cents += v; return a }
func (sumV1) GetResult(a acctV1) acctV1    { return a }
func (sumV1) Merge(a, b acctV1) acctV1     { a.Cents += b.Cents; return a }
func (sumV2) CreateAccumulator() acctV2    { return acctV2{} }
func (sumV2) Add(v int64, a acctV2) acctV2 { a.Cents += v; return a }
func (sumV2) GetResult(a acctV2) acctV2    { return a }
func (sumV2) Merge(a, b acctV2) acctV2     { a.Cents += b.Cents; return a }
func addV1(a, b acctV1) acctV1             { a.Cents += b.Cents; return a }
func addV2(a, b acctV2) acctV2             { a.Cents += b.Cents; return a }
func evolveKey(i int) string               { return fmt.Sprintf("tenant-%03d", i) }
func v1Of(i int) acctV1                    { return acctV1{Tenant: evolveKey(i), Cents: int64(i) * 10, Note: "n"} }
func v2Of(i int) acctV2                    { return acctV2{Cents: int64(i) * 10, Tenant: evolveKey(i)} }
func ttlOf(on bool) *TTLConfig             { return map[bool]*TTLConfig{true: {TTL: time.Hour}}[on] }
func fixedClock() BackendOption            { return WithProcessingTime(func() int64 { return 1_700_000_000_000 }) }
func (sumV2) String() string               { return "sumV2" }
func (sumV1) String() string               { return "sumV1" }

type sumV2 struct{}

const evolveKeys = 300

// TestSchemaEvolution writes every kind of state with V1 values, takes a
// snapshot (in weir's format, or native from Pebble), and restores it into
// a backend whose code registers the states with V2: every value must come
// back with its fields matched by name, on either backend, with and without
// a time to live; and the restored backend's own snapshot, now of V2,
// restores again.
func TestSchemaEvolution(t *testing.T) {
	all := KeyGroupRange{0, 127}
	for _, from := range []string{"heap", "pebble", "pebble-native"} {
		for _, to := range []string{"heap", "pebble"} {
			for _, ttl := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s-to-%s-ttl=%v", from, to, ttl), func(t *testing.T) {
					opts := func(kind string) []BackendOption {
						if strings.HasPrefix(kind, "pebble") {
							return []BackendOption{pebbleBackend(t), fixedClock()}
						}
						return []BackendOption{fixedClock()}
					}
					b1 := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts(from)...)))
					writeV1(t, b1, ttl)
					b2 := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts(to)...)))
					if from == "pebble-native" {
						snap, err := b1.NativeSnapshot(1)
						if err != nil {
							t.Fatal(err)
						}
						blob, dir := nativeCopy(t, snap)
						if err := b2.RestoreNative(bytes.NewReader(blob), dir, all); err != nil {
							t.Fatal(err)
						}
					} else {
						restoreInto(t, b1, b2)
					}
					checkV2(t, b2, ttl)
					b3 := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts(to)...)))
					restoreInto(t, b2, b3)
					checkV2(t, b3, ttl)
				})
			}
		}
	}
}

func restoreInto(t *testing.T, from, to *KeyedBackend[string]) {
	t.Helper()
	s := from.Snapshot(1)
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if err := to.Restore(&buf); err != nil {
		t.Fatal(err)
	}
}

func writeV1(t *testing.T, b *KeyedBackend[string], ttl bool) {
	t.Helper()
	v := must(Value(b, ValueDescriptor[acctV1]{Name: "value", TTL: ttlOf(ttl)}))
	l := must(List(b, ListDescriptor[acctV1]{Name: "list", TTL: ttlOf(ttl)}))
	m := must(Map(b, MapDescriptor[string, acctV1]{Name: "map", TTL: ttlOf(ttl)}))
	r := must(Reducing(b, ReducingDescriptor[acctV1]{Name: "reducing", Reduce: addV1, TTL: ttlOf(ttl)}))
	a := must(Aggregating(b, AggregatingDescriptor[int64, acctV1, acctV1]{Name: "aggregating", Function: sumV1{}, TTL: ttlOf(ttl)}))
	for i := range evolveKeys {
		b.SetCurrentKey(evolveKey(i))
		v.Update(v1Of(i))
		l.Add(v1Of(i))
		l.Add(v1Of(i + 1))
		m.Put("a", v1Of(i))
		m.Put("b", v1Of(i+2))
		r.Add(v1Of(i))
		a.Add(int64(i))
	}
}

func checkV2(t *testing.T, b *KeyedBackend[string], ttl bool) {
	t.Helper()
	v := must(Value(b, ValueDescriptor[acctV2]{Name: "value", TTL: ttlOf(ttl)}))
	l := must(List(b, ListDescriptor[acctV2]{Name: "list", TTL: ttlOf(ttl)}))
	m := must(Map(b, MapDescriptor[string, acctV2]{Name: "map", TTL: ttlOf(ttl)}))
	r := must(Reducing(b, ReducingDescriptor[acctV2]{Name: "reducing", Reduce: addV2, TTL: ttlOf(ttl)}))
	a := must(Aggregating(b, AggregatingDescriptor[int64, acctV2, acctV2]{Name: "aggregating", Function: sumV2{}, TTL: ttlOf(ttl)}))
	for i := range evolveKeys {
		b.SetCurrentKey(evolveKey(i))
		check := func(what string, got, want any) {
			t.Helper()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("key %d, %s: %+v, want %+v", i, what, got, want)
			}
		}
		got, _ := v.Value()
		check("value", got, v2Of(i))
		check("list", l.Get(), []acctV2{v2Of(i), v2Of(i + 1)})
		ma, _ := m.Get("a")
		mb, _ := m.Get("b")
		check("map", []acctV2{ma, mb}, []acctV2{v2Of(i), v2Of(i + 2)})
		red, _ := r.Get()
		check("reducing", red, v2Of(i))
		agg, _ := a.Get()
		check("aggregating", agg, acctV2{Cents: int64(i)})
	}
}

// TestSchemaEvolutionIncompatible: a field whose type changed, or map keys
// of another type, fail the registration with an error naming the state
// and the field; nothing is loaded into the state.
func TestSchemaEvolutionIncompatible(t *testing.T) {
	type acctBad struct {
		Tenant string
		Cents  string
	}
	all := KeyGroupRange{0, 127}
	for _, backend := range []string{"heap", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			var opts []BackendOption
			if backend == "pebble" {
				opts = append(opts, pebbleBackend(t))
			}
			b1 := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts...)))
			writeV1(t, b1, false)
			b2 := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts...)))
			restoreInto(t, b1, b2)
			_, err := Value(b2, ValueDescriptor[acctBad]{Name: "value"})
			var ie *codec.IncompatibleError
			if !errors.As(err, &ie) || ie.Path != ".Cents" || !strings.Contains(err.Error(), `"value"`) || !strings.Contains(err.Error(), "Cents") {
				t.Errorf("value state of a changed field type: %v", err)
			}
			_, err = Map(b2, MapDescriptor[int, acctV2]{Name: "map"})
			if err == nil || !strings.Contains(err.Error(), `"map"`) || !strings.Contains(err.Error(), "map keys") {
				t.Errorf("map state with other keys: %v", err)
			}
			// The same state with a compatible type still restores.
			checkV2(t, b2, false)
		})
	}
}
