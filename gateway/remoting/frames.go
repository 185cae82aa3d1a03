package remoting

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/mqgate/mqgate/gateway/admission"
)

// Reading a frame holds memory only for bytes that arrived, reserved as
// they arrive:
//
//   - a frame's bytes are reserved as they arrive (a frame reserves at
//     most the pool's size in all); when there is no room, the frame
//     releases what it holds and waits for its whole size at once, so
//     that frames never wait for each other. Reservations are taken first
//     in the
//     connection's own budget (MaxConnBytesInFlight: one connection cannot
//     take the whole server's budget by pipelining), then in the server's
//     pool;
//   - with auth on, a connection that has not yet had a request
//     authenticated reserves in a pool of its own (UnauthBytesInFlight),
//     never in the budget of authenticated connections: unsigned traffic
//     cannot hold the room signed clients need. One client address may
//     hold at most half of that pool, and frames of at most
//     UnauthSmallFrame reserve in a lane of their own (UnauthSmallBytes):
//     a new client's first request, which is what authenticates its
//     connection, is small (a route, a heartbeat) and never waits behind
//     large unsigned frames, which a flood of them would otherwise keep
//     the pool full of;
//   - once its length is read, a frame must arrive within FrameTimeout
//     (time spent waiting for room not counted); a frame that does not
//     releases what it reserved and its connection is closed.

// frameFirstAlloc caps a frame buffer's first allocation; larger frames
// grow theirs as their bytes arrive.
const frameFirstAlloc = 64 << 10

// reserver is a pool a frame reserves in: a Budget, or a key's part of
// Shares (keyed).
type reserver interface {
	TryAcquire(n int64) bool
	Acquire(ctx context.Context, n int64) bool
	Release(n int64)
	Max() int64
}

// keyed is one client address's part of Shares.
type keyed struct {
	s   *admission.Shares[netip.Prefix]
	key netip.Prefix
}

func (k keyed) TryAcquire(n int64) bool                   { return k.s.TryAcquire(k.key, n) }
func (k keyed) Acquire(ctx context.Context, n int64) bool { return k.s.Acquire(ctx, k.key, n) }
func (k keyed) Release(n int64)                           { k.s.Release(k.key, n) }
func (k keyed) Max() int64                                { return k.s.Share() }

// frameHold is what one frame reserved, released when its request ends
// (or at once when the frame is not dispatched).
type frameHold struct {
	pool reserver
	conn *admission.Budget
	n    int64
}

func (h frameHold) release() {
	if h.n > 0 {
		h.pool.Release(h.n)
		h.conn.Release(h.n)
	}
}

// pool is the budget c's next frame, of n bytes, reserves in.
func (c *conn) pool(n int) reserver {
	switch {
	case c.s.cfg.Auth == nil || c.authed.Load():
		return c.s.budget
	case n <= c.s.cfg.UnauthSmallFrame:
		return c.s.unauthSmall
	}
	return keyed{c.s.unauth, addressShare(c.remote.Addr())}
}

// addressShare is the share of the unsigned pool a client address counts
// in: an IPv4 address, an IPv6 /64 (the socket's peer: a relay's greeting
// is a claim).
func addressShare(ip netip.Addr) netip.Prefix {
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// readFrame reads the n bytes of a frame after its length, reserving
// each part once it has arrived in the connection's read buffer (a sender
// that announces a large frame and stops holds only what it sent). On
// error what it reserved is released; an expired deadline is reported as
// errFrameTimeout.
func (c *conn) readFrame(br *bufio.Reader, n int) ([]byte, frameHold, error) {
	hold := frameHold{pool: c.pool(n), conn: c.budget}
	limit := min(int64(n), hold.pool.Max(), hold.conn.Max())
	deadline := time.Now().Add(c.s.cfg.FrameTimeout)
	fail := func(err error) ([]byte, frameHold, error) {
		hold.release()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = errFrameTimeout
		}
		return nil, frameHold{}, err
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return fail(err)
	}
	buf := make([]byte, 0, min(n, frameFirstAlloc))
	for len(buf) < n {
		if _, err := br.Peek(1); err != nil {
			return fail(err)
		}
		k := min(br.Buffered(), n-len(buf))
		if r := min(int64(k), limit-hold.n); r > 0 {
			if hold.conn.TryAcquire(r) {
				if hold.pool.TryAcquire(r) {
					hold.n += r
					r = 0
				} else {
					hold.conn.Release(r)
				}
			}
			if r > 0 {
				// No room: wait for the whole frame at once, holding
				// nothing meanwhile (frames that each held part of the
				// budget while waiting for more could wait for each other
				// forever).
				hold.release()
				hold.n = 0
				waited, ok := c.reserve(hold, limit)
				if !ok {
					return fail(context.Canceled)
				}
				hold.n = limit
				deadline = deadline.Add(waited)
				if err := c.nc.SetReadDeadline(deadline); err != nil {
					return fail(err)
				}
			}
		}
		if cap(buf)-len(buf) < k {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), len(buf)+k)))
			copy(nb, buf)
			buf = nb
		}
		if _, err := io.ReadFull(br, buf[len(buf):len(buf)+k]); err != nil {
			return fail(err)
		}
		buf = buf[:len(buf)+k]
	}
	return buf, hold, nil
}

// reserve takes r bytes in the connection's budget, then the pool, and
// says how long it waited for them; false when the connection closed
// first.
func (c *conn) reserve(h frameHold, r int64) (time.Duration, bool) {
	start := time.Now()
	if !h.conn.Acquire(c.ctx, r) {
		return 0, false
	}
	if !h.pool.Acquire(c.ctx, r) {
		h.conn.Release(r)
		return 0, false
	}
	return time.Since(start), true
}
