package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoShowsExactlyOnceAndAtLeastOnce(t *testing.T) {
	for _, seed := range []string{"1", "7", "42"} {
		var out bytes.Buffer
		cmd := newRootCmd()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"demo", "--seed", seed})
		if err := cmd.Execute(); err != nil {
			t.Fatalf("seed %s: %v", seed, err)
		}
		text := out.String()
		eo, alo, ok := strings.Cut(text, "AT_LEAST_ONCE")
		if !ok {
			t.Fatalf("seed %s: no AT_LEAST_ONCE section:\n%s", seed, text)
		}
		if !strings.Contains(eo, "matches the oracle") || strings.Contains(eo, "records after the cut got in") {
			t.Errorf("seed %s: exactly-once section is not exact:\n%s", seed, eo)
		}
		if strings.Count(eo, "task failed; restored checkpoint") != 2 {
			t.Errorf("seed %s: want two recoveries in the exactly-once run:\n%s", seed, eo)
		}
		if !strings.Contains(alo, "differs from the oracle") {
			t.Errorf("seed %s: at-least-once run should overcount with the default failures:\n%s", seed, alo)
		}
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--every 0", "--every"},
		{"--sources 0", "--sources"},
		{"--keys 30", "--keys"},
		{"--fail-at 0", "--fail-at"},
	} {
		cmd := newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"demo"}, strings.Fields(tc.args)...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("demo %s: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}
