package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/objstore/azuretest"
	"github.com/weirstream/weir/internal/objstore/gcstest"
	"github.com/weirstream/weir/internal/objstore/s3test"
)

const testJob = "a1b2c3d4e5f60718"

// backend is checkpoint storage a test can open again, as a restarted
// process would, and reach around to damage.
type backend struct {
	name string
	url  string
	dir  string       // local directory, for file backends
	raw  *blob.Bucket // the same objects, bypassing Storage
	opts []Option     // given to every open
	// prefix is the key in raw of the checkpoint directory url names,
	// ending in "/", or "" for the bucket's root.
	prefix string
}

func memBackend(t *testing.T) *backend {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return &backend{name: "mem", url: "mem://", raw: b, opts: []Option{Bucket(b)}}
}

func fileBackend(t *testing.T) *backend {
	dir := t.TempDir()
	raw, err := fileblob.OpenBucket(dir, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return &backend{name: "file", url: "file://" + filepath.ToSlash(dir), dir: dir, raw: raw}
}

// s3Backend is a fresh directory in the bucket of the S3-compatible
// server the environment names (see package s3test), which skips the
// test when there is none.
func s3Backend(t *testing.T) *backend {
	srv := s3test.Env(t)
	prefix := srv.Prefix(t)
	return &backend{name: "s3", url: srv.URL(prefix), raw: srv.OpenBucket(t), opts: []Option{URLMux(srv.Mux())}, prefix: prefix}
}

// gcsBackend is a fresh directory in a Cloud Storage server running in
// the test's process (see package gcstest).
func gcsBackend(t *testing.T) *backend {
	srv := gcstest.Start(t)
	prefix := srv.Prefix(t)
	return &backend{name: "gs", url: srv.URL(prefix), raw: srv.OpenBucket(t), opts: []Option{URLMux(srv.Mux())}, prefix: prefix}
}

// azureBackend is a fresh directory in the container of the Azurite
// emulator the environment names (see package azuretest), which skips the
// test when there is none.
func azureBackend(t *testing.T) *backend {
	srv := azuretest.Env(t)
	prefix := srv.Prefix(t)
	return &backend{name: "azblob", url: srv.URL(prefix), raw: srv.OpenBucket(t), opts: []Option{URLMux(srv.Mux())}, prefix: prefix}
}

// forBackends runs fn once on mem://, once on a local directory, once on
// a Cloud Storage server in the process (gs://), and once each on an
// S3-compatible server (s3://) and on Azurite (azblob://), which are
// skipped without one (see packages s3test and azuretest).
func forBackends(t *testing.T, fn func(t *testing.T, be *backend)) {
	t.Run("mem", func(t *testing.T) { fn(t, memBackend(t)) })
	t.Run("file", func(t *testing.T) { fn(t, fileBackend(t)) })
	t.Run("s3", func(t *testing.T) { fn(t, s3Backend(t)) })
	t.Run("gs", func(t *testing.T) { fn(t, gcsBackend(t)) })
	t.Run("azblob", func(t *testing.T) { fn(t, azureBackend(t)) })
}

func (be *backend) open(t *testing.T, opts ...Option) *Storage {
	t.Helper()
	s, err := Open(context.Background(), be.url, testJob, append(append([]Option(nil), be.opts...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// key returns the raw key of a path relative to the job directory.
func (be *backend) key(rel string) string { return be.prefix + testJob + "/" + rel }

func (be *backend) mutate(t *testing.T, rel string, fn func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	b, err := be.raw.ReadAll(ctx, be.key(rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := be.raw.WriteAll(ctx, be.key(rel), fn(b), nil); err != nil {
		t.Fatal(err)
	}
}

func (be *backend) remove(t *testing.T, rel string) {
	t.Helper()
	if err := be.raw.Delete(context.Background(), be.key(rel)); err != nil {
		t.Fatal(err)
	}
}

// keys lists every raw key under the job directory's rel prefix.
func (be *backend) keys(t *testing.T, rel string) []string {
	t.Helper()
	var out []string
	it := be.raw.List(&blob.ListOptions{Prefix: be.key(rel)})
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		out = append(out, strings.TrimPrefix(o.Key, be.key("")))
	}
	return out
}

func flip(off int) func([]byte) []byte {
	return func(b []byte) []byte {
		c := bytes.Clone(b)
		c[off] ^= 0x01
		return c
	}
}

func truncate(n int) func([]byte) []byte {
	return func(b []byte) []byte { return bytes.Clone(b[:n]) }
}

// payload returns n deterministic bytes.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeState writes data as one state, in a few writes.
func writeState(t *testing.T, w *StateWriter, data []byte) checkpoint.StateHandle {
	t.Helper()
	for len(data) > 0 {
		n := min(len(data), 7000)
		if _, err := w.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// writeCheckpoint writes a complete checkpoint with one operator of two
// subtasks: a keyed state of size big (a file, when above the threshold)
// and a small operator state each. It returns the metadata and the state
// bytes by handle path or, for inline state, by "inline/<uid>/<i>".
func writeCheckpoint(t *testing.T, s *Storage, id int64, big int) (*checkpoint.Metadata, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	m := &checkpoint.Metadata{
		JobID:          testJob,
		CheckpointID:   id,
		Kind:           checkpoint.KindCheckpoint,
		TriggerTime:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(id) * time.Second),
		CompletionTime: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC).Add(time.Duration(id) * time.Second),
	}
	data := map[string][]byte{}
	op := checkpoint.OperatorState{UID: "tenant-cost", Parallelism: 2, MaxParallelism: 128}
	for i := range 2 {
		keyed := payload(uint64(id*10)+uint64(i), big+i)
		w, err := s.CreateState(ctx, id, fmt.Sprintf("tenant-cost-%d-keyed", i))
		if err != nil {
			t.Fatal(err)
		}
		kh := writeState(t, w, keyed)
		kh.KeyGroups = &checkpoint.KeyGroupRange{Start: i * 64, End: i*64 + 63}
		small := []byte(fmt.Sprintf("offsets of subtask %d at checkpoint %d", i, id))
		w, err = s.CreateState(ctx, id, fmt.Sprintf("tenant-cost-%d-op", i))
		if err != nil {
			t.Fatal(err)
		}
		oh := writeState(t, w, small)
		for _, x := range []struct {
			h checkpoint.StateHandle
			b []byte
		}{{kh, keyed}, {oh, small}} {
			if x.h.Path != "" {
				data[x.h.Path] = x.b
			} else {
				data[fmt.Sprintf("inline/%x", x.h.CRC32C)] = x.b
			}
		}
		op.Subtasks = append(op.Subtasks, checkpoint.SubtaskState{Keyed: []checkpoint.StateHandle{kh}, Operator: []checkpoint.StateHandle{oh}})
	}
	m.Operators = []checkpoint.OperatorState{op}
	if _, err := s.WriteMetadata(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Version = checkpoint.MetadataVersion
	return m, data
}

// stateOf returns the bytes writeCheckpoint recorded for h.
func stateOf(data map[string][]byte, h checkpoint.StateHandle) []byte {
	if h.Path != "" {
		return data[h.Path]
	}
	return data[fmt.Sprintf("inline/%x", h.CRC32C)]
}

func mustLatest(t *testing.T, s *Storage) (*checkpoint.Metadata, []Skipped) {
	t.Helper()
	m, skipped, err := s.Latest(context.Background())
	if err != nil {
		t.Fatalf("Latest: %v (skipped %v)", err, skipped)
	}
	return m, skipped
}

func wantErr(t *testing.T, err, target error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("got %v, want an error matching %v", err, target)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not mention %q", err, c)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
