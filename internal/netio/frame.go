// Package netio carries the data plane between task-manager processes: one
// TCP connection per pair of endpoints multiplexes many logical channels,
// each a sequence of record batches and markers (watermark, barrier,
// idle/active, end-of-data, end) with credit-based flow control.
//
// Records cross the connection only through a codec.Codec: SendBatch
// encodes a batch into one frame and DecodeBatch turns a received data
// frame back into values.
//
// # Frame format
//
// Every frame is
//
//	length  uint32 big-endian, bytes in body (at least 5)
//	crc     uint32 big-endian, CRC-32C (Castagnoli) of body
//	body    channel uint32 big-endian | kind uint8 | payload
//
// and the payload depends on the kind:
//
//	data         uvarint record count, then the records laid end to end by a codec
//	watermark    int64 big-endian
//	barrier      checkpoint id int64, trigger timestamp int64 (both big-endian), flags uint8 (bit 0: savepoint,
//	             bit 1: unaligned, bit 2: a savepoint that stops the job, bit 3: and drains it first), aligned-checkpoint timeout int64 big-endian (nanoseconds), and on a
//	             savepoint's barrier the savepoint's directory: the rest of the payload, UTF-8
//	idle, active, end-of-data, end, state-end
//	             empty
//	credit       uint32 big-endian, the number of further data frames the receiver accepts (> 0)
//	limit        uint32 big-endian, the most records the receiver wants in flight on the channel (0: no limit)
//
// A frame whose checksum, length or payload does not verify is corrupt; a
// connection that reads one, or ends inside a frame, fails with an error
// wrapping ErrCorrupt or ErrTruncated and closes.
package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf8"
)

// Kind says what a frame carries.
type Kind uint8

const (
	// KindData is a batch of encoded records. It consumes one credit.
	KindData Kind = iota + 1
	// KindWatermark carries an event-time watermark.
	KindWatermark
	// KindBarrier carries a checkpoint barrier.
	KindBarrier
	// KindIdle says the producer's input went idle: exclude it from
	// watermark computation.
	KindIdle
	// KindActive says the producer's input is active again.
	KindActive
	// KindEndOfData says no more records follow, though the producer still
	// takes part in checkpoints.
	KindEndOfData
	// KindEnd closes the channel: nothing follows, not even barriers.
	KindEnd
	// KindCredit grants the sender of a channel more data frames. It flows
	// from receiver to sender and is never handed to the application.
	KindCredit
	// KindStateEnd ends the channel state of the unaligned barrier before
	// it: every frame between the two was sent before the barrier's
	// producer took its snapshot, and overtaken by the barrier.
	KindStateEnd
	// KindLimit tells the sender of a channel the most records its
	// receiver wants in flight (buffer debloating): the sender's side
	// keeps its batches and its queue within it. It flows from receiver
	// to sender and is never handed to the application.
	KindLimit
)

