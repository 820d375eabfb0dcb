package launch

import (
	"strings"
	"testing"

	"github.com/weirstream/weir/config"
)

// TestRefuseFallback: a job falls back past completed checkpoints that do
// not verify only when every sink reconciles or duplicates are allowed.
func TestRefuseFallback(t *testing.T) {
	allow := config.New()
	if err := allow.Set(config.KeyStateRecoveryAllowDuplicateOutput, "true"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		cfg          *config.Configuration
		unreconciled []string
		completed    []int64
		refused      bool
	}{
		{"a sink cannot undo", config.New(), []string{"out", "audit"}, []int64{7, 6}, true},
		{"every sink reconciles", config.New(), nil, []int64{7}, false},
		{"nothing completed", config.New(), []string{"out"}, nil, false},
		{"duplicates allowed", allow, []string{"out"}, []int64{7}, false},
	} {
		err := refuseFallback(Job{Config: c.cfg, Unreconciled: c.unreconciled}, c.completed, 5)
		if (err != nil) != c.refused {
			t.Errorf("%s: refuseFallback = %v, want refused %v", c.name, err, c.refused)
			continue
		}
		if err != nil {
			for _, want := range []string{"checkpoints 7, 6 completed", "checkpoint 5", "sink out, audit", config.KeyStateRecoveryAllowDuplicateOutput} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", c.name, err, want)
				}
			}
		}
	}
}
