package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

func TestRoundTrip(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		m1, data1 := writeCheckpoint(t, s, 1, 30<<10)
		m2, data2 := writeCheckpoint(t, s, 2, 200<<10)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// A new process opens the same directory.
		s = be.open(t)
		got, skipped := mustLatest(t, s)
		if len(skipped) != 0 {
			t.Fatalf("skipped %v", skipped)
		}
		if !reflect.DeepEqual(got, m2) {
			t.Fatalf("Latest:\n got %+v\nwant %+v", got, m2)
		}
		if err := eachHandle(got, func(where string, h checkpoint.StateHandle) error {
			b, err := s.ReadState(ctx, h)
			if err != nil {
				return err
			}
			if !bytes.Equal(b, stateOf(data2, h)) {
				return fmt.Errorf("%s: read %d bytes, differ from the %d written", where, len(b), len(stateOf(data2, h)))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		// Both checkpoints are listed, completed, with their sizes.
		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 2 {
			t.Fatalf("List: %+v", infos)
		}
		for i, m := range []*checkpoint.Metadata{m1, m2} {
			in := infos[i]
			if in.ID != m.CheckpointID || in.Status != Completed || in.Err != nil ||
				in.StateSize != m.Size() || !in.TriggerTime.Equal(m.TriggerTime) || !in.CompletionTime.Equal(m.CompletionTime) ||
				in.Files != 3 || in.StoredSize <= in.StateSize-100 || in.Path != s.CheckpointPath(m.CheckpointID) {
				t.Errorf("List[%d] = %+v", i, in)
			}
		}

		// The older one reads back through the path WriteMetadata returns.
		snap, err := s.Resolve(ctx, s.CheckpointPath(1)+"/"+MetadataFile)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		if !reflect.DeepEqual(snap.Metadata, m1) {
			t.Fatalf("Resolve: got %+v", snap.Metadata)
		}
		h := m1.Operators[0].Subtasks[1].Keyed[0]
		b, err := snap.ReadState(ctx, h)
		if err != nil || !bytes.Equal(b, stateOf(data1, h)) {
			t.Fatalf("ReadState through Resolve: %v", err)
		}
		if err := snap.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLayoutOnDisk(t *testing.T) {
	be := fileBackend(t)
	s := be.open(t)
	writeCheckpoint(t, s, 7, 30<<10)
	var files []string
	filepath.WalkDir(be.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(be.dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	want := []string{
		testJob + "/" + LatestFile,
		testJob + "/chk-7/_metadata",
		testJob + "/chk-7/tenant-cost-0-keyed",
		testJob + "/chk-7/tenant-cost-1-keyed",
	}
	if !slices.Equal(files, want) {
		t.Fatalf("files:\n got %q\nwant %q", files, want)
	}
	if got, want := s.Path(), filepath.Join(be.dir, testJob); got != want {
		t.Fatalf("Path() = %s, want %s", got, want)
	}
}

func TestPlainPathIsFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	s, err := Open(context.Background(), dir, testJob)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeCheckpoint(t, s, 1, 30<<10)
	if !fileExists(filepath.Join(dir, testJob, "chk-1", MetadataFile)) {
		t.Fatal("no _metadata under the plain path")
	}
}

func TestMetadataFileIsReadable(t *testing.T) {
	be := fileBackend(t)
	s := be.open(t)
	m, _ := writeCheckpoint(t, s, 3, 10)
	raw, err := os.ReadFile(filepath.Join(be.dir, testJob, "chk-3", MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := bytes.Cut(raw, []byte("\n"))
	if !ok {
		t.Fatal("no header line")
	}
	var hdr map[string]any
	if err := json.Unmarshal(header, &hdr); err != nil {
		t.Fatalf("header %q: %v", header, err)
	}
	if hdr["format"] != "weir-checkpoint-metadata" || hdr["version"] != 1.0 || hdr["size"] != float64(len(body)) {
		t.Fatalf("header %s", header)
	}
	var got checkpoint.Metadata
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if !reflect.DeepEqual(&got, m) {
		t.Fatalf("body:\n got %+v\nwant %+v", got, *m)
	}
	if !bytes.Contains(body, []byte("\n  \"checkpoint_id\": 3,\n")) {
		t.Fatalf("body is not indented JSON:\n%s", body)
	}
}

func TestInlineThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []Option
		size      int
		wantFile  bool
		wantFiles int
	}{
		{"default, empty", nil, 0, false, 0},
		{"default, just below", nil, DefaultInlineThreshold - 1, false, 0},
		{"default, at threshold", nil, DefaultInlineThreshold, true, 1},
		{"100 bytes, 99", []Option{InlineThreshold(100)}, 99, false, 0},
		{"100 bytes, 100", []Option{InlineThreshold(100)}, 100, true, 1},
		{"off, 1 byte", []Option{InlineThreshold(0)}, 1, true, 1},
		{"off, empty", []Option{InlineThreshold(0)}, 0, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := memBackend(t)
			s := be.open(t, tc.opts...)
			ctx := context.Background()
			w, err := s.CreateState(ctx, 1, "s")
			if err != nil {
				t.Fatal(err)
			}
			data := payload(1, tc.size)
			h := writeState(t, w, data)
			if (h.Path != "") != tc.wantFile {
				t.Fatalf("handle %+v: file = %v, want %v", h, h.Path != "", tc.wantFile)
			}
			if tc.wantFile && (h.Path != "chk-1/s" || h.Inline != nil) {
				t.Fatalf("file handle %+v", h)
			}
			if !tc.wantFile && !bytes.Equal(h.Inline, data) {
				t.Fatalf("inline %d bytes, want %d", len(h.Inline), len(data))
			}
			if h.Size != int64(tc.size) {
				t.Fatalf("size %d, want %d", h.Size, tc.size)
			}
			if got := len(be.keys(t, "")); got != tc.wantFiles {
				t.Fatalf("%d files stored, want %d", got, tc.wantFiles)
			}
			b, err := s.ReadState(ctx, h)
			if err != nil || !bytes.Equal(b, data) {
				t.Fatalf("ReadState: %v", err)
			}
		})
	}
	if _, err := Open(context.Background(), "mem://", testJob, InlineThreshold(-1)); err == nil {
		t.Fatal("negative threshold accepted")
	}
}

func TestCRC32CIsCastagnoli(t *testing.T) {
	s := memBackend(t).open(t)
	w, _ := s.CreateState(context.Background(), 1, "x")
	h := writeState(t, w, []byte("123456789"))
	// The CRC-32C check value of "123456789".
	if h.CRC32C != 0xe3069283 {
		t.Fatalf("crc %08x, want e3069283", h.CRC32C)
	}
}

func TestFlippedStateByteDetected(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		m, _ := writeCheckpoint(t, s, 1, 30<<10)
		h := m.Operators[0].Subtasks[0].Keyed[0]
		be.mutate(t, h.Path, flip(12345))

		// The size still matches, so the metadata verifies...
		if _, err := s.ReadMetadata(ctx, s.CheckpointPath(1)); err != nil {
			t.Fatal(err)
		}
		// ...but reading the state does not hand out the bytes silently.
		_, err := s.ReadState(ctx, h)
		wantErr(t, err, ErrCorrupt, "chk-1/tenant-cost-0-keyed", "checksum mismatch", fmt.Sprintf("expected crc32c %08x", h.CRC32C))
		var ce *CorruptError
		if !errors.As(err, &ce) || !strings.HasSuffix(ce.Path, "chk-1/tenant-cost-0-keyed") {
			t.Fatalf("not a CorruptError with the path: %#v", err)
		}

		// Streaming: every byte may come out, and then the error instead of EOF.
		r, err := s.OpenState(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, r)
		r.Close()
		wantErr(t, err, ErrCorrupt, "checksum mismatch")
		if n != h.Size {
			t.Fatalf("read %d bytes before the error, want %d", n, h.Size)
		}

		// With VerifyChecksums, recovery finds it and passes over the checkpoint.
		_, err = be.open(t, VerifyChecksums(true)).ReadMetadata(ctx, s.CheckpointPath(1))
		wantErr(t, err, ErrCorrupt, "checksum mismatch")
	})
}

func TestTruncatedStateDetected(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		writeCheckpoint(t, s, 1, 30<<10)
		m, _ := writeCheckpoint(t, s, 2, 30<<10)
		h := m.Operators[0].Subtasks[1].Keyed[0]
		be.mutate(t, h.Path, truncate(1000))

		_, err := s.ReadState(ctx, h)
		wantErr(t, err, ErrCorrupt, "chk-2/tenant-cost-1-keyed", fmt.Sprintf("expected %d bytes, got 1000", h.Size))
		_, err = s.ReadMetadata(ctx, s.CheckpointPath(2))
		wantErr(t, err, ErrCorrupt, "size mismatch")

		got, skipped := mustLatest(t, s)
		if got.CheckpointID != 1 || len(skipped) != 1 || skipped[0].CheckpointID != 2 || !errors.Is(skipped[0].Err, ErrCorrupt) {
			t.Fatalf("Latest = %d, skipped %v", got.CheckpointID, skipped)
		}
	})
}

