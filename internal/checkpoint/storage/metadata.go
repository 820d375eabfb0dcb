package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strconv"

	"github.com/weirstream/weir/internal/checkpoint"
)

// The _metadata file is two JSON texts, one after the other: a one-line
// header, then the body, checkpoint.Metadata as indented JSON.
//
//	{"format":"weir-checkpoint-metadata","version":1,"size":1234,"crc32c":"9a3f00c1"}
//	{
//	  "version": 1,
//	  "job_id": "a1b2c3",
//	  "checkpoint_id": 7,
//	  ...
//	}
//
// The header names the file format and its version, and gives the size and
// the CRC-32C (hexadecimal) of the body, every byte after the header's
// newline. So a truncated, torn or bit-flipped file is recognised, and the
// file still reads as text (and through jq) without tools of our own.
const (
	metadataFormat        = "weir-checkpoint-metadata"
	metadataFormatVersion = 1
)

type metadataHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Size    int64  `json:"size"`
	CRC32C  string `json:"crc32c"`
}

// ErrUnsupportedVersion is matched (with errors.Is) by the error for a
// _metadata file whose format or metadata version this build cannot read.
var ErrUnsupportedVersion = errors.New("unsupported version")

// ErrIncomplete is matched (with errors.Is) by the error for a checkpoint
// or savepoint directory that has no _metadata: it was never completed, or
// is still being written, or its deletion has begun.
var ErrIncomplete = errors.New("incomplete: no " + MetadataFile)

func encodeMetadata(m *checkpoint.Metadata) ([]byte, error) {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("storage: encode metadata: %w", err)
	}
	body = append(body, '\n')
	hdr, err := json.Marshal(metadataHeader{
		Format:  metadataFormat,
		Version: metadataFormatVersion,
		Size:    int64(len(body)),
		CRC32C:  fmt.Sprintf("%08x", crc32.Checksum(body, castagnoli)),
	})
	if err != nil {
		return nil, fmt.Errorf("storage: encode metadata header: %w", err)
	}
	out := make([]byte, 0, len(hdr)+1+len(body))
	out = append(out, hdr...)
	out = append(out, '\n')
	return append(out, body...), nil
}

// decodeMetadata parses and verifies a _metadata file; p names it in
// errors.
func decodeMetadata(data []byte, p string) (*checkpoint.Metadata, error) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return nil, &CorruptError{Path: p, Reason: fmt.Sprintf("no header line in %d bytes", len(data))}
	}
	var hdr metadataHeader
	if err := json.Unmarshal(data[:i], &hdr); err != nil {
		return nil, &CorruptError{Path: p, Reason: "header: " + err.Error()}
	}
	if hdr.Format != metadataFormat {
		return nil, &CorruptError{Path: p, Reason: fmt.Sprintf("header: format %q, want %q", hdr.Format, metadataFormat)}
	}
	if hdr.Version != metadataFormatVersion {
		return nil, fmt.Errorf("storage: %s: %w: file format version %d, this build reads %d",
			p, ErrUnsupportedVersion, hdr.Version, metadataFormatVersion)
	}
	body := data[i+1:]
	if int64(len(body)) != hdr.Size {
		return nil, sizeError(p, hdr.Size, int64(len(body)))
	}
	want, err := strconv.ParseUint(hdr.CRC32C, 16, 32)
	if err != nil {
		return nil, &CorruptError{Path: p, Reason: fmt.Sprintf("header: bad crc32c %q", hdr.CRC32C)}
	}
	if got := crc32.Checksum(body, castagnoli); got != uint32(want) {
		return nil, checksumError(p, uint32(want), got)
	}
	m := new(checkpoint.Metadata)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, &CorruptError{Path: p, Reason: "body: " + err.Error()}
	}
	if m.Version < 1 || m.Version > checkpoint.MetadataVersion {
		return nil, fmt.Errorf("storage: %s: %w: metadata version %d, this build reads 1 to %d",
			p, ErrUnsupportedVersion, m.Version, checkpoint.MetadataVersion)
	}
	return m, nil
}

