package config

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Configuration holds the values set for registered options; an unset option
// reads as its default. Values are validated when they are set and stored in
// canonical form under the option's current key.
//
// The zero value is an empty configuration ready to use. See the package
// documentation for precedence and concurrency.
type Configuration struct {
	values       map[string]entry
	deprecations []Deprecation
}

// entry is one set value.
type entry struct {
	value  string // canonical form
	parsed any    // string, bool, int, float64 or time.Duration
	alias  string // the deprecated key it was set under, or ""
}

// Deprecation records that a value was given under a deprecated key.
type Deprecation struct {
	// Key is the deprecated key as given.
	Key string
	// Replacement is the current key the value is stored under.
	Replacement string
	// Ignored reports that the value given under Key was not used because
	// another value for Replacement took its place: the current key was set
	// in the same source (as in Flink, it wins whatever the order), or a
	// later value or source replaced it.
	Ignored bool
}

// String returns a sentence suitable for a log line.
func (d Deprecation) String() string {
	s := fmt.Sprintf("configuration key %s is deprecated; use %s", d.Key, d.Replacement)
	if d.Ignored {
		s += fmt.Sprintf(" (its value was ignored because %s is also set)", d.Replacement)
	}
	return s
}

// LogValue lets log/slog print a Deprecation as a group of its fields.
func (d Deprecation) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key", d.Key),
		slog.String("replacement", d.Replacement),
		slog.Bool("ignored", d.Ignored),
	)
}

// New returns an empty configuration, in which every option has its default.
func New() *Configuration { return &Configuration{} }

// Set validates value for key and stores it. key may be a deprecated Flink key:
// the value is then stored under the current key and a Deprecation recorded,
// unless the current key itself has already been set in this configuration,
// which then keeps its value.
//
// Set returns an *UnknownKeyError for a key that is not registered, with the
// closest known keys as suggestions, and an *InvalidValueError for a value the
// key does not accept. The configuration is unchanged on error.
func (c *Configuration) Set(key, value string) error {
	o, alias, ok := registry.lookup(key)
	if !ok {
		return &UnknownKeyError{Key: key, Suggestions: suggest(key)}
	}
	canon, parsed, err := o.parse(value)
	if err != nil {
		return o.invalid(value, err)
	}
	e := entry{value: canon, parsed: parsed}
	if alias {
		e.alias = key
	}
	c.store(o.key, e)
	return nil
}

// invalid builds the InvalidValueError for value and the cause err.
func (o *option) invalid(value string, err error) *InvalidValueError {
	if errors.Is(err, errNotAllowed) {
		err = nil
	}
	if o.sensitive {
		value = "<redacted>"
	}
	return &InvalidValueError{Key: o.key, Value: value, Allowed: o.allowed(), Err: err}
}

// store puts e under key, applying the rule that within one configuration a
// value set under the current key wins over one set under a deprecated key.
func (c *Configuration) store(key string, e entry) {
	if c.values == nil {
		c.values = make(map[string]entry)
	}
	old, had := c.values[key]
	if e.alias != "" {
		if had && old.alias == "" {
			c.deprecate(Deprecation{Key: e.alias, Replacement: key, Ignored: true})
			return
		}
		c.deprecate(Deprecation{Key: e.alias, Replacement: key})
	}
	if had && old.alias != "" && old.alias != e.alias {
		c.deprecate(Deprecation{Key: old.alias, Replacement: key, Ignored: true})
	}
	c.values[key] = e
}

// deprecate records d, replacing an earlier record for the same key.
func (c *Configuration) deprecate(d Deprecation) {
	for i := range c.deprecations {
		if c.deprecations[i].Key == d.Key {
			c.deprecations[i] = d
			return
		}
	}
	c.deprecations = append(c.deprecations, d)
}

// SetDuration sets a duration option from Go code. It returns an
// *UnknownKeyError for an unknown key, a *KindError if key is not a duration
// option and an *InvalidValueError for a negative or out-of-range d.
func (c *Configuration) SetDuration(key string, d time.Duration) error {
	if err := checkKind(key, KindDuration); err != nil {
		return err
	}
	if d < 0 {
		o, _, _ := registry.lookup(key)
		return o.invalid(d.String(), errors.New("negative duration"))
	}
	return c.Set(key, FormatDuration(d))
}

// SetInt sets an integer option from Go code. It returns an *UnknownKeyError
// for an unknown key, a *KindError if key is not an integer option and an
// *InvalidValueError for an n out of range.
func (c *Configuration) SetInt(key string, n int) error {
	if err := checkKind(key, KindInt); err != nil {
		return err
	}
	return c.Set(key, strconv.Itoa(n))
}

