package testutil

import "unsafe"

// DeepCallCopiesStack reports whether a call that takes a frame of 12 KiB
// made the runtime copy the calling goroutine's stack (to grow it): a
// local of the caller is elsewhere after the call.
func DeepCallCopiesStack() bool {
	var x byte
	before := uintptr(unsafe.Pointer(&x))
	x = frame12K()
	return uintptr(unsafe.Pointer(&x)) != before
}

//go:noinline
func frame12K() byte {
	var b [12 << 10]byte
	return keep(b[:])
}

//go:noinline
func keep(b []byte) byte { return b[len(b)-1] }

// OnNewGoroutine runs f on a goroutine of its own, which starts on a new
// stack, and returns what it returns.
func OnNewGoroutine[T any](f func() T) T {
	out := make(chan T, 1)
	go func() { out <- f() }()
	return <-out
}
