package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// memorySyntax describes the accepted memory sizes, for error messages.
const memorySyntax = "a whole number of bytes with an optional unit: b (bytes), kb (k, kibibytes), mb (m, mebibytes), gb (g, gibibytes), tb (t, tebibytes); units are powers of 1024, as in Flink"

var memoryUnits = map[string]int64{
	"b": 1, "bytes": 1,
	"k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
}

// ParseMemorySize parses a memory size as Flink writes one: a whole
// number followed by an optional unit ("20 kb", "64mb", "1024"), the
// units powers of 1024 and case-insensitive; no unit means bytes.
func ParseMemorySize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty memory size")
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errors.New("a memory size starts with a whole number")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %s is too large", t[:i])
	}
	label := strings.ToLower(strings.TrimSpace(t[i:]))
	unit := int64(1)
	if label != "" {
		u, ok := memoryUnits[label]
		if !ok {
			if strings.HasPrefix(label, ".") {
				return 0, errors.New("fractions are not supported; use a smaller unit, such as 1536 kb for 1.5 mb")
			}
			return 0, fmt.Errorf("unknown unit %q", label)
		}
		unit = u
	}
	if n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%s is larger than the largest memory size, %d bytes", t, int64(math.MaxInt64))
	}
	return n * unit, nil
}

// FormatMemorySize formats n bytes in the largest unit that holds it
// exactly: "20 kb", "1 mb", "1500 b".
func FormatMemorySize(n int64) string {
	for _, u := range []struct {
		label string
		size  int64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.label)
		}
	}
	return fmt.Sprintf("%d b", n)
}

func memoryBetween(lo, hi int64) *constraint {
	return &constraint{
		desc: fmt.Sprintf("from %s to %s", FormatMemorySize(lo), FormatMemorySize(hi)),
		ok:   func(v any) bool { n := v.(int64); return n >= lo && n <= hi },
	}
}
