package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Snapshot format, shared by keyed and operator state (version 1).
//
//	blob    = header block* end
//	header  = "weirstat" version:u8 kind:u8 len:uvarint payload crc
//	block   = 'B' id:uvarint len:uvarint payload crc
//	end     = 'E' blocks:uvarint crc
//	crc     = CRC-32C (Castagnoli), 4 bytes little-endian, of every byte
//	          of the section before it
//
// kind is 'K' for keyed state, 'D' for a delta of keyed state (the changes
// since an earlier snapshot, see delta.go) and 'O' for operator state. The header
// payload describes the states (see the keyed and operator snapshot
// writers); a keyed block holds one key group (id = key group), an
// operator block one state (id = its index in the header). A reader can
// skip blocks it does not want without decoding them, checks every
// section's checksum, and checks the block count at the end, so that
// neither a flipped bit nor a truncated file loads silently.

const (
	formatMagic   = "weirstat"
	formatVersion = 1

	blobKeyed    = 'K'
	blobOperator = 'O'
	// blobDelta is a keyed state's changes since an earlier snapshot
	// (delta.go).
	blobDelta = 'D'

	tagBlock = 'B'
	tagEnd   = 'E'

	// maxHeader bounds the header payload a reader accepts.
	maxHeader = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blobWriter writes the sections of a snapshot blob.
type blobWriter struct {
	w       *bufio.Writer
	n       int64
	err     error
	blocks  int
	scratch []byte
}

func newBlobWriter(w io.Writer) *blobWriter {
	return &blobWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (bw *blobWriter) write(p []byte) {
	if bw.err != nil {
		return
	}
	n, err := bw.w.Write(p)
	bw.n += int64(n)
	bw.err = err
}

// section writes head and payload followed by the CRC of both.
func (bw *blobWriter) section(head, payload []byte) {
	crc := crc32.Update(crc32.Update(0, castagnoli, head), castagnoli, payload)
	bw.write(head)
	bw.write(payload)
	bw.write(binary.LittleEndian.AppendUint32(bw.scratch[:0], crc))
}

func (bw *blobWriter) header(kind byte, payload []byte) {
	head := append([]byte(formatMagic), formatVersion, kind)
	head = binary.AppendUvarint(head, uint64(len(payload)))
	bw.section(head, payload)
}

// block writes one block and returns its offset in the blob.
func (bw *blobWriter) block(id int, payload []byte) int64 {
	off := bw.n
	var head [1 + 2*binary.MaxVarintLen64]byte
	h := append(head[:0], tagBlock)
	h = binary.AppendUvarint(h, uint64(id))
	h = binary.AppendUvarint(h, uint64(len(payload)))
	bw.section(h, payload)
	bw.blocks++
	return off
}

func (bw *blobWriter) end() (int64, error) {
	var head [1 + binary.MaxVarintLen64]byte
	h := append(head[:0], tagEnd)
	h = binary.AppendUvarint(h, uint64(bw.blocks))
	bw.section(h, nil)
	if bw.err == nil {
		bw.err = bw.w.Flush()
	}
	return bw.n, bw.err
}

// blobReader reads the sections of a snapshot blob, checking checksums.
type blobReader struct {
	r      *bufio.Reader
	crc    uint32
	blocks int
	done   bool
}

func newBlobReader(r io.Reader) *blobReader {
	return &blobReader{r: bufio.NewReaderSize(r, 64<<10)}
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func (br *blobReader) ReadByte() (byte, error) {
	c, err := br.r.ReadByte()
	if err == nil {
		br.crc = crc32.Update(br.crc, castagnoli, []byte{c})
	}
	return c, err
}

func (br *blobReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.crc = crc32.Update(br.crc, castagnoli, p[:n])
	return n, err
}

func (br *blobReader) uvarint(what string) (uint64, error) {
	var x uint64
	for i, s := 0, uint(0); i < binary.MaxVarintLen64; i, s = i+1, s+7 {
		c, err := br.ReadByte()
		if err != nil {
			return 0, readErr(what, err)
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
	}
	return 0, corrupt("bad varint in %s", what)
}

// readErr turns an I/O error while reading a section into a corruption
// error if the data ended early.
func readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated in %s", what)
	}
	return fmt.Errorf("state: reading %s: %w", what, err)
}

// payload reads n bytes. Large payloads are read into a growing buffer, so
// that a corrupt length cannot make the reader allocate more than the data
// that is actually there.
func (br *blobReader) payload(n uint64, what string) ([]byte, error) {
	if n <= 1<<20 {
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return nil, readErr(what, err)
		}
		return p, nil
	}
	var buf bytes.Buffer
	buf.Grow(1 << 20)
	if _, err := io.CopyN(&buf, br, int64(n)); err != nil {
		return nil, readErr(what, err)
	}
	return buf.Bytes(), nil
}

// checkCRC reads a section's CRC and compares it with what was read since
// the section began.
func (br *blobReader) checkCRC(what string) error {
	want := br.crc
	var b [4]byte
	if _, err := io.ReadFull(br.r, b[:]); err != nil {
		return readErr(what, err)
	}
	if got := binary.LittleEndian.Uint32(b[:]); got != want {
		return corrupt("%s: checksum mismatch (stored %#08x, computed %#08x)", what, got, want)
	}
	return nil
}

// header reads the header and returns its payload.
func (br *blobReader) header(kind byte) ([]byte, error) {
	p, _, err := br.readHeader(kind, kind)
	return p, err
}

func (br *blobReader) readHeader(kind, alt byte) ([]byte, byte, error) {
	br.crc = 0
	var head [len(formatMagic) + 2]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, 0, readErr("header", err)
	}
	if string(head[:len(formatMagic)]) != formatMagic {
		return nil, 0, corrupt("not a weir state snapshot (magic %q)", head[:len(formatMagic)])
	}
	if v := head[len(formatMagic)]; v != formatVersion {
		return nil, 0, corrupt("unsupported snapshot format version %d (this build reads %d)", v, formatVersion)
	}
	k := head[len(formatMagic)+1]
	if k != kind && k != alt {
		return nil, 0, corrupt("snapshot holds %s, want %s", blobKindName(k), blobKindName(kind))
	}
	n, err := br.uvarint("header")
	if err != nil {
		return nil, 0, err
	}
	if n > maxHeader {
		return nil, 0, corrupt("header of %d bytes", n)
	}
	p, err := br.payload(n, "header")
	if err != nil {
		return nil, 0, err
	}
	return p, k, br.checkCRC("header")
}

