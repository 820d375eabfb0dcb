// Command weir-image builds weir's container image without a container
// engine: one static binary on an empty base, written as a tarball that
// "docker load", "podman load", "kind load image-archive" and "crane push"
// take.
//
//	go run ./cmd/weir-image --out weir-image.tar
//	docker load -i weir-image.tar        # weir:latest
//
// It compiles ./cmd/weir with CGO_ENABLED=0 for linux and the chosen
// architecture (or takes --binary, which must be statically linked), and
// adds nothing else but the directories the Kubernetes manifests mount:
// /tmp and /var/lib/weir, owned by the non-root user 65532 the image runs
// as.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// uid is the user the image runs as: distroless' "nonroot".
const uid = 65532

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "weir-image: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("weir-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "weir-image.tar", "tarball to write")
	tag := fs.String("tag", "weir:latest", "the image's name and tag in the tarball")
	arch := fs.String("arch", runtime.GOARCH, "architecture to build for: amd64 or arm64")
	binary := fs.String("binary", "", "a statically linked weir binary for linux/ARCH to use instead of building ./cmd/weir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *arch != "amd64" && *arch != "arm64" {
		return fmt.Errorf("--arch %q: want amd64 or arm64", *arch)
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("--tag: %w", err)
	}
	bin := *binary
	if bin == "" {
		dir, err := os.MkdirTemp("", "weir-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "weir")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/weir")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+*arch)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building ./cmd/weir (run from the repository's root): %w", err)
		}
	}
	img, err := Build(bin, *arch)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "weir-image: wrote %s (%s, linux/%s, %s)\n", *out, ref, *arch, d)
	return nil
}

// Build returns the image of the weir binary at bin, built for linux/arch.
// It refuses a binary that is not a statically linked ELF executable for
// that architecture: on an empty base there is no dynamic loader.
func Build(bin, arch string) (v1.Image, error) {
	if err := checkStatic(bin, arch); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		b, err := layerTar(data)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{"/weir"},
		Cmd:        []string{"--help"},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: "/var/lib/weir",
		Env:        []string{"PATH=/"},
		Labels: map[string]string{
			"org.opencontainers.image.title":  "weir",
			"org.opencontainers.image.source": "https://github.com/weirstream/weir",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the image's one layer: the binary as /weir, and the
// directories the image's user writes to.
func layerTar(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: "var/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "var/lib/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "var/lib/weir/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: uid, Gid: uid, ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "weir", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkStatic fails unless path is an ELF executable for linux/arch with
// no interpreter and no shared libraries.
func checkStatic(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable for linux: %w", path, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("%s is built for %v, not %s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it needs a loader the empty base has not): build it with CGO_ENABLED=0", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	return nil
}
