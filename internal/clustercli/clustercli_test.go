package clustercli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigReportsEveryProblem: a bad file and bad -D pairs are reported
// together, each naming its key.
func TestConfigReportsEveryProblem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(file, []byte("execution.checkpointing.intervall: 1 s\nparallelism.default: many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := ConfigFlags{File: file, Dynamic: []string{"restart-strategy.type=sometimes", "nonsense"}}
	_, err := f.Config()
	if err == nil {
		t.Fatal("a configuration with four problems was accepted")
	}
	for _, want := range []string{"execution.checkpointing.intervall", "parallelism.default", "restart-strategy.type", "nonsense"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s:\n%v", want, err)
		}
	}
}

// TestWarnDeprecated logs each deprecated key with the key replacing it.
func TestWarnDeprecated(t *testing.T) {
	f := ConfigFlags{Dynamic: []string{"state.checkpoints.dir=/tmp/x"}}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	WarnDeprecated(slog.New(slog.NewTextHandler(&b, nil)), cfg)
	if !strings.Contains(b.String(), "key=state.checkpoints.dir") || !strings.Contains(b.String(), "replacement=execution.checkpointing.dir") {
		t.Fatalf("the warning does not name the deprecated key and its replacement:\n%s", b.String())
	}
}