func blobKindName(k byte) string {
	switch k {
	case blobKeyed:
		return "keyed state"
	case blobOperator:
		return "operator state"
	case blobDelta:
		return "a delta of keyed state"
	}
	return fmt.Sprintf("kind %#x", k)
}

// next reads the next block and returns its id and payload; ok is false
// after the end section, whose block count it has verified.
func (br *blobReader) next() (id int, payload []byte, ok bool, err error) {
	if br.done {
		return 0, nil, false, nil
	}
	br.crc = 0
	tag, err := br.ReadByte()
	if err != nil {
		return 0, nil, false, readErr("block", err)
	}
	switch tag {
	case tagBlock:
		i, err := br.uvarint("block")
		if err != nil {
			return 0, nil, false, err
		}
		n, err := br.uvarint("block")
		if err != nil {
			return 0, nil, false, err
		}
		if i > 1<<31 {
			return 0, nil, false, corrupt("block id %d", i)
		}
		what := fmt.Sprintf("block %d", i)
		p, err := br.payload(n, what)
		if err != nil {
			return 0, nil, false, err
		}
		if err := br.checkCRC(what); err != nil {
			return 0, nil, false, err
		}
		br.blocks++
		return int(i), p, true, nil
	case tagEnd:
		n, err := br.uvarint("end")
		if err != nil {
			return 0, nil, false, err
		}
		if err := br.checkCRC("end"); err != nil {
			return 0, nil, false, err
		}
		if n != uint64(br.blocks) {
			return 0, nil, false, corrupt("end says %d blocks, read %d", n, br.blocks)
		}
		// Read to the end of the source: a blob ends with its end
		// section, and a source that verifies what it read as it
		// reaches its end (checkpoint storage's readers) has then done
		// so before anything is loaded.
		switch _, err := br.r.ReadByte(); {
		case err == nil:
			return 0, nil, false, corrupt("bytes after the end section")
		case !errors.Is(err, io.EOF):
			return 0, nil, false, fmt.Errorf("state: reading past the end section: %w", err)
		}
		br.done = true
		return 0, nil, false, nil
	}
	return 0, nil, false, corrupt("unknown section tag %#x after %d blocks", tag, br.blocks)
}

// decoder reads the fields of a payload whose checksum has been verified,
// still checking every length against the bytes left.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = corrupt("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// int reads a uvarint that must be at most limit.
func (d *decoder) int(limit int, what string) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(limit) {
		d.err = corrupt("%s %d exceeds %d", what, v, limit)
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)) {
		d.err = corrupt("length %d exceeds the %d bytes left", v, len(d.b))
	}
	if d.err != nil {
		return nil
	}
	n := int(v)
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = corrupt("truncated payload")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func appendBytes(dst, p []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p)))
	return append(dst, p...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
