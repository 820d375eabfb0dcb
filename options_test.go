package weir_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weirstream/weir/config"
)

// TestEveryOptionIsReadOrRefused walks every registered configuration key:
// either code outside the config package reads it (through its Key
// constant, or the field of the config view it fills), or every value but
// its default is refused. So no option is accepted and then ignored.
func TestEveryOptionIsReadOrRefused(t *testing.T) {
	// The key constants' names and values, from config/keys.go.
	keysSrc, err := os.ReadFile(filepath.Join("config", "keys.go"))
	if err != nil {
		t.Fatal(err)
	}
	constOf := map[string]string{} // key → constant name
	for _, m := range regexp.MustCompile(`(?m)^\s*(Key\w+)\s*=\s*"([^"]+)"`).FindAllStringSubmatch(string(keysSrc), -1) {
		constOf[m[2]] = m[1]
	}
	// The view fields the constants fill, from config/views.go.
	viewsSrc, err := os.ReadFile(filepath.Join("config", "views.go"))
	if err != nil {
		t.Fatal(err)
	}
	fieldOf := map[string]string{} // constant → view field
	for _, m := range regexp.MustCompile(`(\w+):\s+(?:\w+\()?c\.\w+\((Key\w+)\)`).FindAllStringSubmatch(string(viewsSrc), -1) {
		fieldOf[m[2]] = m[1]
	}
	// Everything outside config that is not a test.
	var src strings.Builder
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (p == "config" || strings.HasPrefix(d.Name(), ".") && p != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		src.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()
	// refused are the values tried on options nothing reads: each must be
	// an error.
	refused := map[string][]string{
		config.KeyCheckpointingCreateSubdir: {"false"},
		config.KeyAutoWatermarkInterval:     {"1 s", "0"},
		config.KeyBufferTimeout:             {"5 ms", "0", "-1"},
		config.KeySSLInternalEnabled:        {"true"},
		config.KeySSLRESTEnabled:            {"true"},
		config.KeyRocksDBWriteBufferRatio:   {"0.5", "0.25"},
		config.KeyRocksDBHighPrioPoolRatio:  {"0.1"},
		config.KeyMinSegmentSize:            {"256 b", "1 kb"},
	}
	for _, o := range config.Options() {
		name, ok := constOf[o.Key]
		if !ok {
			t.Errorf("option %s has no Key constant in config/keys.go", o.Key)
			continue
		}
		read := strings.Contains(code, "config."+name+")") || strings.Contains(code, "config."+name+",") ||
			strings.Contains(code, "config."+name+" ") || strings.Contains(code, "config."+name+"\n")
		if f, ok := fieldOf[name]; ok && regexp.MustCompile(`\.`+f+`\b`).MatchString(code) {
			read = true
		}
		values, isRefused := refused[o.Key]
		switch {
		case read && isRefused:
			t.Errorf("option %s is read outside config: take it out of the refused list, or stop reading it", o.Key)
		case !read && !isRefused:
			t.Errorf("option %s is registered but nothing outside config reads it: implement it or refuse its values", o.Key)
		}
		for _, v := range values {
			if err := config.New().Set(o.Key, v); err == nil {
				t.Errorf("option %s accepts %q, which nothing implements", o.Key, v)
			}
		}
	}
	if len(constOf) < 40 || len(fieldOf) < 30 {
		t.Fatalf("found %d key constants and %d view fields: the test no longer reads config's sources", len(constOf), len(fieldOf))
	}
}
