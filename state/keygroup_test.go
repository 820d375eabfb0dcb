package state

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/weirstream/weir/codec"
)

func TestRangeForSubtask(t *testing.T) {
	for _, maxP := range []int{1, 2, 7, 128, 129, 1000, 32768} {
		for _, p := range []int{1, 2, 3, 5, 7, 64, 127, 128, 1000} {
			if p > maxP {
				continue
			}
			next := 0
			for i := range p {
				r := RangeForSubtask(maxP, p, i)
				if r.Start != next || r.Len() == 0 {
					t.Fatalf("maxP %d p %d: subtask %d has %v, want start %d", maxP, p, i, r, next)
				}
				// Flink's formula, spelled out.
				if start := int(math.Ceil(float64(i*maxP) / float64(p))); r.Start != start {
					t.Fatalf("maxP %d p %d i %d: start %d, want ceil(i*maxP/p) = %d", maxP, p, i, r.Start, start)
				}
				for _, kg := range []int{r.Start, r.End} {
					if got := SubtaskForKeyGroup(maxP, p, kg); got != i {
						t.Fatalf("maxP %d p %d: key group %d in %v of subtask %d maps to subtask %d", maxP, p, kg, r, i, got)
					}
				}
				next = r.End + 1
			}
			if next != maxP {
				t.Fatalf("maxP %d p %d: ranges end at %d", maxP, p, next-1)
			}
		}
	}
	// Examples worked by hand: 128 key groups over 3 subtasks.
	for i, want := range []KeyGroupRange{{0, 42}, {43, 85}, {86, 127}} {
		if got := RangeForSubtask(128, 3, i); got != want {
			t.Errorf("RangeForSubtask(128, 3, %d) = %v, want %v", i, got, want)
		}
	}
}

type UserID string

type compositeKey struct {
	Tenant string
	Shard  int32
}

// TestHasherGolden pins hash values: they decide which subtask restores a
// key's state, so they must never change between versions or platforms.
func TestHasherGolden(t *testing.T) {
	hs, hi, hu := HasherFor[string](), HasherFor[int64](), HasherFor[UserID]()
	hc := HasherFor[compositeKey]()
	got := fmt.Sprintf("%08x %08x %08x %08x %08x %08x %08x",
		hs(""), hs("hello"), hs("a much longer key of 33 bytes...."), hi(0), hi(-1), hu("hello"),
		hc(compositeKey{"t", 7}))
	const want = "551e323e 01bfa82b e41252d7 380b481b c91f80da 01bfa82b 80415e89"
	if got != want {
		t.Errorf("hashes = %q, want %q", got, want)
	}
	if hs("hello") != hu("hello") {
		t.Error("a named string type hashes differently from string")
	}
	if HasherFor[int]()(-5) != hi(-5) || HasherFor[int8]()(-5) != hi(-5) || HasherFor[uint16]()(5) != hi(5) {
		t.Error("integer widths hash differently")
	}
	if HasherFor[float64]()(0) != HasherFor[float64]()(math.Copysign(0, -1)) {
		t.Error("+0 and -0 hash differently")
	}
	if HasherFor[bool]()(true) == HasherFor[bool]()(false) {
		t.Error("true and false collide")
	}
	if got, want := hc(compositeKey{"t", 7}), HasherFromCodec(codec.MustFor[compositeKey]())(compositeKey{"t", 7}); got != want {
		t.Error("struct keys are not hashed from their codec bytes")
	}
}

func TestHasherForUnsupported(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("HasherFor[any] did not panic")
		}
	}()
	HasherFor[any]()
}

// TestKeyGroupBalance checks that sequential keys spread evenly over key
// groups: every group's count is within 5 standard deviations of the mean
// of a uniform assignment, and the chi-square statistic is plausible.
func TestKeyGroupBalance(t *testing.T) {
	const n = 200000
	cases := map[string]func(i int) uint32{
		"string user-i": func(h func(string) uint32) func(int) uint32 {
			return func(i int) uint32 { return h("user-" + strconv.Itoa(i)) }
		}(HasherFor[string]()),
		"int64 i": func(h func(int64) uint32) func(int) uint32 {
			return func(i int) uint32 { return h(int64(i)) }
		}(HasherFor[int64]()),
		"int64 i<<20": func(h func(int64) uint32) func(int) uint32 {
			return func(i int) uint32 { return h(int64(i) << 20) }
		}(HasherFor[int64]()),
		"struct": func(h func(compositeKey) uint32) func(int) uint32 {
			return func(i int) uint32 { return h(compositeKey{"tenant", int32(i)}) }
		}(HasherFor[compositeKey]()),
	}
	for name, hash := range cases {
		for _, maxP := range []int{128, 1000, 4096} {
			counts := make([]int, maxP)
			for i := range n {
				counts[KeyGroupFor(hash(i), maxP)]++
			}
			mean := float64(n) / float64(maxP)
			sd := math.Sqrt(mean * (1 - 1/float64(maxP)))
			chi := 0.0
			for kg, c := range counts {
				if d := float64(c) - mean; math.Abs(d) > 5*sd {
					t.Errorf("%s, %d groups: group %d has %d keys, mean %.0f", name, maxP, kg, c, mean)
				}
				chi += (float64(c) - mean) * (float64(c) - mean) / mean
			}
			// Chi-square with maxP-1 degrees of freedom has mean maxP-1
			// and standard deviation sqrt(2(maxP-1)).
			df := float64(maxP - 1)
			if chi > df+6*math.Sqrt(2*df) {
				t.Errorf("%s, %d groups: chi-square %.0f for %v degrees of freedom", name, maxP, chi, df)
			}
		}
	}
}

func TestHasherAllocs(t *testing.T) {
	hs, hi := HasherFor[string](), HasherFor[int64]()
	key := "user-123456"
	if n := testing.AllocsPerRun(100, func() { hs(key); hi(42) }); n != 0 {
		t.Errorf("hashing allocates %v times", n)
	}
}
