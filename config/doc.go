// Package config holds weir's configuration, addressed by Apache Flink's
// option names.
//
// A user who knows Flink finds the same knob here under the same key, with the
// same default and the same value syntax: execution.checkpointing.interval,
// state.backend.type, restart-strategy.type and so on. [Options] lists every
// registered key with its kind, default, allowed values and description; the
// Key* constants name them in Go code.
//
// # Sources and precedence
//
// A value comes from one of four places; a later one overrides an earlier one:
//
//  1. the default registered for the key (never stored; read when a key is unset),
//  2. a YAML file ([LoadYAML]),
//  3. the job's Go code ([Configuration.Set], [Configuration.SetDuration], ...),
//  4. dynamic properties given on the command line as -D key=value ([ParseDynamic]).
//
// A program layers them with [Configuration.Merge], whose argument wins:
//
//	cfg, err := config.LoadYAML(f)      // file
//	...
//	err = cfg.SetDuration(config.KeyCheckpointingInterval, 10*time.Second) // code
//	...
//	dyn, err := config.ParseDynamic(dFlags) // -D key=value
//	...
//	cfg.Merge(dyn)
//	if err := cfg.Validate(); err != nil { ... }
//
// # Value syntax
//
// Values are parsed as Flink parses them:
//
//   - Durations follow Flink's TimeUtils: a whole number, optional spaces and an
//     optional unit, case-insensitive: "10 s", "10s", "10000 ms", "1 min", "2 h",
//     "1 d". Units are d, h, min, s, ms, µs and ns, or the full names with or
//     without a plural s (day, hour, minute, second, sec, milli, millisecond,
//     micro, microsecond, nano, nanosecond). A bare number is milliseconds.
//     There are no fractions and no negative durations; "m" is not a unit (use
//     min or ms). See [ParseDuration] and [FormatDuration].
//   - Integers are decimal and fit Java's int (32 bits); many keys have a range.
//   - Floats are decimal numbers such as 1.5 or 0.1.
//   - Booleans are true or false, case-insensitive.
//   - Enumerations are case-insensitive and stored in their canonical spelling
//     (EXACTLY_ONCE, exponential-delay); where Flink accepts alternative
//     spellings (restart-strategy.type: off, fixeddelay, ...) so does weir.
//   - Strings (paths, URLs, addresses) are taken as given and must not be empty.
//
// # YAML files
//
// [LoadYAML] reads both layouts Flink 2 accepts: flat keys
// (execution.checkpointing.interval: 10 s) and nested standard YAML
// (execution: {checkpointing: {interval: 10 s}}), in any mix. Every scalar is
// taken as its text, so 10000, "10 s" and true are all fine. Errors carry the
// line number.
//
// # Deprecated keys
//
// Keys Flink 2 renamed are still accepted under their old names
// (state.checkpoints.dir for execution.checkpointing.dir, restart-strategy for
// restart-strategy.type, ...). A value set under an old name is stored under the
// new one and recorded as a [Deprecation], which the caller logs, typically with
// log/slog:
//
//	for _, d := range cfg.Deprecations() {
//		logger.Warn("deprecated configuration key", "deprecation", d)
//	}
//
// As in Flink, within one source the new key wins over the old one whatever
// their order; across sources precedence decides.
//
// # Validation
//
// [Configuration.Set] rejects unknown keys ([*UnknownKeyError], with the closest
// known keys as suggestions) and values of the wrong syntax or out of range
// ([*InvalidValueError], naming the key, the value and what is allowed). Rules
// that involve several keys are checked by the typed views
// ([Configuration.Checkpointing], [Configuration.Restart],
// [Configuration.Pipeline], [Configuration.Cluster]), which return plain structs
// with every default resolved, and reported as [*ConflictError].
// [Configuration.Validate] runs all views.
//
// # Concurrency
//
// A Configuration is a plain value holder: concurrent reads are safe, but a
// write must not run concurrently with any other use. The option registry
// behind it is built once and never changes.
package config
