//go:build unix

package workdir

import (
	"errors"
	"os"
	"syscall"
)

// errNoLocks says the file system does not support flock.
var errNoLocks = errors.New("workdir: the file system has no locks")

// lockFile takes an exclusive flock on f without waiting: an error if
// another open file holds it (in this process or another).
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return errNoLocks
		}
		return err
	}
}
