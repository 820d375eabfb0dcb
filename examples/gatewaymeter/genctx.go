package gatewaymeter

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// GenerateFilesContext is GenerateFiles that gives up once ctx is done: the
// next write to a partition file fails and it returns ctx's error, leaving
// what it wrote in dir for the caller to remove. Generate writes each
// partition in blocks of about 64 KiB, so it stops within a few blocks of
// ctx being done. The files it writes are byte-identical to GenerateFiles's.
func GenerateFilesContext(ctx context.Context, cfg GenConfig, dir string) (m Manifest, err error) {
	if err := cfg.Validate(); err != nil {
		return Manifest{}, err
	}
	if err := ctx.Err(); err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, err
	}
	files := make([]*os.File, cfg.Partitions)
	defer func() {
		for _, f := range files {
			if f != nil {
				if cerr := f.Close(); err == nil && cerr != nil {
					err = cerr
				}
			}
		}
	}()
	for p := range files {
		if files[p], err = os.Create(filepath.Join(dir, TraceFileName(p))); err != nil {
			return Manifest{}, err
		}
	}
	m, err = Generate(cfg, func(p int) io.Writer { return ctxWriter{ctx, files[p]} })
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Manifest{}, cerr
		}
		return Manifest{}, err
	}
	for p := range files {
		m.Partitions[p].File = TraceFileName(p)
		if err := files[p].Sync(); err != nil {
			return Manifest{}, err
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	return m, os.WriteFile(filepath.Join(dir, ManifestFileName), append(b, '\n'), 0o644)
}

// ctxWriter fails every write once its context is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (w ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}
