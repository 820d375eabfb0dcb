//go:build race || msan || asan

package codec

import "unsafe"

// noescape is noescape.go's, without checkptr's instrumentation: its
// check of the conversion is a call that may grow and move the stack
// while the address is held as an integer, which the move would leave
// pointing into the old, freed stack. Not instrumented, it cannot be
// inlined; these builds are for finding bugs, not for speed.
//
//go:nocheckptr
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}