var kindNames = [...]string{"", "data", "watermark", "barrier", "idle", "active", "end-of-data", "end", "credit", "state-end", "limit"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Barrier is a checkpoint barrier as it travels on the wire.
type Barrier struct {
	ID int64
	// Timestamp is when the checkpoint was triggered, in Unix nanoseconds.
	Timestamp int64
	Savepoint bool
	// Stop marks the savepoint of a stop-with-savepoint, Drain one that
	// ends event time first.
	Stop, Drain bool
	// Native asks a savepoint in the backends' own format.
	Native bool
	// Unaligned marks an unaligned barrier; AlignedTimeout, on an aligned
	// one, is how long after the trigger it switches to unaligned (0:
	// never).
	Unaligned      bool
	AlignedTimeout int64
	// Base is the checkpoint an incremental snapshot may build on (0:
	// none).
	Base int64
	// Target is a savepoint's directory, where its state goes; only a
	// savepoint's barrier has one.
	Target string
}

// Frame is one decoded frame. Only the fields of its Kind are set.
type Frame struct {
	Channel uint32
	Kind    Kind
	// Count is the number of records in Data (KindData).
	Count int
	// Data holds Count records encoded back to back (KindData).
	Data      []byte
	Watermark int64   // KindWatermark
	Barrier   Barrier // KindBarrier
	Credit    uint32  // KindCredit
	Limit     uint32  // KindLimit
}

const (
	headerSize = 8 // length + crc
	bodyMin    = 5 // channel + kind

	// DefaultMaxFrameSize bounds the body of a frame a connection accepts,
	// so a corrupt length cannot make the reader allocate without limit.
	DefaultMaxFrameSize = 64 << 20
)

var (
	// ErrCorrupt is wrapped by errors for a frame that fails its checksum
	// or cannot be decoded.
	ErrCorrupt = errors.New("netio: corrupt frame")
	// ErrTruncated is wrapped by errors for input that ends inside a frame.
	ErrTruncated = errors.New("netio: truncated frame")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginFrame appends a header placeholder and the body's channel and kind;
// sealFrame fills in the header once the payload is appended.
func beginFrame(dst []byte, ch uint32, k Kind) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, ch)
	return append(dst, byte(k)), start
}

func sealFrame(dst []byte, start int) []byte {
	body := dst[start+headerSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// AppendFrame appends the encoding of f to dst.
func AppendFrame(dst []byte, f *Frame) []byte {
	dst, start := beginFrame(dst, f.Channel, f.Kind)
	switch f.Kind {
	case KindData:
		dst = binary.AppendUvarint(dst, uint64(f.Count))
		dst = append(dst, f.Data...)
	case KindWatermark:
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Watermark))
	case KindBarrier:
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Barrier.ID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Barrier.Timestamp))
		var flags byte
		if f.Barrier.Savepoint {
			flags |= 1
		}
		if f.Barrier.Unaligned {
			flags |= 2
		}
		if f.Barrier.Stop {
			flags |= 4
		}
		if f.Barrier.Drain {
			flags |= 8
		}
		if f.Barrier.Native {
			flags |= 16
		}
		dst = append(dst, flags)
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Barrier.AlignedTimeout))
		dst = binary.BigEndian.AppendUint64(dst, uint64(f.Barrier.Base))
		dst = append(dst, f.Barrier.Target...)
	case KindCredit:
		dst = binary.BigEndian.AppendUint32(dst, f.Credit)
	case KindLimit:
		dst = binary.BigEndian.AppendUint32(dst, f.Limit)
	}
	return sealFrame(dst, start)
}

// DecodeFrame decodes the frame at the start of src and reports the bytes
// it consumed. The frame's Data aliases src. It never panics: bad input
// yields an error wrapping ErrCorrupt or ErrTruncated.
func DecodeFrame(src []byte) (Frame, int, error) {
	if len(src) < headerSize {
		return Frame{}, 0, fmt.Errorf("%w: header needs %d bytes, have %d", ErrTruncated, headerSize, len(src))
	}
	n := binary.BigEndian.Uint32(src)
	if n < bodyMin {
		return Frame{}, 0, fmt.Errorf("%w: body length %d", ErrCorrupt, n)
	}
	if uint64(len(src)-headerSize) < uint64(n) {
		return Frame{}, 0, fmt.Errorf("%w: body needs %d bytes, have %d", ErrTruncated, n, len(src)-headerSize)
	}
	body := src[headerSize : headerSize+int(n)]
	f, err := decodeBody(binary.BigEndian.Uint32(src[4:]), body)
	if err != nil {
		return Frame{}, 0, err
	}
	return f, headerSize + int(n), nil
}

