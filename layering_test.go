package weir_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestForbiddenImports keeps the layers apart: each rule names packages
// (a path, or a path and everything below it with "/...") that must not
// depend, directly or through others, on another set of packages.
func TestForbiddenImports(t *testing.T) {
	const mod = "github.com/weirstream/weir/"
	rules := []struct {
		from, to []string
		why      string
	}{
		{[]string{"state/..."}, []string{"internal/runtime/...", "internal/cluster/...", "stream/..."},
			"state is a library the runtime uses, not the other way round"},
		{[]string{"mini/..."}, []string{"internal/runtime/...", "state/...", "stream/..."},
			"mini is the independent reference the engine is checked against"},
		{[]string{"connector/..."}, []string{"internal/cluster/...", "internal/runtime/...", "stream/..."},
			"connectors implement contracts; they do not know who drives them"},
		{[]string{"internal/checkpoint/coordinator/...", "internal/netio/..."}, []string{"internal/runtime/...", "stream/..."},
			"the coordinator and the data plane are protocols the runtime uses"},
		{[]string{"internal/runtime/..."}, []string{"stream/...", "internal/cluster/..."},
			"the runtime runs graphs; it knows neither the job API nor the cluster"},
		{[]string{"config/...", "codec/..."}, []string{"internal/...", "stream/...", "state/..."},
			"configuration and codecs are leaves"},
	}
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Deps       []string
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the test is not looking at the module", len(pkgs))
	}
	match := func(path string, pats []string) bool {
		rel, ok := strings.CutPrefix(path, mod)
		if !ok {
			return false
		}
		for _, p := range pats {
			if base, tree := strings.CutSuffix(p, "/..."); tree {
				if rel == base || strings.HasPrefix(rel, base+"/") {
					return true
				}
			} else if rel == p {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, r := range rules {
		for _, p := range pkgs {
			if !match(p.ImportPath, r.from) {
				continue
			}
			checked++
			for _, d := range p.Deps {
				if match(d, r.to) {
					t.Errorf("%s depends on %s: %s", p.ImportPath, d, r.why)
				}
			}
		}
	}
	if checked < len(rules) {
		t.Fatalf("the rules matched %d packages, fewer than there are rules: a rule names a package that does not exist", checked)
	}
}
