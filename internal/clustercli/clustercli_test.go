package clustercli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/config"
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

// TestConfigFromEnvironment: the tokens come from the environment unless
// --config or -D set them, and an empty variable counts as unset.
func TestConfigFromEnvironment(t *testing.T) {
	env := map[string]string{EnvClusterAuthToken: "from-env", EnvRESTAuthToken: ""}
	f := ConfigFlags{Getenv: func(k string) string { return env[k] }}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.String(config.KeyClusterAuthToken); got != "from-env" {
		t.Errorf("%s = %q, want the environment's", config.KeyClusterAuthToken, got)
	}
	if _, set := cfg.Get(config.KeyRESTAuthToken); set {
		t.Errorf("an empty %s set %s", EnvRESTAuthToken, config.KeyRESTAuthToken)
	}
	f.Dynamic = []string{config.KeyClusterAuthToken + "=from-flag"}
	if cfg, err = f.Config(); err != nil || cfg.String(config.KeyClusterAuthToken) != "from-flag" {
		t.Errorf("-D over the environment: %q, %v", cfg.String(config.KeyClusterAuthToken), err)
	}
}

// TestPairsLeaveOutSecrets: a submission's configuration carries no token.
func TestPairsLeaveOutSecrets(t *testing.T) {
	cfg, err := config.ParseDynamic([]string{"parallelism.default=3", config.KeyClusterAuthToken + "=c-secret", config.KeyRESTAuthToken + "=r-secret"})
	if err != nil {
		t.Fatal(err)
	}
	got := Pairs(cfg)
	if !slices.Equal(got, []string{"parallelism.default=3"}) || strings.Contains(strings.Join(got, " "), "secret") {
		t.Errorf("Pairs = %q, want only parallelism.default=3", got)
	}
}