// readFrame reads one frame from r into a freshly allocated body, so a data
// frame's records can be handed to the application. It returns io.EOF only
// when r ends exactly between frames.
//
// hdr keeps the frame's header: frameBodySize(hdr) is its body's size.
func readFrame(r io.Reader, hdr *[headerSize]byte, maxBody int) (Frame, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Frame{}, fmt.Errorf("%w: inside the header", ErrTruncated)
		}
		return Frame{}, err
	}
	n := uint32(frameBodySize(hdr))
	if n < bodyMin || uint64(n) > uint64(maxBody) {
		return Frame{}, fmt.Errorf("%w: body length %d outside [%d, %d]", ErrCorrupt, n, bodyMin, maxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Frame{}, fmt.Errorf("%w: body of %d bytes", ErrTruncated, n)
		}
		return Frame{}, err
	}
	return decodeBody(binary.BigEndian.Uint32(hdr[4:]), body)
}

// frameBodySize returns the body size a frame header gives.
func frameBodySize(hdr *[headerSize]byte) int { return int(binary.BigEndian.Uint32(hdr[:])) }

// decodeBody verifies body against its checksum and decodes it.
func decodeBody(sum uint32, body []byte) (Frame, error) {
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Frame{}, fmt.Errorf("%w: checksum %08x, frame says %08x", ErrCorrupt, got, sum)
	}
	f := Frame{Channel: binary.BigEndian.Uint32(body), Kind: Kind(body[4])}
	p := body[bodyMin:]
	want := -1 // exact payload size for fixed-size kinds
	switch f.Kind {
	case KindData:
		c, n := binary.Uvarint(p)
		if n <= 0 {
			return Frame{}, fmt.Errorf("%w: bad record count on channel %d", ErrCorrupt, f.Channel)
		}
		// Every codec writes at least one byte per record.
		if c > uint64(len(p)-n) {
			return Frame{}, fmt.Errorf("%w: %d records in %d bytes on channel %d", ErrCorrupt, c, len(p)-n, f.Channel)
		}
		f.Count, f.Data = int(c), p[n:]
	case KindWatermark:
		want = 8
		if len(p) == want {
			f.Watermark = int64(binary.BigEndian.Uint64(p))
		}
	case KindBarrier:
		want = 33
		if len(p) > want && p[16]&1 != 0 {
			want = len(p) // a savepoint's directory follows
		}
		if len(p) == want {
			// Unknown bits, an unaligned savepoint, a stop without a
			// savepoint, a drain without a stop, a format without a
			// savepoint.
			if fl := p[16]; fl&^31 != 0 || fl&3 == 3 || fl&5 == 4 || fl&12 == 8 || fl&17 == 16 {
				return Frame{}, fmt.Errorf("%w: barrier flags %#x", ErrCorrupt, p[16])
			}
			if !utf8.Valid(p[33:]) {
				return Frame{}, fmt.Errorf("%w: a savepoint directory that is not UTF-8", ErrCorrupt)
			}
			f.Barrier = Barrier{
				ID:             int64(binary.BigEndian.Uint64(p)),
				Timestamp:      int64(binary.BigEndian.Uint64(p[8:])),
				Savepoint:      p[16]&1 != 0,
				Unaligned:      p[16]&2 != 0,
				Stop:           p[16]&4 != 0,
				Drain:          p[16]&8 != 0,
				Native:         p[16]&16 != 0,
				AlignedTimeout: int64(binary.BigEndian.Uint64(p[17:])),
				Base:           int64(binary.BigEndian.Uint64(p[25:])),
				Target:         string(p[33:]),
			}
		}
	case KindIdle, KindActive, KindEndOfData, KindEnd, KindStateEnd:
		want = 0
	case KindCredit:
		want = 4
		if len(p) == want {
			f.Credit = binary.BigEndian.Uint32(p)
			if f.Credit == 0 {
				return Frame{}, fmt.Errorf("%w: zero credit on channel %d", ErrCorrupt, f.Channel)
			}
		}
	case KindLimit:
		want = 4
		if len(p) == want {
			f.Limit = binary.BigEndian.Uint32(p)
		}
	default:
		return Frame{}, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, body[4])
	}
	if want >= 0 && len(p) != want {
		return Frame{}, fmt.Errorf("%w: %v payload of %d bytes, want %d", ErrCorrupt, f.Kind, len(p), want)
	}
	return f, nil
}
