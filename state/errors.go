package state

import "errors"

// ErrCorrupt is wrapped by every error about snapshot data that fails its
// checksum or cannot be decoded. A restore that returns it has not loaded
// the data it rejected.
var ErrCorrupt = errors.New("state: corrupt snapshot")
