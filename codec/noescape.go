//go:build !race && !msan && !asan

package codec

import "unsafe"

// noescape hides p from escape analysis. The compiled plans call through
// function values, which makes the compiler assume their pointer arguments
// escape and move every encoded value to the heap. The plans never retain
// the pointer they are given (they only read from it, or write decoded
// values into it) and never store it in heap memory, so the value may stay
// on the stack. (A heap object pointing into a stack would dangle when the
// stack grows and moves.) Plans that call user methods are excluded (see
// compiledCodec.opaque).
//
// The pointer round-trips through a uintptr variable read back as a
// pointer. Nothing between the two may grow the stack, which would move
// it without updating the integer: in builds that instrument pointer
// conversions (checkptr, on with -race, -msan and -asan) the
// instrumentation is such a call, so there noescape_checkptr.go's
// version, which is not instrumented, is used instead.
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}