func TestShortReadDetected(t *testing.T) {
	// The object is whole but the read of it ends early (a torn stream).
	be := memBackend(t)
	faults := NewFaults(1)
	s := be.open(t, WithFaults(faults))
	m, _ := writeCheckpoint(t, s, 1, 30<<10)
	faults.Add(Fault{Op: OpRead, Path: "tenant-cost-0-keyed", Action: Truncate, Offset: -10})
	_, err := s.ReadState(context.Background(), m.Operators[0].Subtasks[0].Keyed[0])
	wantErr(t, err, ErrCorrupt, "size mismatch", "got 30710")
}

func TestLatestSkipsCorruptMetadata(t *testing.T) {
	metadata := "chk-2/" + MetadataFile
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, be *backend)
		want   error
		says   string
	}{
		{"flipped byte in body", func(t *testing.T, be *backend) { be.mutate(t, metadata, flip(200)) }, ErrCorrupt, "checksum mismatch"},
		{"flipped byte in header", func(t *testing.T, be *backend) { be.mutate(t, metadata, flip(3)) }, ErrCorrupt, "header"},
		{"truncated", func(t *testing.T, be *backend) { be.mutate(t, metadata, truncate(150)) }, ErrCorrupt, "size mismatch"},
		{"truncated in header", func(t *testing.T, be *backend) { be.mutate(t, metadata, truncate(20)) }, ErrCorrupt, "no header line"},
		{"empty", func(t *testing.T, be *backend) { be.mutate(t, metadata, truncate(0)) }, ErrCorrupt, "no header line"},
		// A write torn by a power loss can leave the file at its full size
		// with its tail never written.
		{"torn: zeroed tail", func(t *testing.T, be *backend) {
			be.mutate(t, metadata, func(b []byte) []byte {
				c := bytes.Clone(b)
				clear(c[len(c)/2:])
				return c
			})
		}, ErrCorrupt, "checksum mismatch"},
		{"future file format", func(t *testing.T, be *backend) {
			be.mutate(t, metadata, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"version":1,`), []byte(`"version":2,`), 1)
			})
		}, ErrUnsupportedVersion, "file format version 2"},
		{"future metadata version", func(t *testing.T, be *backend) {
			be.mutate(t, metadata, func(b []byte) []byte {
				m, err := decodeMetadata(b, "x")
				if err != nil {
					t.Fatal(err)
				}
				m.Version = checkpoint.MetadataVersion + 1
				out, err := encodeMetadata(m)
				if err != nil {
					t.Fatal(err)
				}
				return out
			})
		}, ErrUnsupportedVersion, "metadata version 2"},
		{"not weir's", func(t *testing.T, be *backend) {
			be.mutate(t, metadata, func([]byte) []byte { return []byte("\x00\x00\x00\x01flink\n") })
		}, ErrCorrupt, "header"},
		{"state file missing", func(t *testing.T, be *backend) { be.remove(t, "chk-2/tenant-cost-1-keyed") }, ErrCorrupt, "state file missing"},
		{"metadata of another checkpoint", func(t *testing.T, be *backend) {
			be.mutate(t, metadata, func([]byte) []byte {
				b, err := be.raw.ReadAll(context.Background(), be.key("chk-1/"+MetadataFile))
				if err != nil {
					t.Fatal(err)
				}
				return b
			})
		}, ErrCorrupt, "describes CHECKPOINT 1, not checkpoint 2"},
		{"never written", func(t *testing.T, be *backend) { be.remove(t, metadata) }, ErrIncomplete, "chk-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forBackends(t, func(t *testing.T, be *backend) {
				s := be.open(t)
				m1, _ := writeCheckpoint(t, s, 1, 30<<10)
				writeCheckpoint(t, s, 2, 30<<10)
				tc.damage(t, be)

				got, skipped := mustLatest(t, s)
				if !reflect.DeepEqual(got, m1) {
					t.Fatalf("Latest = checkpoint %d, want 1", got.CheckpointID)
				}
				if len(skipped) != 1 {
					t.Fatalf("skipped %v, want checkpoint 2", skipped)
				}
				sk := skipped[0]
				if sk.CheckpointID != 2 || sk.Path != s.CheckpointPath(2) {
					t.Fatalf("skipped %+v", sk)
				}
				wantErr(t, sk.Err, tc.want, tc.says)

				infos, err := s.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				wantStatus := Invalid
				if tc.want == ErrIncomplete {
					wantStatus = Incomplete
				}
				if len(infos) != 2 || infos[0].Status != Completed || infos[1].Status != wantStatus || !errors.Is(infos[1].Err, tc.want) {
					t.Fatalf("List: %+v", infos)
				}
			})
		})
	}
}

func TestIncompleteCheckpointNotCompleted(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		ctx := context.Background()
		s := be.open(t)
		writeCheckpoint(t, s, 1, 30<<10)
		// Checkpoint 2's state is written, its _metadata never is.
		w, err := s.CreateState(ctx, 2, "tenant-cost-0-keyed")
		if err != nil {
			t.Fatal(err)
		}
		writeState(t, w, payload(2, 50<<10))

		infos, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 2 || infos[1].ID != 2 || infos[1].Status != Incomplete || infos[1].Files != 1 || infos[1].StoredSize != 50<<10 {
			t.Fatalf("List: %+v", infos)
		}
		wantErr(t, infos[1].Err, ErrIncomplete, "no _metadata")
		m, skipped := mustLatest(t, s)
		if m.CheckpointID != 1 || len(skipped) != 1 || !errors.Is(skipped[0].Err, ErrIncomplete) {
			t.Fatalf("Latest = %d, skipped %v", m.CheckpointID, skipped)
		}
		_, err = s.ReadMetadata(ctx, s.CheckpointPath(2))
		wantErr(t, err, ErrIncomplete)
	})
}

func TestLatestWithNothing(t *testing.T) {
	forBackends(t, func(t *testing.T, be *backend) {
		s := be.open(t)
		_, skipped, err := s.Latest(context.Background())
		if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 0 {
			t.Fatalf("Latest on an empty directory: %v, %v", err, skipped)
		}
		writeCheckpoint(t, s, 1, 10)
		be.mutate(t, "chk-1/"+MetadataFile, flip(100))
		_, skipped, err = s.Latest(context.Background())
		if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 {
			t.Fatalf("Latest with only a corrupt checkpoint: %v, %v", err, skipped)
		}
	})
}

func TestLatestDoesNotSkipOnStorageErrors(t *testing.T) {
	be := memBackend(t)
	faults := NewFaults(1)
	s := be.open(t, WithFaults(faults))
	writeCheckpoint(t, s, 1, 10)
	writeCheckpoint(t, s, 2, 10)
	faults.Add(Fault{Op: OpRead, Path: "chk-2/_metadata", Times: 1})
	_, _, err := s.Latest(context.Background())
	wantErr(t, err, ErrInjected, "chk-2/_metadata")
	// The fault has passed: a retry finds checkpoint 2.
	if m, _ := mustLatest(t, s); m.CheckpointID != 2 {
		t.Fatalf("Latest = %d", m.CheckpointID)
	}
}

func TestLatestOrdersNumerically(t *testing.T) {
	s := memBackend(t).open(t)
	for _, id := range []int64{9, 10, 2} {
		writeCheckpoint(t, s, id, 10)
	}
	if m, _ := mustLatest(t, s); m.CheckpointID != 10 {
		t.Fatalf("Latest = %d, want 10", m.CheckpointID)
	}
}
