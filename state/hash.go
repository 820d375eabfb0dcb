package state

import (
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"

	"github.com/weirstream/weir/codec"
)

// HasherFor returns the key hash function for K used to assign keys to key
// groups. The hash is a pure function of the key's value: it is the same in
// every process, on every platform and after every restart (never a
// randomly seeded hash such as hash/maphash), because the key group of a key
// decides which subtask restores its state from a checkpoint.
//
// Keys whose underlying type is a string, an integer, a bool or a float are
// hashed directly from their value, without allocating; equal integer values
// of different widths hash alike. Other keys (structs, arrays) are hashed
// from their codec.For encoding; HasherFor panics if K has none. The
// function is chosen once per call, so call HasherFor once and keep the
// result.
//
// The result is mixed with a MurmurHash finalizer, so KeyGroupFor can take
// it modulo the number of key groups.
func HasherFor[K comparable]() func(K) uint32 {
	if h := scalarHasher[K](); h != nil {
		return h
	}
	c, err := codec.For[K]()
	if err != nil {
		panic(fmt.Sprintf("state: no hasher for key type %v: %v", reflect.TypeFor[K](), err))
	}
	return HasherFromCodec(c)
}

// HasherFromCodec returns a hash function that hashes the bytes c appends
// for a key. The encoding must be deterministic (equal keys encode equally),
// which holds for every codec.For codec of a comparable type.
func HasherFromCodec[K comparable](c codec.Codec[K]) func(K) uint32 {
	pool := sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}
	return func(k K) uint32 {
		bp := pool.Get().(*[]byte)
		b := c.Append((*bp)[:0], k)
		h := fold(hashString(unsafe.String(unsafe.SliceData(b), len(b))))
		*bp = b
		pool.Put(bp)
		return h
	}
}

// scalarHasher returns a hasher specialised to K's underlying kind, or nil
// if K is not a scalar. Each closure reads the key through an unsafe pointer
// of its underlying type, which is valid for any named type with that
// underlying type.
func scalarHasher[K comparable]() func(K) uint32 {
	switch reflect.TypeFor[K]().Kind() {
	case reflect.String:
		return func(k K) uint32 { return fold(hashString(*(*string)(unsafe.Pointer(&k)))) }
	case reflect.Int:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*int)(unsafe.Pointer(&k))))) }
	case reflect.Int8:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*int8)(unsafe.Pointer(&k))))) }
	case reflect.Int16:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*int16)(unsafe.Pointer(&k))))) }
	case reflect.Int32:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*int32)(unsafe.Pointer(&k))))) }
	case reflect.Int64:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*int64)(unsafe.Pointer(&k))))) }
	case reflect.Uint:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*uint)(unsafe.Pointer(&k))))) }
	case reflect.Uint8:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*uint8)(unsafe.Pointer(&k))))) }
	case reflect.Uint16:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*uint16)(unsafe.Pointer(&k))))) }
	case reflect.Uint32:
		return func(k K) uint32 { return fold(fmix64(uint64(*(*uint32)(unsafe.Pointer(&k))))) }
	case reflect.Uint64:
		return func(k K) uint32 { return fold(fmix64(*(*uint64)(unsafe.Pointer(&k)))) }
	case reflect.Bool:
		return func(k K) uint32 {
			if *(*bool)(unsafe.Pointer(&k)) {
				return fold(fmix64(1))
			}
			return fold(fmix64(0))
		}
	case reflect.Float32:
		return func(k K) uint32 { return fold(fmix64(floatBits(float64(*(*float32)(unsafe.Pointer(&k)))))) }
	case reflect.Float64:
		return func(k K) uint32 { return fold(fmix64(floatBits(*(*float64)(unsafe.Pointer(&k))))) }
	}
	return nil
}

// floatBits returns the bits of f, with -0 hashed as +0 since they are
// equal keys.
func floatBits(f float64) uint64 {
	if f == 0 {
		return 0
	}
	return math.Float64bits(f)
}

// fmix64 is MurmurHash3's 64-bit finalizer (every input bit affects every
// output bit), applied after adding a constant so that 0 is not a fixed
// point.
func fmix64(k uint64) uint64 {
	k += 0x9e3779b97f4a7c15
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

func fold(h uint64) uint32 { return uint32(h ^ h>>32) }

// hashString is MurmurHash64A with a fixed seed, reading 8 bytes at a time
// in little-endian order regardless of the platform's byte order.
func hashString(s string) uint64 {
	const (
		m    = 0xc6a4a7935bd1e995
		r    = 47
		seed = 0x9747b28c
	)
	h := uint64(seed) ^ uint64(len(s))*m
	for len(s) >= 8 {
		k := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		s = s[8:]
	}
	if len(s) > 0 {
		var k uint64
		for i := len(s) - 1; i >= 0; i-- {
			k = k<<8 | uint64(s[i])
		}
		h ^= k
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}
