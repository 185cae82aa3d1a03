package grpcserver

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// BufferPool is the buffer pool mqgate gives grpc-go (the server option in
// New, and the process-wide default, which the proto codec uses: see
// SetDefaultBufferPool). It differs from grpc-go's default pool in two ways
// that matter for a message gateway:
//
//   - It does not clear a buffer when handing it out. grpc-go's default
//     clears the whole capacity on every Get; every user of the pool in
//     grpc-go (frame reads, message materialisation, marshaling) overwrites
//     exactly the length it asked for before reading it, so the clearing
//     only costs time. (grpc-go ships the same trade as its "dirty" pool. The
//     one case where clearing would matter is a message mutated while it is
//     marshaled, whose buffer could then carry stale bytes rather than
//     zeros; no handler shares a message it returns with another goroutine.)
//   - Its classes are every power of two from 256 B to 8 MiB. The default's
//     classes jump from 32 KiB to 1 MiB, so a 36 KiB batch of 32 messages
//     took (and cleared) a 1 MiB buffer.
//
// Measured in BenchmarkNodeSend (gateway/node); see docs/performance.md.
var BufferPool mem.BufferPool = &bufferPool{}

// SetDefaultBufferPool makes BufferPool grpc-go's process-wide default,
// which every gRPC server and client in the process, and the proto codec,
// take buffers from. grpc-go allows it only during initialisation: call it
// from an init function (cmd/mqgate does).
func SetDefaultBufferPool() { experimental.SetDefaultBufferPool(BufferPool) }

const (
	minClassShift = 8  // 256 B
	maxClassShift = 23 // 8 MiB: a 4 MiB body with room to spare; larger batches are allocated
)

type bufferPool struct {
	classes [maxClassShift - minClassShift + 1]sync.Pool
}

// class returns the index of the smallest class holding n bytes, or -1 when
// n is above the largest class.
func class(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(n - 1)) // 2^shift >= n
	if shift > maxClassShift {
		return -1
	}
	return shift - minClassShift
}

// Get returns a buffer of length n whose contents are unspecified.
func (p *bufferPool) Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minClassShift))
	return &b
}

// Put keeps buf for reuse when its capacity is exactly one of the classes'
// sizes (what Get handed out); other buffers are left to the GC.
func (p *bufferPool) Put(buf *[]byte) {
	c := cap(*buf)
	if c < 1<<minClassShift || c&(c-1) != 0 {
		return
	}
	if i := class(c); i >= 0 {
		p.classes[i].Put(buf)
	}
}
