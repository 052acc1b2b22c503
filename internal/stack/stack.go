// Package stack grows a goroutine's stack ahead of a deep call.
//
// A goroutine starts on a small stack (2 KiB, or the average the
// collector last measured) and the runtime doubles it when a call needs
// more. Each doubling copies the stack, and what a copy costs follows the
// frames on it: for every frame the runtime decodes the function's tables
// to find its pointers. A tool call runs on new goroutines (go-sdk's for
// the request, a job's for the query) through go-sdk, the validator and
// pgx, and doubled their stacks three or four times on the way down, each
// copy deep in that path: 146–181 K instructions of a point call went to
// copying stacks (callgrind), 25–95 K once both goroutines grow first.
package stack

// growFrame is the frame Grow takes: the runtime fits it by doubling the
// stack once, to 32 KiB from 2 KiB, while only a few frames are on it.
const growFrame = 16 << 10

// Grow makes the calling goroutine's stack hold a frame of 16 KiB beyond
// what it holds now, in one copy of the few frames then on it, and costs
// nothing on a stack already that large. Call it at the top of a
// goroutine that is about to go deep.
//
//go:noinline
func Grow() {
	var frame [growFrame]byte
	touch(frame[:])
}

// touch reads the frame so that the compiler keeps it.
//
//go:noinline
func touch(b []byte) byte { return b[len(b)-1] }
