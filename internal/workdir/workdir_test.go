package workdir

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// exists reports whether path exists.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCreateRemove: a directory and its lock exist while held, and Remove
// deletes them with the directory's siblings.
func TestCreateRemove(t *testing.T) {
	parent := t.TempDir()
	d, _, err := Create(parent, "weir-keyed-")
	if err != nil {
		t.Fatal(err)
	}
	if !exists(t, d.Path()) || !exists(t, d.Path()+lockSuffix) {
		t.Fatalf("%s or its lock is missing", d.Path())
	}
	if err := os.Mkdir(d.Path()+".snapshot-1-0", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Fatalf("left after Remove: %v", ents)
	}
	if err := d.Remove(); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// TestSweepLeavesHeld: a sweep removes no directory this process holds
// (flock locks conflict between open files of one process too), and none
// without a lock file.
func TestSweepLeavesHeld(t *testing.T) {
	parent := t.TempDir()
	d, _, err := Create(parent, "weir-keyed-")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	other := filepath.Join(parent, "weir-keyed-unlocked")
	foreign := filepath.Join(parent, "app")
	for _, p := range []string{other, foreign} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(foreign+".lock", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	swept, err := Sweep(parent)
	if err != nil || len(swept) != 0 {
		t.Fatalf("sweep: %v, %v; want nothing swept", swept, err)
	}
	d2, swept, err := Create(parent, "weir-keyed-")
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Remove()
	if len(swept) != 0 {
		t.Fatalf("Create swept %v", swept)
	}
	for _, p := range []string{d.Path(), other, foreign, foreign + ".lock"} {
		if !exists(t, p) {
			t.Fatalf("%s removed", p)
		}
	}
}

// TestSweepAfterKill kills a process holding a directory (SIGKILL, so it
// cleans nothing up): while it lives a sweep leaves its directory alone,
// after its death the next Create removes the directory, its sibling and
// its lock.
func TestSweepAfterKill(t *testing.T) {
	if parent := os.Getenv("WEIR_WORKDIR_CHILD"); parent != "" {
		d, _, err := Create(parent, "weir-keyed-")
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(d.Path(), "000001.sst"), make([]byte, 1<<20), 0o644); err != nil {
			panic(err)
		}
		if err := os.Mkdir(d.Path()+".snapshot-3-1", 0o755); err != nil {
			panic(err)
		}
		os.Stdout.WriteString(d.Path() + "\n")
		select {} // until killed
	}
	parent := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepAfterKill$")
	cmd.Env = append(os.Environ(), "WEIR_WORKDIR_CHILD="+parent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the child's directory: %v", err)
	}
	dir := line[:len(line)-1]
	if swept, err := Sweep(parent); err != nil || len(swept) != 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("sweep while the child lives: %v, %v", swept, err)
	}
	if !exists(t, dir) {
		t.Fatalf("%s removed while its process lived", dir)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	d, swept, err := Create(parent, "weir-keyed-")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if !slices.Equal(swept, []string{dir}) {
		t.Fatalf("swept %v, want [%s]", swept, dir)
	}
	for _, p := range []string{dir, dir + ".snapshot-3-1", dir + lockSuffix} {
		if exists(t, p) {
			t.Fatalf("%s left after its process was killed", p)
		}
	}
	if !exists(t, d.Path()) {
		t.Fatal("the new directory is missing")
	}
}
