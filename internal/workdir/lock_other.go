//go:build !unix

package workdir

import (
	"errors"
	"os"
)

// errNoLocks says the file system does not support flock.
var errNoLocks = errors.New("workdir: the file system has no locks")

// lockFile reports that there are no locks here: directories work, and a
// killed process's are left behind.
func lockFile(*os.File) error { return errNoLocks }
