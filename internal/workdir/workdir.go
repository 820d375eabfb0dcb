// Package workdir creates the working directories a process keeps while
// it runs (an embedded store's files, local copies of state) so that the
// ones a killed process left behind are found and removed.
//
// A directory D is held by an exclusive flock(2) on a file beside it,
// D.weir-lock, which its process keeps open while it uses D; the kernel
// drops the lock when the process dies, however it dies. The lock file is
// created and locked under a name of its own and renamed into place, so
// D.weir-lock, once it exists, is locked until its owner removes D or
// dies. Sweep removes every D in a directory whose D.weir-lock it can
// lock: D, the siblings named D.* (a store's snapshots beside it) and the
// lock file last. A directory without a lock file is never touched.
package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockSuffix ends the name of a directory's lock file.
const lockSuffix = ".weir-lock"

// Dir is a working directory held by this process.
type Dir struct {
	path string
	lock *os.File
}

// Create removes the directories in parent that a process which is gone
// left behind (see Sweep), then makes a new directory in parent whose
// name starts with prefix, held by this process until Remove. It returns
// the directory and the paths swept.
func Create(parent, prefix string) (*Dir, []string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, nil, err
	}
	swept, _ := Sweep(parent) // a failed sweep leaves garbage, not a fault
	path, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, swept, err
	}
	f, err := os.CreateTemp(parent, "."+filepath.Base(path)+".locking-")
	if err == nil {
		if err = lockFile(f); err == nil {
			err = os.Rename(f.Name(), path+lockSuffix)
		}
		if err != nil {
			_ = os.Remove(f.Name())
			_ = f.Close()
		}
	}
	if errors.Is(err, errNoLocks) {
		// A file system without locks: the directory works, and a
		// killed process's is left behind.
		_ = os.Remove(f.Name())
		_ = f.Close()
		return &Dir{path: path}, swept, nil
	}
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, swept, fmt.Errorf("workdir: locking %s: %w", path, err)
	}
	return &Dir{path: path, lock: f}, swept, nil
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// Remove deletes the directory, its siblings named after it (D.*), and
// then its lock file, releasing the lock. Calling it again does nothing.
func (d *Dir) Remove() error {
	if d.path == "" {
		return nil
	}
	err := removeTree(d.path, d.lock != nil)
	if d.lock != nil {
		_ = d.lock.Close()
		d.lock = nil
	}
	d.path = ""
	return err
}

// removeTree removes dir, its siblings dir.* other than its lock file,
// and then, if locked, the lock file.
func removeTree(dir string, locked bool) error {
	err := os.RemoveAll(dir)
	siblings, _ := filepath.Glob(globEscape(dir) + ".*")
	for _, s := range siblings {
		if s == dir+lockSuffix {
			continue
		}
		if rerr := os.RemoveAll(s); err == nil {
			err = rerr
		}
	}
	if locked {
		if rerr := os.Remove(dir + lockSuffix); err == nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	return err
}

// Sweep removes each directory in parent that Create made for a process
// which no longer holds it, and returns their paths. A directory whose
// lock another process (or this one) holds is left alone.
func Sweep(parent string) ([]string, error) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var swept []string
	var first error
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, lockSuffix) {
			continue
		}
		dir := filepath.Join(parent, strings.TrimSuffix(name, lockSuffix))
		f, err := os.OpenFile(dir+lockSuffix, os.O_RDWR, 0)
		if err != nil {
			continue // removed meanwhile
		}
		if lockFile(f) != nil {
			_ = f.Close() // held: its process lives
			continue
		}
		if err := removeTree(dir, true); err != nil && first == nil {
			first = fmt.Errorf("workdir: removing %s: %w", dir, err)
		}
		_ = f.Close()
		swept = append(swept, dir)
	}
	return swept, first
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