// SetFloat sets a float option from Go code. It returns an *UnknownKeyError
// for an unknown key, a *KindError if key is not a float option and an
// *InvalidValueError for an f out of range.
func (c *Configuration) SetFloat(key string, f float64) error {
	if err := checkKind(key, KindFloat); err != nil {
		return err
	}
	return c.Set(key, strconv.FormatFloat(f, 'g', -1, 64))
}

// SetBool sets a boolean option from Go code. It returns an *UnknownKeyError
// for an unknown key and a *KindError if key is not a boolean option.
func (c *Configuration) SetBool(key string, b bool) error {
	if err := checkKind(key, KindBool); err != nil {
		return err
	}
	return c.Set(key, strconv.FormatBool(b))
}

func checkKind(key string, want Kind) error {
	o, _, ok := registry.lookup(key)
	if !ok {
		return &UnknownKeyError{Key: key, Suggestions: suggest(key)}
	}
	if o.kind != want {
		return &KindError{Key: o.key, Kind: o.kind, Want: want}
	}
	return nil
}

// Get returns the value set for key in canonical form and true, or "" and
// false when key is unset or unknown. key may be a deprecated key. Defaults
// are not reported; use String for the effective value.
func (c *Configuration) Get(key string) (string, bool) {
	o, _, ok := registry.lookup(key)
	if !ok {
		return "", false
	}
	e, ok := c.values[o.key]
	return e.value, ok
}

// String returns the effective value of key in canonical form: the value set,
// else the default, else "". key may be a deprecated key. String panics if key
// is not registered, as keys in Go code are constants and an unknown one is a
// programming error.
func (c *Configuration) String(key string) string {
	o := registry.mustLookup(key)
	if e, ok := c.values[o.key]; ok {
		return e.value
	}
	return o.def
}

// Duration returns the effective value of a duration option; 0 if it is unset
// and has no default. It panics if key is not a registered duration option.
func (c *Configuration) Duration(key string) time.Duration {
	v, _ := c.typed(key, KindDuration).(time.Duration)
	return v
}

// MemorySize returns the effective value of a memory-size option, in
// bytes; 0 if it is unset and has no default. It panics if key is not a
// registered memory-size option.
func (c *Configuration) MemorySize(key string) int64 {
	v, _ := c.typed(key, KindMemory).(int64)
	return v
}

// Int returns the effective value of an integer option; 0 if it is unset and
// has no default. It panics if key is not a registered integer option.
func (c *Configuration) Int(key string) int {
	v, _ := c.typed(key, KindInt).(int)
	return v
}

// Float returns the effective value of a float option; 0 if it is unset and
// has no default. It panics if key is not a registered float option.
func (c *Configuration) Float(key string) float64 {
	v, _ := c.typed(key, KindFloat).(float64)
	return v
}

// Bool returns the effective value of a boolean option; false if it is unset
// and has no default. It panics if key is not a registered boolean option.
func (c *Configuration) Bool(key string) bool {
	v, _ := c.typed(key, KindBool).(bool)
	return v
}

// typed returns the parsed effective value of key, or nil when it is unset
// without a default.
func (c *Configuration) typed(key string, want Kind) any {
	o := registry.mustLookup(key)
	if o.kind != want {
		panic((&KindError{Key: o.key, Kind: o.kind, Want: want}).Error())
	}
	if e, ok := c.values[o.key]; ok {
		return e.parsed
	}
	if o.def == "" {
		return nil
	}
	_, v, err := o.parse(o.def)
	if err != nil {
		panic(err) // newRegistry has checked every default
	}
	return v
}

// Keys returns the keys that have a value set, sorted. Keys set under a
// deprecated name are reported under their current name.
func (c *Configuration) Keys() []string {
	return slices.Sorted(maps.Keys(c.values))
}

// Deprecations returns a record for every deprecated key a value was given
// under, in the order first seen, so that the caller can log them.
func (c *Configuration) Deprecations() []Deprecation {
	return slices.Clone(c.deprecations)
}

// Clone returns an independent copy of c.
func (c *Configuration) Clone() *Configuration {
	return &Configuration{
		values:       maps.Clone(c.values),
		deprecations: slices.Clone(c.deprecations),
	}
}

// Merge copies every value set in other into c, replacing values c already
// has: other is the source of higher precedence. Deprecation records are
// carried over. A nil other changes nothing.
func (c *Configuration) Merge(other *Configuration) {
	if other == nil {
		return
	}
	if c.values == nil && len(other.values) > 0 {
		c.values = make(map[string]entry, len(other.values))
	}
	for _, k := range slices.Sorted(maps.Keys(other.values)) {
		e := other.values[k]
		if old, had := c.values[k]; had && old.alias != "" && old.alias != e.alias {
			c.deprecate(Deprecation{Key: old.alias, Replacement: k, Ignored: true})
		}
		c.values[k] = e
	}
	for _, d := range other.deprecations {
		c.deprecate(d)
	}
}
