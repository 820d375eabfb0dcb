package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationSyntax describes Flink's duration syntax in error messages and
// option listings.
const durationSyntax = `a duration such as "10 s", "500 ms" or "1 min" ` +
	`(a whole number and a unit: d, h, min, s, ms, µs, ns, or a full name such as "seconds"; ` +
	`a bare number is milliseconds)`

// durationUnits maps every unit label Flink's TimeUtils accepts to its length.
// Labels are matched after lower-casing.
var durationUnits = map[string]time.Duration{
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond,
	"nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
}

// formatUnits are the units FormatDuration chooses from, largest first, with
// the label Flink prints for each.
var formatUnits = []struct {
	d     time.Duration
	label string
}{
	{24 * time.Hour, "d"},
	{time.Hour, "h"},
	{time.Minute, "min"},
	{time.Second, "s"},
	{time.Millisecond, "ms"},
	{time.Microsecond, "µs"},
	{time.Nanosecond, "ns"},
}

// ParseDuration parses a duration the way Flink's TimeUtils.parseDuration
// does: a whole number, optional spaces, and an optional unit label, ignoring
// case and surrounding spaces. The labels are d, day(s); h, hour(s); min,
// minute(s); s, sec(s), second(s); ms, milli(s), millisecond(s); µs, micro(s),
// microsecond(s); ns, nano(s), nanosecond(s). Without a unit the number is
// milliseconds. Fractions, signs and compound forms such as "1h30m" are
// rejected, as are durations beyond what time.Duration holds (about 292
// years).
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty duration")
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errors.New("a duration starts with a whole number")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("number %s is too large", t[:i])
	}
	label := strings.ToLower(strings.TrimSpace(t[i:]))
	unit := time.Millisecond
	if label != "" {
		u, ok := durationUnits[label]
		if !ok {
			return 0, unitError(label)
		}
		unit = u
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("%s is longer than the longest duration, %s", t, FormatDuration(math.MaxInt64))
	}
	return time.Duration(n) * unit, nil
}

func unitError(label string) error {
	switch {
	case strings.HasPrefix(label, "."):
		return errors.New("fractions are not supported; use a smaller unit, such as 1500 ms for 1.5 s")
	case label == "m":
		return errors.New(`unit "m" is ambiguous; use "min" for minutes or "ms" for milliseconds`)
	}
	return fmt.Errorf("unknown unit %q", label)
}

// FormatDuration formats d as Flink's TimeUtils.formatWithHighestUnit does:
// in the largest unit that represents it exactly, as "<n> <unit>" with the
// short labels d, h, min, s, ms, µs and ns. Zero is "0 ms". The result parses
// back to d with ParseDuration whenever d is not negative.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0 ms"
	}
	for _, u := range formatUnits {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + " " + u.label
		}
	}
	panic("unreachable: every duration is a whole number of nanoseconds")
}

// parse checks value against the option's kind and constraint. It returns
// the value in canonical form and parsed as the kind's Go type (string, bool,
// int, float64 or time.Duration). The error, if any, says what is wrong with
// the value; the caller adds the key and what is allowed.
func (o *option) parse(value string) (canon string, parsed any, err error) {
	t := strings.TrimSpace(value)
	switch o.kind {
	case KindString:
		if t == "" {
			return "", nil, errors.New("empty value")
		}
		canon, parsed = t, t
	case KindBool:
		switch {
		case strings.EqualFold(t, "true"):
			canon, parsed = "true", true
		case strings.EqualFold(t, "false"):
			canon, parsed = "false", false
		default:
			return "", nil, errNotAllowed
		}
	case KindInt:
		n, err := strconv.ParseInt(t, 10, 32)
		if err != nil {
			return "", nil, numError(err)
		}
		canon, parsed = strconv.FormatInt(n, 10), int(n)
	case KindFloat:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return "", nil, numError(err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return "", nil, errors.New("not a finite number")
		}
		canon, parsed = strconv.FormatFloat(f, 'g', -1, 64), f
	case KindDuration:
		d, err := ParseDuration(t)
		if err != nil {
			return "", nil, err
		}
		canon, parsed = FormatDuration(d), d
	case KindMemory:
		n, err := ParseMemorySize(t)
		if err != nil {
			return "", nil, err
		}
		canon, parsed = FormatMemorySize(n), n
	case KindEnum:
		v, err := o.matchEnum(t)
		if err != nil {
			return "", nil, err
		}
		canon, parsed = v, v
	default:
		panic(fmt.Sprintf("config: option %s has unknown kind %v", o.key, o.kind))
	}
	if o.check != nil && !o.check.ok(parsed) {
		if o.check.why != "" {
			return "", nil, errors.New(o.check.why)
		}
		return "", nil, errNotAllowed
	}
	return canon, parsed, nil
}

// errNotAllowed marks a value that is well-formed but outside what the option
// allows; the InvalidValueError's Allowed text says the rest.
var errNotAllowed = errors.New("value not allowed")

func numError(err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return errors.New("number out of range")
	}
	return errors.New("not a number")
}

func (o *option) matchEnum(t string) (string, error) {
	for _, v := range o.values {
		if strings.EqualFold(t, v.name) {
			return v.name, nil
		}
		for _, a := range v.aliases {
			if strings.EqualFold(t, a) {
				return v.name, nil
			}
		}
	}
	for _, u := range o.unsupported {
		if strings.EqualFold(t, u) {
			return "", fmt.Errorf("%s is a Flink value that weir does not implement", u)
		}
	}
	return "", errNotAllowed
}

// allowed describes in words the values the option accepts.
func (o *option) allowed() string {
	var s string
	switch o.kind {
	case KindString:
		s = "a non-empty string"
	case KindBool:
		s = "true or false (case-insensitive)"
	case KindInt:
		s = "an integer"
	case KindFloat:
		s = "a number"
	case KindDuration:
		s = durationSyntax
	case KindMemory:
		s = memorySyntax
	case KindEnum:
		names := make([]string, len(o.values))
		var aliases []string
		for i, v := range o.values {
			names[i] = v.name
			aliases = append(aliases, v.aliases...)
		}
		s = "one of " + strings.Join(names, ", ") + " (case-insensitive"
		if len(aliases) > 0 {
			s += "; also accepted: " + strings.Join(aliases, ", ")
		}
		s += ")"
	}
	if o.check != nil && (o.kind == KindBool || o.check.why != "") {
		// Only what weir implements; why explains the rest.
		return o.check.desc
	}
	if o.check != nil {
		if o.kind == KindDuration || o.kind == KindMemory {
			s += ","
		}
		s += " " + o.check.desc
	}
	return s
}
