package codec

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"testing"
)

var benchSmall = Small{Name: "tenant-0042", Count: 1234, Sum: 987654321, Shard: 17, Active: true}

// BenchmarkSmallStruct measures one encode plus one decode of a five-field
// struct with each encoding.
func BenchmarkSmallStruct(b *testing.B) {
	b.Run("codec.For", func(b *testing.B) {
		c := MustFor[Small]()
		buf := c.Append(nil, benchSmall)
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			buf = c.Append(buf[:0], benchSmall)
			if _, _, err := c.Decode(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gob-stream", func(b *testing.B) {
		// A long-lived encoder and decoder: type information is sent once,
		// gob's best case.
		var buf bytes.Buffer
		enc, dec := gob.NewEncoder(&buf), gob.NewDecoder(&buf)
		var out Small
		b.ReportAllocs()
		for b.Loop() {
			if err := enc.Encode(&benchSmall); err != nil {
				b.Fatal(err)
			}
			if err := dec.Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gob-per-record", func(b *testing.B) {
		// A fresh encoder per record, as when each record stands alone.
		var out Small
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := gob.NewEncoder(&buf).Encode(&benchSmall); err != nil {
				b.Fatal(err)
			}
			if err := gob.NewDecoder(&buf).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		var out Small
		b.ReportAllocs()
		for b.Loop() {
			buf, err := json.Marshal(&benchSmall)
			if err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(buf, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSmallStructEncode(b *testing.B) {
	c := MustFor[Small]()
	buf := c.Append(nil, benchSmall)
	b.ReportAllocs()
	for b.Loop() {
		buf = c.Append(buf[:0], benchSmall)
	}
}

func BenchmarkSmallStructDecode(b *testing.B) {
	c := MustFor[Small]()
	buf := c.Append(nil, benchSmall)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	c := String()
	buf := c.Append(nil, "user-12345")
	b.ReportAllocs()
	for b.Loop() {
		buf = c.Append(buf[:0], "user-12345")
		if _, _, err := c.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