// eachHandle calls fn for every state handle m references, stopping at
// the first error.
func eachHandle(m *checkpoint.Metadata, fn func(where string, h checkpoint.StateHandle) error) error {
	for _, op := range m.Operators {
		for i, st := range op.Subtasks {
			for j, h := range st.Keyed {
				if err := fn(fmt.Sprintf("operator %s subtask %d keyed state %d", op.UID, i, j), h); err != nil {
					return err
				}
			}
			for j, h := range st.Operator {
				if err := fn(fmt.Sprintf("operator %s subtask %d operator state %d", op.UID, i, j), h); err != nil {
					return err
				}
			}
			for j, h := range st.InputChannels {
				if err := fn(fmt.Sprintf("operator %s subtask %d channel state %d", op.UID, i, j), h); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkHandleShape checks what can be checked of a handle without storage.
func checkHandleShape(where string, h checkpoint.StateHandle) string {
	switch {
	case h.Size < 0:
		return fmt.Sprintf("%s: negative size %d", where, h.Size)
	case h.Path == "" && int64(len(h.Inline)) != h.Size:
		return fmt.Sprintf("%s: inline state of %d bytes, size says %d", where, len(h.Inline), h.Size)
	case h.Path == "" && crc32.Checksum(h.Inline, castagnoli) != h.CRC32C:
		return fmt.Sprintf("%s: inline state checksum mismatch: expected crc32c %08x, got %08x",
			where, h.CRC32C, crc32.Checksum(h.Inline, castagnoli))
	case h.Path != "" && len(h.Inline) > 0:
		return fmt.Sprintf("%s: both a path and inline bytes", where)
	case h.Path != "" && !validHandlePath(h.Path):
		return fmt.Sprintf("%s: invalid path %q", where, h.Path)
	}
	return ""
}

// validateForWrite checks metadata before it is written.
func validateForWrite(m *checkpoint.Metadata) error {
	if m.Version < 1 || m.Version > checkpoint.MetadataVersion {
		return fmt.Errorf("storage: metadata version %d: %w", m.Version, ErrUnsupportedVersion)
	}
	if m.CheckpointID < 0 {
		return fmt.Errorf("storage: negative checkpoint id %d", m.CheckpointID)
	}
	return eachHandle(m, func(where string, h checkpoint.StateHandle) error {
		if msg := checkHandleShape(where, h); msg != "" {
			return errors.New("storage: " + msg)
		}
		return nil
	})
}

// writeMetadata writes m as dirKey/_metadata and returns the file's path.
// It is the last file of a checkpoint or savepoint: only a complete
// write is ever visible under that name (see store.newWriter).
func writeMetadata(ctx context.Context, st *store, dirKey string, m *checkpoint.Metadata) (string, error) {
	if err := validateForWrite(m); err != nil {
		return "", err
	}
	data, err := encodeMetadata(m)
	if err != nil {
		return "", err
	}
	key := dirKey + "/" + MetadataFile
	w, err := st.newWriter(ctx, key, "text/plain; charset=utf-8")
	if err != nil {
		return "", err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return "", st.opError("write", key, err)
	}
	if err := w.Close(); err != nil {
		return "", st.opError("write", key, err)
	}
	return st.loc.display(key), nil
}

// readSnapshot reads and verifies the checkpoint or savepoint in directory
// dirKey: the _metadata file's version and checksum, and that every state
// file it references exists with the recorded size, or with deep, also
// has the recorded checksum. It returns the metadata and the key prefix
// its state paths are relative to: the directory's parent for a
// checkpoint (the job directory, so paths read "chk-7/..." or
// "shared/..."), the directory itself for a self-contained savepoint.
func readSnapshot(ctx context.Context, st *store, dirKey string, deep bool) (*checkpoint.Metadata, string, error) {
	metaKey := dirKey + "/" + MetadataFile
	data, err := st.readAll(ctx, metaKey)
	if isNotExist(err) {
		return nil, "", fmt.Errorf("storage: %s: %w", st.loc.display(dirKey), ErrIncomplete)
	}
	if err != nil {
		return nil, "", err
	}
	metaPath := st.loc.display(metaKey)
	m, err := decodeMetadata(data, metaPath)
	if err != nil {
		return nil, "", err
	}
	base := dirKey + "/"
	if m.Kind != checkpoint.KindSavepoint {
		base = parentKey(dirKey)
		if base != "" {
			base += "/"
		}
	}
	if id, ok := parseCheckpointDir(path.Base(dirKey)); ok && (m.Kind != checkpoint.KindCheckpoint || m.CheckpointID != id) {
		return nil, "", &CorruptError{Path: metaPath, Reason: fmt.Sprintf("describes %s %d, not checkpoint %d", m.Kind, m.CheckpointID, id)}
	}
	if err := checkState(ctx, st, dirKey, base, m, metaPath, deep); err != nil {
		// A checkpoint that retention discards while it is read loses its
		// _metadata first and then its files: what is missing then is not
		// damage but a checkpoint that is no longer complete.
		if _, serr := st.stat(ctx, metaKey); isNotExist(serr) {
			return nil, "", fmt.Errorf("storage: %s: discarded while it was read: %w", st.loc.display(dirKey), ErrIncomplete)
		}
		return nil, "", err
	}
	return m, base, nil
}

// checkState checks the state m references; see readSnapshot.
func checkState(ctx context.Context, st *store, dirKey, base string, m *checkpoint.Metadata, metaPath string, deep bool) error {
	// One listing finds the sizes of the directory's own files; anything
	// else (shared state) is looked up one by one.
	objs, err := st.list(ctx, dirKey+"/", false)
	if err != nil {
		return err
	}
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		sizes[o.Key] = o.Size
	}
	return eachHandle(m, func(where string, h checkpoint.StateHandle) error {
		if msg := checkHandleShape(where, h); msg != "" {
			return &CorruptError{Path: metaPath, Reason: msg}
		}
		if h.Path == "" {
			return nil
		}
		key := base + h.Path
		size, ok := sizes[key]
		if !ok {
			o, err := st.stat(ctx, key)
			if isNotExist(err) {
				return &CorruptError{Path: st.loc.display(key), Reason: fmt.Sprintf("state file missing (%s)", where)}
			}
			if err != nil {
				return err
			}
			size = o.Size
		}
		if size != h.Size {
			return sizeError(st.loc.display(key), h.Size, size)
		}
		if !deep {
			return nil
		}
		r, err := openState(ctx, st, base, h)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = io.Copy(io.Discard, r)
		return err
	})
}
