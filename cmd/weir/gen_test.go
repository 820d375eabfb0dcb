package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/examples/gatewaymeter"
)

// runWeir runs the command line args and returns its standard output and
// error.
func runWeir(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return weirContext(t, context.Background(), args...)
}

func weirContext(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// readDir returns every file of dir by name, with its content.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string][]byte)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

func sameFiles(t *testing.T, a, b map[string][]byte) bool {
	t.Helper()
	if len(a) != len(b) {
		return false
	}
	for name, content := range a {
		if other, ok := b[name]; !ok || !bytes.Equal(content, other) {
			return false
		}
	}
	return true
}

// noLeftovers fails if dir holds a hidden directory gen works in.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("%s left behind in %s", e.Name(), dir)
		}
	}
}

func TestGenIsDeterministic(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		cfg  func(*gatewaymeter.GenConfig)
	}{
		{"default rate", []string{"--seed", "7", "--requests", "3000", "--tenants", "20"},
			func(c *gatewaymeter.GenConfig) { c.Seed, c.Requests, c.Tenants = 7, 3000, 20 }},
		{"bad lines, 3 partitions, fast", []string{"--seed", "9", "--requests", "5000", "--partitions", "3", "--bad-rate", "0.01", "--rate", "1000"},
			func(c *gatewaymeter.GenConfig) {
				c.Seed, c.Requests, c.Partitions, c.BadRate, c.RequestsPerSecond = 9, 5000, 3, 0.01, 1000
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var runs []map[string][]byte
			for _, out := range []string{"a", "b"} {
				stdout, err := runWeir(t, append([]string{"gen", "gatewaymeter", "--out", filepath.Join(root, out)}, tc.args...)...)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "partition files + manifest.json") || !strings.Contains(stdout, "event time 2025-12-01T00:00:") {
					t.Errorf("summary is not the one line expected:\n%s", stdout)
				}
				runs = append(runs, readDir(t, filepath.Join(root, out)))
			}
			if !sameFiles(t, runs[0], runs[1]) {
				t.Fatal("two runs with the same flags wrote different files")
			}
			// The same bytes as the library's GenerateFiles.
			cfg := gatewaymeter.DefaultGenConfig()
			tc.cfg(&cfg)
			if _, err := gatewaymeter.GenerateFiles(cfg, filepath.Join(root, "lib")); err != nil {
				t.Fatal(err)
			}
			if lib := readDir(t, filepath.Join(root, "lib")); !sameFiles(t, runs[0], lib) {
				t.Fatal("weir gen and gatewaymeter.GenerateFiles wrote different files for the same config")
			}
			if len(runs[0]) != cfg.Partitions+1 {
				t.Errorf("%d files, want %d partitions and the manifest", len(runs[0]), cfg.Partitions)
			}
			noLeftovers(t, root)
		})
	}
}

func TestGenRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, out string) // prepares --out
		args  string                         // after "gen", with OUT for --out
		want  string
	}{
		{name: "unknown job", args: "foo --out OUT", want: `unknown job "foo" (known: gatewaymeter, nexmark)`},
		{name: "no job", args: "--out OUT", want: "missing job name (known: gatewaymeter, nexmark)"},
		{name: "nexmark with gatewaymeter's flag", args: "nexmark --out OUT --tenants 3", want: "--tenants is gatewaymeter's"},
		{name: "gatewaymeter with nexmark's flag", args: "gatewaymeter --out OUT --events 3", want: "--events is nexmark's"},
		{name: "nexmark events", args: "nexmark --out OUT --events 0", want: "--events must be at least 1, got 0"},
		{name: "nexmark partitions", args: "nexmark --out OUT --events 5 --partitions 6", want: "--partitions must be in [1, --events], got 6"},
		{name: "nexmark rate", args: "nexmark --out OUT --rate 0", want: "--rate must be in (0, 1000000000] events per second, got 0"},
		{name: "nexmark no out", args: "nexmark", want: "--out is required"},
		{name: "nexmark not a trace, even with --force", args: "nexmark --out OUT --events 10 --force",
			setup: func(t *testing.T, out string) { writeFile(t, filepath.Join(out, "notes.txt"), "mine") },
			want:  "holds notes.txt, which is not part of a trace"},
		{name: "no out", args: "gatewaymeter", want: "--out is required"},
		{name: "partitions", args: "gatewaymeter --out OUT --partitions 0", want: "--partitions must be in [1, 99999], got 0"},
		{name: "tenants", args: "gatewaymeter --out OUT --tenants 0", want: "--tenants must be in [1, 1000000], got 0"},
		{name: "requests", args: "gatewaymeter --out OUT --requests -5", want: "--requests must be in [0, 1000000000000], got -5"},
		{name: "bad rate", args: "gatewaymeter --out OUT --bad-rate 1.5", want: "--bad-rate must be in [0, 1], got 1.5"},
		{name: "rate", args: "gatewaymeter --out OUT --rate 0", want: "--rate must be in [0.001, 1000000] requests per second, got 0"},
		{name: "non-empty out", args: "gatewaymeter --out OUT --requests 10",
			setup: func(t *testing.T, out string) { writeFile(t, filepath.Join(out, "notes.txt"), "mine") },
			want:  "is not empty (1 entries); use --force"},
		{name: "previous trace without --force", args: "gatewaymeter --out OUT --requests 10",
			setup: func(t *testing.T, out string) { writeFile(t, filepath.Join(out, "part-00000.jsonl"), "{}\n") },
			want:  "is not empty"},
		{name: "not a trace, even with --force", args: "gatewaymeter --out OUT --requests 10 --force",
			setup: func(t *testing.T, out string) {
				writeFile(t, filepath.Join(out, "part-00000.jsonl"), "{}\n")
				writeFile(t, filepath.Join(out, "notes.txt"), "mine")
			},
			want: "holds notes.txt, which is not part of a trace: not replacing it, even with --force"},
		{name: "out is a file", args: "gatewaymeter --out OUT/f --requests 10",
			setup: func(t *testing.T, out string) { writeFile(t, filepath.Join(out, "f"), "mine") },
			want:  "exists and is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "out")
			if tc.setup != nil {
				tc.setup(t, out)
			}
			var before map[string][]byte
			if _, err := os.Stat(out); err == nil {
				before = readDir(t, out)
			}
			args := strings.Fields("gen " + strings.ReplaceAll(tc.args, "OUT", out))
			_, err := runWeir(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("weir %s: error %v, want one containing %q", strings.Join(args, " "), err, tc.want)
			}
			if before != nil && !sameFiles(t, before, readDir(t, out)) {
				t.Error("the refused --out directory was changed")
			}
			noLeftovers(t, root)
		})
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGenForceReplacesAPreviousTrace(t *testing.T) {
	root := t.TempDir()
	out, fresh := filepath.Join(root, "out"), filepath.Join(root, "fresh")
	if _, err := runWeir(t, "gen", "gatewaymeter", "--out", out, "--requests", "2000", "--partitions", "4"); err != nil {
		t.Fatal(err)
	}
	// Two partitions fewer and another seed: no file of the old trace may
	// survive.
	args := []string{"gen", "gatewaymeter", "--requests", "1000", "--partitions", "2", "--seed", "5"}
	if _, err := runWeir(t, append(args, "--out", out, "--force")...); err != nil {
		t.Fatal(err)
	}
	if _, err := runWeir(t, append(args, "--out", fresh)...); err != nil {
		t.Fatal(err)
	}
	if !sameFiles(t, readDir(t, out), readDir(t, fresh)) {
		t.Fatal("--force did not leave exactly the new trace")
	}
	noLeftovers(t, root)

	// An empty directory is taken without --force.
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := runWeir(t, append(args, "--out", empty)...); err != nil {
		t.Fatal(err)
	}
	if !sameFiles(t, readDir(t, empty), readDir(t, fresh)) {
		t.Fatal("the trace written into an empty directory differs")
	}
}

func TestGenInterruptedLeavesNothing(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := weirContext(t, ctx, "gen", "gatewaymeter", "--out", out, "--requests", "100000")
	if err == nil || !strings.Contains(err.Error(), "interrupted; nothing written to") {
		t.Fatalf("error %v, want an interruption", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out exists after an interrupted run: %v", err)
	}
	noLeftovers(t, root)
}

// cancelOnWrite cancels a context when the first progress line is drawn:
// an interruption in the middle of a run.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (w cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return len(p), nil
}

func TestGenInterruptedMidwayLeavesNothing(t *testing.T) {
	root := t.TempDir()
	o := genOptions{cfg: gatewaymeter.DefaultGenConfig(), out: filepath.Join(root, "out")}
	o.cfg.Requests = 300_000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.progress = cancelOnWrite{cancel}
	var stdout bytes.Buffer
	err := runGen(ctx, &stdout, o)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want an interruption", err)
	}
	if _, err := os.Stat(o.out); !os.IsNotExist(err) {
		t.Errorf("--out exists after an interrupted run: %v", err)
	}
	noLeftovers(t, root)
}
