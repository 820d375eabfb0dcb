package weir_test

import (
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
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
		{[]string{"internal/launch/...", "internal/cluster/...", "internal/web/..."}, []string{"stream/..."},
			"stream describes jobs and links itself to launch; what launches and serves them does not import it"},
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

// TestStreamAPIHidesInternals keeps weir's internal packages out of the
// job API: no exported identifier of package stream (function, method,
// type, field, variable, constant or alias, promoted methods included)
// may mention a type of a package under internal/. It reads the types
// from the compiler's export data of stream, as go list -export builds it.
func TestStreamAPIHidesInternals(t *testing.T) {
	const mod = "github.com/weirstream/weir/"
	const target = mod + "stream"
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./stream").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	if exports[target] == "" {
		t.Fatalf("go list gave no export data for %s", target)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	pkg, err := imp.Import(target)
	if err != nil {
		t.Fatalf("importing %s: %v", target, err)
	}
	internal := func(p *types.Package) bool {
		return p != nil && (strings.HasPrefix(p.Path(), mod+"internal/") || p.Path() == mod+"internal")
	}
	// mentions returns the internal types t mentions: directly, or inside
	// an unexported type of stream that it exposes.
	var mentions func(t types.Type, seen map[types.Type]bool) []string
	mentions = func(t types.Type, seen map[types.Type]bool) []string {
		if t == nil || seen[t] {
			return nil
		}
		seen[t] = true
		var found []string
		add := func(ts ...types.Type) {
			for _, x := range ts {
				found = append(found, mentions(x, seen)...)
			}
		}
		switch t := t.(type) {
		case *types.Alias:
			if internal(t.Obj().Pkg()) {
				return []string{t.String()}
			}
			add(types.Unalias(t))
		case *types.Named:
			if internal(t.Obj().Pkg()) {
				return []string{t.String()}
			}
			for a := range t.TypeArgs().Types() {
				add(a)
			}
			if t.Obj().Pkg() == pkg && !t.Obj().Exported() {
				add(t.Underlying())
			}
		case *types.Pointer:
			add(t.Elem())
		case *types.Slice:
			add(t.Elem())
		case *types.Array:
			add(t.Elem())
		case *types.Chan:
			add(t.Elem())
		case *types.Map:
			add(t.Key(), t.Elem())
		case *types.Signature:
			for v := range t.Params().Variables() {
				add(v.Type())
			}
			for v := range t.Results().Variables() {
				add(v.Type())
			}
		case *types.Tuple:
			for v := range t.Variables() {
				add(v.Type())
			}
		case *types.Struct:
			for f := range t.Fields() {
				if f.Exported() || f.Embedded() {
					add(f.Type())
				}
			}
		case *types.Interface:
			for m := range t.Methods() {
				if m.Exported() {
					add(m.Type())
				}
			}
			for e := range t.EmbeddedTypes() {
				add(e)
			}
		case *types.TypeParam:
			add(t.Constraint())
		case *types.Union:
			for i := range t.Len() {
				add(t.Term(i).Type())
			}
		}
		return found
	}
	check := func(name string, typ types.Type) {
		t.Helper()
		if m := mentions(typ, map[types.Type]bool{}); len(m) > 0 {
			t.Errorf("stream.%s mentions %s: the job API must not expose weir's internal types", name, strings.Join(m, ", "))
		}
	}
	checked := 0
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		checked++
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			if named, ok := tn.Type().(*types.Named); ok {
				check(name, named.Underlying())
				if tp := named.TypeParams(); tp != nil {
					for p := range tp.TypeParams() {
						check(name+"["+p.Obj().Name()+"]", p.Constraint())
					}
				}
				ms := types.NewMethodSet(types.NewPointer(named))
				for sel := range ms.Methods() {
					if sel.Obj().Exported() {
						check(name+"."+sel.Obj().Name(), sel.Type())
					}
				}
				continue
			}
		}
		check(name, obj.Type())
	}
	if checked < 20 {
		t.Fatalf("found %d exported identifiers in %s: the test is not reading its API", checked, target)
	}
}
