package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// staticProgram builds a small Go program with CGO_ENABLED=0 and returns
// its path.
func staticProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"weir in an image\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestImage builds the image of a static binary, writes it as a tarball
// and reads it back: one layer with the binary as /weir (which runs) and
// the directories the manifests mount, owned by the image's user; the
// entrypoint, user, working directory and platform in its config.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is for linux")
	}
	bin := staticProgram(t)
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(bin, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "weir-image.tar")
	tag, _ := name.NewTag("weir:test")
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, err := back.Digest()
	if err != nil || d1 != d2 {
		t.Fatalf("read back digest %v (%v), wrote %v", d2, err, d1)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !slices.Equal(cf.Config.Entrypoint, []string{"/weir"}) ||
		cf.Config.User != "65532:65532" || cf.Config.WorkingDir != "/var/lib/weir" {
		t.Errorf("config %+v", cf)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	seen := map[string]*tar.Header{}
	var got []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
		if h.Name == "weir" {
			if got, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !bytes.Equal(got, want) || seen["weir"].Mode != 0o755 {
		t.Errorf("/weir: %d bytes, mode %o; want the binary's %d bytes, mode 755", len(got), seen["weir"].Mode, len(want))
	}
	if h := seen["var/lib/weir/"]; h == nil || h.Uid != uid || h.Typeflag != tar.TypeDir {
		t.Errorf("/var/lib/weir: %+v, want a directory of uid %d", h, uid)
	}
	if h := seen["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	// The binary in the image runs on its own.
	x := filepath.Join(t.TempDir(), "weir")
	if err := os.WriteFile(x, got, 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command(x).Output(); err != nil || string(o) != "weir in an image\n" {
		t.Errorf("the image's /weir: %q, %v", o, err)
	}
}

// TestImageRefusesWhatCannotRun: a dynamically linked binary (it needs a
// loader the empty base has not), one for another architecture, and a
// file that is no executable are refused, saying why.
func TestImageRefusesWhatCannotRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux binaries")
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other == "" {
		t.Skipf("no image for %s", runtime.GOARCH)
	}
	static := staticProgram(t)
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dynamic, err := exec.LookPath("ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin, arch, want string
	}{
		{dynamic, runtime.GOARCH, "dynamically linked"},
		{static, other, "not " + other},
		{notELF, runtime.GOARCH, "not an ELF executable"},
	} {
		if _, err := Build(c.bin, c.arch); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%s, %s): %v, want an error saying %q", c.bin, c.arch, err, c.want)
		}
	}
	if err := run(t.Context(), []string{"--arch", "s390x"}, io.Discard); err == nil || !strings.Contains(err.Error(), "want amd64 or arm64") {
		t.Errorf("--arch s390x: %v", err)
	}
}
