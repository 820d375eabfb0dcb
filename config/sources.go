package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadYAML reads a configuration file in Flink 2's config.yaml format. Keys may
// be flat (execution.checkpointing.interval: 10 s), nested
// (execution: {checkpointing: {interval: 10 s}}), or a mix
// (execution.checkpointing: {interval: 10 s}); nested keys are joined with
// dots. Every scalar value is taken as its text, whatever its YAML type. A key
// with no value (key: or key: ~) is an error for an option, and ignored when it
// only opens a section (execution: with everything below commented out).
//
// Every problem in the file is reported, each as a *YAMLError carrying its line
// and wrapping the *UnknownKeyError or *InvalidValueError where there is one;
// several are combined with errors.Join. A key given twice, whether flat or
// nested, is an error; a current key and its deprecated name may both be
// given, and the current key wins. An empty file yields an empty
// configuration. On error the configuration is nil.
func LoadYAML(r io.Reader) (*Configuration, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("config: reading yaml: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return New(), nil
		}
		return nil, yamlSyntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlSyntaxError(err)
		}
		return nil, &YAMLError{Line: extra.Line, Err: errors.New("a configuration file holds one YAML document, found a second")}
	}

	l := &yamlLoader{cfg: New(), seen: make(map[string]int)}
	if len(doc.Content) > 0 {
		root := resolveAlias(doc.Content[0])
		switch {
		case root.Kind == yaml.MappingNode:
			l.walk(root, "")
		case root.Kind == yaml.ScalarNode && root.Tag == "!!null":
			// A document that is only comments.
		default:
			l.fail(root.Line, errors.New("the top level must be a mapping of keys to values"))
		}
	}
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	return l.cfg, nil
}

// yamlLineRE matches the position prefix of yaml.v3's syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

func yamlSyntaxError(err error) *YAMLError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &YAMLError{Line: line, Err: errors.New(msg[len(m[0]):])}
	}
	return &YAMLError{Err: err}
}

type yamlLoader struct {
	cfg  *Configuration
	seen map[string]int // flattened key → line it was first given on
	errs []error
}

func (l *yamlLoader) fail(line int, err error) {
	l.errs = append(l.errs, &YAMLError{Line: line, Err: err})
}

// walk flattens the mapping m, whose keys are below prefix, into l.cfg.
func (l *yamlLoader) walk(m *yaml.Node, prefix string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolveAlias(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.fail(k.Line, errors.New("a key must be a plain string"))
			continue
		}
		if k.Tag == "!!merge" && v.Kind == yaml.MappingNode {
			l.walk(v, prefix) // <<: *anchor
			continue
		}
		key := k.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		switch v.Kind {
		case yaml.MappingNode:
			l.walk(v, key)
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				l.setNull(key, k.Line)
				continue
			}
			if first, dup := l.seen[key]; dup {
				l.fail(k.Line, fmt.Errorf("%s: %w, first on line %d", key, errDuplicateKey, first))
				continue
			}
			l.seen[key] = k.Line
			if err := l.cfg.Set(key, v.Value); err != nil {
				line := k.Line
				if _, isValue := err.(*InvalidValueError); isValue {
					line = v.Line
				}
				l.fail(line, err)
			}
		default:
			o, _, known := registry.lookup(key)
			if !known {
				l.fail(k.Line, &UnknownKeyError{Key: key, Suggestions: suggest(key)})
				continue
			}
			l.fail(v.Line, o.invalid("<"+nodeKindName(v.Kind)+">", fmt.Errorf("a YAML %s is not a single value", nodeKindName(v.Kind))))
		}
	}
}

// setNull handles a key without a value.
func (l *yamlLoader) setNull(key string, line int) {
	if o, _, known := registry.lookup(key); known {
		l.fail(line, o.invalid("", errors.New("no value")))
		return
	}
	for _, o := range registry.sorted {
		if strings.HasPrefix(o.key, key+".") {
			return // an empty section
		}
	}
	for a := range registry.byAlias {
		if strings.HasPrefix(a, key+".") {
			return
		}
	}
	l.fail(line, &UnknownKeyError{Key: key, Suggestions: suggest(key)})
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func nodeKindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.DocumentNode:
		return "document"
	}
	return "node"
}

// ParseDynamic parses dynamic properties, each "key=value" as given to
// repeated -D flags (-D execution.checkpointing.interval=10s). The key and
// value are trimmed of spaces; the value may itself contain "=". A later
// property for the same key replaces an earlier one.
//
// An argument without "=" or with an empty key is a *MalformedPairError;
// unknown keys and invalid values are reported as by Set. Every problem is
// reported, combined with errors.Join; on error the configuration is nil.
func ParseDynamic(args []string) (*Configuration, error) {
	cfg := New()
	var errs []error
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			errs = append(errs, &MalformedPairError{Arg: a})
			continue
		}
		if err := cfg.Set(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}
