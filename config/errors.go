package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// UnknownKeyError reports a key that is neither registered nor a deprecated
// name of a registered key.
type UnknownKeyError struct {
	// Key is the key as given.
	Key string
	// Suggestions are the closest known keys, best first; possibly none.
	Suggestions []string
}

// Error names the key and, when there are any, the suggested keys.
func (e *UnknownKeyError) Error() string {
	msg := "config: unknown key " + strconv.Quote(e.Key)
	switch len(e.Suggestions) {
	case 0:
	case 1:
		msg += "; did you mean " + strconv.Quote(e.Suggestions[0]) + "?"
	default:
		q := make([]string, len(e.Suggestions))
		for i, s := range e.Suggestions {
			q[i] = strconv.Quote(s)
		}
		msg += "; did you mean one of " + strings.Join(q, ", ") + "?"
	}
	return msg
}

// InvalidValueError reports a value that a registered key does not accept.
type InvalidValueError struct {
	// Key is the registered key the value was for, even when it was given
	// under a deprecated name.
	Key string
	// Value is the value as given, or "<redacted>" for sensitive options.
	Value string
	// Allowed describes the accepted values, as OptionInfo.Allowed does.
	Allowed string
	// Err says what is wrong with the value when there is more to say than
	// that it is not allowed; it may be nil.
	Err error
}

// Error names the key and the value, says what is wrong and what is allowed.
func (e *InvalidValueError) Error() string {
	msg := fmt.Sprintf("config: invalid value %q for %s", e.Value, e.Key)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + "; allowed: " + e.Allowed
}

// Unwrap returns Err.
func (e *InvalidValueError) Unwrap() error { return e.Err }

// ConflictError reports values that are valid on their own but not together.
type ConflictError struct {
	// Keys are the keys involved, the one whose value is refused first.
	Keys []string
	// Reason says what is wrong, naming the keys and their values.
	Reason string
}

// Error returns the Reason.
func (e *ConflictError) Error() string { return "config: " + e.Reason }

// KindError reports a typed setter or getter used on an option of another
// kind, such as SetInt on a duration option.
type KindError struct {
	// Key is the option's key.
	Key string
	// Kind is the option's kind; Want is the kind the call needs.
	Kind, Want Kind
}

// Error names the key and both kinds.
func (e *KindError) Error() string {
	return fmt.Sprintf("config: %s is a %v option, not %v", e.Key, e.Kind, e.Want)
}

// YAMLError reports a problem in a YAML configuration file.
type YAMLError struct {
	// Line is the 1-based line the problem is on, or 0 when unknown.
	Line int
	// Err is the problem, often an *UnknownKeyError or *InvalidValueError.
	Err error
}

// Error leads with the line number, when known, followed by the problem.
func (e *YAMLError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "config: ")
	if e.Line > 0 {
		return fmt.Sprintf("config: yaml line %d: %s", e.Line, msg)
	}
	return "config: yaml: " + msg
}

// Unwrap returns Err.
func (e *YAMLError) Unwrap() error { return e.Err }

// MalformedPairError reports a dynamic property that is not of the form
// key=value.
type MalformedPairError struct {
	// Arg is the argument as given.
	Arg string
}

// Error names the argument and the expected form.
func (e *MalformedPairError) Error() string {
	return fmt.Sprintf("config: malformed dynamic property %q: want key=value, as in -D execution.checkpointing.interval=10s", e.Arg)
}

// errDuplicateKey is wrapped by the YAMLError for a key given twice.
var errDuplicateKey = errors.New("key given twice")
