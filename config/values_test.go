package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		// A bare number is milliseconds.
		{"0", 0},
		{"10000", 10 * time.Second},
		{" 250 ", 250 * time.Millisecond},
		// Short labels, with and without a space, in any case.
		{"10 s", 10 * time.Second},
		{"10s", 10 * time.Second},
		{"10S", 10 * time.Second},
		{"10000 ms", 10 * time.Second},
		{"1 min", time.Minute},
		{"1MIN", time.Minute},
		{"2 h", 2 * time.Hour},
		{"1 d", 24 * time.Hour},
		{"7 µs", 7 * time.Microsecond},
		{"9 ns", 9 * time.Nanosecond},
		// Full names, singular and plural.
		{"1 day", 24 * time.Hour},
		{"3 days", 72 * time.Hour},
		{"1 hour", time.Hour},
		{"5 hours", 5 * time.Hour},
		{"1 minute", time.Minute},
		{"90 minutes", 90 * time.Minute},
		{"1 sec", time.Second},
		{"2 secs", 2 * time.Second},
		{"1 second", time.Second},
		{"30 seconds", 30 * time.Second},
		{"30 Seconds", 30 * time.Second},
		{"1 milli", time.Millisecond},
		{"4 millis", 4 * time.Millisecond},
		{"1 millisecond", time.Millisecond},
		{"20 milliseconds", 20 * time.Millisecond},
		{"3 micro", 3 * time.Microsecond},
		{"3 micros", 3 * time.Microsecond},
		{"3 microseconds", 3 * time.Microsecond},
		{"8 nano", 8 * time.Nanosecond},
		{"8 nanoseconds", 8 * time.Nanosecond},
		// Spaces between number and unit are free.
		{"10   s", 10 * time.Second},
		{"\t10 s\n", 10 * time.Second},
		// Leading zeros are digits like any other.
		{"007 s", 7 * time.Second},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): unexpected error %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantMsg string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"s", "starts with a whole number"},
		{"-1 s", "starts with a whole number"},
		{"+1 s", "starts with a whole number"},
		{"1.5 s", "fractions are not supported"},
		{"1 m", `"m" is ambiguous`},
		{"10 sex", `unknown unit "sex"`},
		{"1h30m", `unknown unit "h30m"`},
		{"10 s 5", `unknown unit "s 5"`},
		{"1 μs", `unknown unit "μs"`}, // Greek mu, not the micro sign Flink uses
		{"99999999999999999999", "too large"},
		{"106752 d", "longer than the longest duration"},
	}
	for _, tt := range tests {
		_, err := ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q): want error containing %q, got none", tt.in, tt.wantMsg)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParseDuration(%q) error = %q, want it to contain %q", tt.in, err, tt.wantMsg)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0 ms"},
		{time.Nanosecond, "1 ns"},
		{1500 * time.Nanosecond, "1500 ns"},
		{3 * time.Microsecond, "3 µs"},
		{200 * time.Millisecond, "200 ms"},
		{1500 * time.Millisecond, "1500 ms"},
		{10 * time.Second, "10 s"},
		{90 * time.Second, "90 s"},
		{time.Minute, "1 min"},
		{10 * time.Minute, "10 min"},
		{time.Hour, "1 h"},
		{36 * time.Hour, "36 h"},
		{48 * time.Hour, "2 d"},
		{-5 * time.Second, "-5 s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{
		0, 1, 999, time.Microsecond, time.Millisecond, 1001 * time.Millisecond,
		time.Second, 61 * time.Second, time.Hour, 25 * time.Hour, math.MaxInt64,
	} {
		got, err := ParseDuration(FormatDuration(d))
		if err != nil || got != d {
			t.Errorf("ParseDuration(FormatDuration(%d)) = %d, %v", d, got, err)
		}
	}
}

func TestKindString(t *testing.T) {
	want := map[Kind]string{
		KindString: "string", KindBool: "bool", KindInt: "int",
		KindFloat: "float", KindDuration: "duration", KindEnum: "enum", Kind(99): "Kind(99)",
	}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), k.String(), s)
		}
	}
}

func TestParseMemorySize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1024", 1024},
		{"20 kb", 20 << 10},
		{"20kb", 20 << 10},
		{"20 KB", 20 << 10},
		{"20 k", 20 << 10},
		{"3 kibibytes", 3 << 10},
		{"1 mb", 1 << 20},
		{"64m", 64 << 20},
		{"2 mebibytes", 2 << 20},
		{"1 g", 1 << 30},
		{"1 gb", 1 << 30},
		{"2 tb", 2 << 40},
		{"100 b", 100},
		{"100 bytes", 100},
	}
	for _, tt := range tests {
		got, err := ParseMemorySize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMemorySize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, n := range []int64{0, 100, 1 << 10, 1500, 20 << 10, 1 << 20, 3 << 30, 5 << 40} {
		if got, err := ParseMemorySize(FormatMemorySize(n)); err != nil || got != n {
			t.Errorf("ParseMemorySize(FormatMemorySize(%d) = %q) = %d, %v", n, FormatMemorySize(n), got, err)
		}
	}
}

func TestParseMemorySizeErrors(t *testing.T) {
	tests := []struct{ in, wantMsg string }{
		{"", "empty"},
		{"kb", "starts with a whole number"},
		{"-1 kb", "starts with a whole number"},
		{"1.5 mb", "fractions are not supported"},
		{"10 kilobytes", `unknown unit "kilobytes"`},
		{"99999999999999999999", "too large"},
		{"9999999 tb", "larger than the largest"},
	}
	for _, tt := range tests {
		_, err := ParseMemorySize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParseMemorySize(%q) error %v, want one containing %q", tt.in, err, tt.wantMsg)
		}
	}
	err := New().Set(KeyCheckpointingInlineThreshold, "2 mb")
	if err == nil || !strings.Contains(err.Error(), KeyCheckpointingInlineThreshold) || !strings.Contains(err.Error(), "from 0 b to 1 mb") {
		t.Errorf("setting the inline threshold above 1 mb: %v, want an error naming the key and the range", err)
	}
	c := New()
	if err := c.Set("state.storage.fs.memory-threshold", "1 kb"); err != nil {
		t.Fatal(err)
	}
	if got := c.MemorySize(KeyCheckpointingInlineThreshold); got != 1<<10 {
		t.Errorf("the deprecated state.storage.fs.memory-threshold sets %d bytes, want 1024", got)
	}
}
