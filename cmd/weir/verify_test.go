package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/examples/gatewaymeter"
)

// tenantKey is how a report names a tenant-cost or alert key.
func tenantKey(tenant string, windowEnd int64) string {
	return fmt.Sprintf("tenant_id=%s window_end=%d", tenant, windowEnd)
}

func TestVerify(t *testing.T) {
	root := t.TempDir()
	trace := filepath.Join(root, "trace")
	if _, err := runWeir(t, "gen", "gatewaymeter", "--out", trace, "--seed", "3", "--requests", "4000", "--tenants", "12", "--bad-rate", "0.005"); err != nil {
		t.Fatal(err)
	}
	oracle, err := gatewaymeter.OracleFiles(trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(oracle.TenantCost) < 3 || len(oracle.DeadLetters) == 0 || len(oracle.Orphans) == 0 {
		t.Fatalf("the trace is too small to test on: %d tenant-cost records, %d dead letters, %d orphans",
			len(oracle.TenantCost), len(oracle.DeadLetters), len(oracle.Orphans))
	}
	tc0, tc1, tc2 := oracle.TenantCost[0], oracle.TenantCost[1], oracle.TenantCost[2]
	dl := oracle.DeadLetters[0]
	dlKey := fmt.Sprintf("partition=%d offset=%d", dl.Partition, dl.Offset)

	for _, tc := range []struct {
		name   string
		change func(o *gatewaymeter.Outputs)
		flags  []string
		// wantErr is the error's text; "" for success.
		wantErr string
		// want are texts the standard output must contain.
		want []string
	}{
		{
			name:  "exact",
			want:  []string{"verify: OK, all 5 outputs match", "verify: exact match:"},
			flags: nil,
		},
		{
			name:    "one tenant-cost record removed",
			change:  func(o *gatewaymeter.Outputs) { o.TenantCost = o.TenantCost[1:] },
			wantErr: "verify: 1 difference in tenant-cost, 0 in model-latency, 0 in alerts, 0 in orphans, 0 in dead-letters",
			want:    []string{"tenant-cost: 1 missing:", tenantKey(tc0.TenantID, tc0.WindowEnd), "actual   (none)"},
		},
		{
			name:    "one tenant-cost record changed",
			change:  func(o *gatewaymeter.Outputs) { o.TenantCost[1].CostMicros++ },
			wantErr: "verify: 1 difference in tenant-cost, 0 in model-latency",
			want: []string{"tenant-cost: 1 different:", tenantKey(tc1.TenantID, tc1.WindowEnd),
				fmt.Sprintf(`"cost_micros":%d`, tc1.CostMicros+1)},
		},
		{
			name:    "one tenant-cost record duplicated",
			change:  func(o *gatewaymeter.Outputs) { o.TenantCost = append(o.TenantCost, o.TenantCost[2]) },
			wantErr: "verify: 1 difference in tenant-cost, 0 in model-latency",
			want:    []string{"tenant-cost: 1 duplicated:", tenantKey(tc2.TenantID, tc2.WindowEnd)},
		},
		{
			name: "equal duplicates, at least once",
			change: func(o *gatewaymeter.Outputs) {
				o.TenantCost = append(o.TenantCost, o.TenantCost[2], o.TenantCost[2], o.TenantCost[0])
			},
			flags: []string{"--at-least-once"},
			want:  []string{"tenant-cost: 2 duplicated:", "verify: at-least-once match:", "2 keys duplicated (3 extra copies)"},
		},
		{
			name: "unequal duplicate, at least once",
			change: func(o *gatewaymeter.Outputs) {
				c := o.TenantCost[2]
				c.Requests++
				o.TenantCost = append(o.TenantCost, c, o.TenantCost[0])
			},
			flags:   []string{"--at-least-once"},
			wantErr: "verify: 1 difference in tenant-cost, 0 in model-latency, 0 in alerts, 0 in orphans, 0 in dead-letters (not counting 1 keys duplicated with equal copies, 1 extra copies)",
			want:    []string{"tenant-cost: 1 different:", tenantKey(tc2.TenantID, tc2.WindowEnd)},
		},
		{
			name: "one removed, one changed, one duplicated",
			change: func(o *gatewaymeter.Outputs) {
				o.TenantCost = append(o.TenantCost[1:], o.TenantCost[2])
				o.TenantCost[0].Requests++
			},
			wantErr: "verify: 3 differences in tenant-cost,",
			want:    []string{"tenant-cost: 1 missing:", "tenant-cost: 1 different:", "tenant-cost: 1 duplicated:"},
		},
		{
			name:    "a dead letter and an orphan lost, --max 0",
			change:  func(o *gatewaymeter.Outputs) { o.DeadLetters, o.Orphans = o.DeadLetters[1:], o.Orphans[1:] },
			flags:   []string{"--max", "0"},
			wantErr: "verify: 0 differences in tenant-cost, 0 in model-latency, 0 in alerts, 1 in orphans, 1 in dead-letters",
			want:    []string{"dead-letters: 1 missing (first 0):", "orphans: 1 missing (first 0):"},
		},
		{
			name:    "a dead letter lost, listed",
			change:  func(o *gatewaymeter.Outputs) { o.DeadLetters = o.DeadLetters[1:] },
			wantErr: "1 in dead-letters",
			want:    []string{"dead-letters: 1 missing:", dlKey},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			o := cloneOutputs(oracle)
			if tc.change != nil {
				tc.change(&o)
			}
			if err := gatewaymeter.WriteOutputs(out, o); err != nil {
				t.Fatal(err)
			}
			stdout, err := runWeir(t, append([]string{"verify", "gatewaymeter", "--input", trace, "--output", out}, tc.flags...)...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("verify failed: %v\n%s", err, stdout)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("verify passed, want %q\n%s", tc.wantErr, stdout)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want %q", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func cloneOutputs(o gatewaymeter.Outputs) gatewaymeter.Outputs {
	return gatewaymeter.Outputs{
		TenantCost:   append([]gatewaymeter.TenantCostMinute(nil), o.TenantCost...),
		ModelLatency: append([]gatewaymeter.ModelLatencyMinute(nil), o.ModelLatency...),
		Alerts:       append([]gatewaymeter.Alert(nil), o.Alerts...),
		Orphans:      append([]gatewaymeter.Orphan(nil), o.Orphans...),
		DeadLetters:  append([]gatewaymeter.DeadLetter(nil), o.DeadLetters...),
	}
}

func TestVerifyRejects(t *testing.T) {
	root := t.TempDir()
	trace, empty := filepath.Join(root, "trace"), filepath.Join(root, "empty")
	if _, err := runWeir(t, "gen", "gatewaymeter", "--out", trace, "--requests", "100"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(root, "damaged")
	if _, err := runWeir(t, "gen", "gatewaymeter", "--out", damaged, "--requests", "100"); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(damaged, "part-00003.jsonl"), 10); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "missing")
	for _, tc := range []struct {
		args string
		want string
	}{
		{"foo --input TRACE --output EMPTY", `unknown job "foo" (known: gatewaymeter)`},
		{"gatewaymeter --output EMPTY", "--input is required"},
		{"gatewaymeter --input TRACE", "--output is required"},
		{"gatewaymeter --input MISSING --output EMPTY", "--input " + missing + ": no such directory"},
		{"gatewaymeter --input TRACE --output MISSING", "--output " + missing + ": no such directory"},
		{"gatewaymeter --input TRACE/manifest.json --output EMPTY", "manifest.json: not a directory"},
		{"gatewaymeter --input TRACE --output EMPTY --max -1", "--max must be at least 0, got -1"},
		{"gatewaymeter --input EMPTY --output EMPTY", "no trace files"},
		{"gatewaymeter --input DAMAGED --output EMPTY", "part-00003.jsonl has 10 bytes, the manifest says"},
	} {
		r := strings.NewReplacer("TRACE", trace, "EMPTY", empty, "MISSING", missing, "DAMAGED", damaged)
		args := strings.Fields("verify " + r.Replace(tc.args))
		_, err := runWeir(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weir %s: error %v, want one containing %q", strings.Join(args, " "), err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("weir %s: error of several lines: %q", strings.Join(args, " "), err)
		}
	}

	// An output directory with none of the outputs is most likely the
	// wrong directory: it says so, and everything is missing.
	stdout, err := runWeir(t, "verify", "gatewaymeter", "--input", trace, "--output", empty)
	if err == nil || !strings.Contains(stdout, "has none of the output directories") {
		t.Errorf("error %v, output:\n%s", err, stdout)
	}
}
