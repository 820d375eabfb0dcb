package clustercli

import (
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/config"
)

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
