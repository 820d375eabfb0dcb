package restart

import "time"

// None configures the none strategy: the first failure fails the job. It has
// no fields. Flink also calls it "disable" and "off".
type None struct{}

// Kind returns "none".
func (None) Kind() string { return KindNone }

// Validate returns nil: there is nothing to configure.
func (None) Validate() error { return nil }

func (None) build() Strategy { return none{} }

type none struct{}

func (none) OnFailure(time.Time, error) Decision {
	return refuse("none: restarts are disabled (" + KeyType + " is none; the default when checkpointing is off)")
}

func (none) String() string { return "none" }
