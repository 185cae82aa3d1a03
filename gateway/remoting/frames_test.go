package remoting

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// stall opens a raw connection that announces a frame of n bytes and
// sends only the first sent of them (written in the background: a server
// that does not read them may keep the write from finishing).
func (e *env) stall(n, sent int) net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.s.Addr())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	b := binary.BigEndian.AppendUint32(nil, uint32(n))
	b = append(b, bytes.Repeat([]byte{0}, sent)...)
	go func() { _, _ = c.Write(b) }()
	return c
}

// Connections that announce large frames and stop hold only the bytes
// they sent: a good client is served at once, though together they
// announced many times the budget.
func TestStalledFramesDoNotStarve(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.MaxBytesInFlight = 1 << 20 })
	good := e.dial()
	e.createTopic(good, "T", 1, "")
	for range 16 {
		e.stall(8<<20, 1)
	}
	eventually(t, "the stalled frames to be read", func() bool { return e.s.budget.InUse() == 16 })
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	r, err := good.Invoke(ctx, &codec.Command{Code: reqSendMessage, Body: make([]byte, 256<<10), Ext: sendExt("T")})
	if err != nil || r.Code != codeSuccess {
		t.Fatalf("a good send beside stalled frames: %+v %v", r, err)
	}
}

// A frame whose body does not arrive within FrameTimeout releases what it
// reserved and closes its connection; the log says so once per interval.
func TestFrameTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.FrameTimeout = 200 * time.Millisecond })
	var conns []net.Conn
	for range 3 {
		conns = append(conns, e.stall(1<<20, 100))
	}
	for _, c := range conns {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("a connection with a stalled frame: %v, want closed", err)
		}
	}
	eventually(t, "the reservations released", func() bool { return e.s.budget.InUse() == 0 })
	if n := strings.Count(e.logs.String(), "did not arrive in time"); n != 1 {
		t.Fatalf("%d log lines for 3 timed-out frames, want 1 (rate-limited)", n)
	}
	c := e.dial()
	e.createTopic(c, "T", 1, "")
}

// With auth on, frames of connections that have not authenticated a
// request reserve in their own pool: unsigned traffic filling it does not
// hold the room of signed clients.
func TestUnauthenticatedFramesOwnPool(t *testing.T) {
	e := newEnv(t, withAuth(t), func(c *Config, _ *broker.Config) {
		c.MaxBytesInFlight = 2 << 20
		c.UnauthBytesInFlight = 1 << 20
	})
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "") // authenticates ops's connection
	for range 4 {
		e.stall(4<<20, 512<<10)
	}
	eventually(t, "the unsigned frames to fill their pool", func() bool { return e.s.unauth.InUse() == 1<<20 })
	if e.s.budget.InUse() != 0 {
		t.Fatalf("unsigned frames hold %d bytes of the main budget", e.s.budget.InUse())
	}
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	r, err := ops.Invoke(ctx, &codec.Command{Code: reqSendMessage, Body: make([]byte, 1<<20), Ext: sendExt("orders")})
	if err != nil || r.Code != codeSuccess {
		t.Fatalf("signed send beside a full unsigned pool: %+v %v", r, err)
	}
}

// With auth on, unsigned connections that keep the unsigned pool full of
// large frames do not hold up the first request of a new signed client:
// small frames have a lane of their own. (Without it the request waits
// for a large frame to finish or time out.)
func TestNewSignedClientBesideFullUnsignedPool(t *testing.T) {
	e := newEnv(t, withAuth(t), func(c *Config, _ *broker.Config) {
		c.UnauthBytesInFlight = 2 << 20
		c.FrameTimeout = time.Minute
	})
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	for range 4 {
		e.stall(1<<20, 1<<20-1) // all but the last byte: the frame holds 1 MiB
	}
	full := int64(2 * (1<<20 - 1)) // two frames but their last bytes; the others wait for room
	eventually(t, "the unsigned frames to fill their pool", func() bool { return e.s.unauth.InUse() == full })
	fresh := e.dialSigned("ops", "ops-secret", codec.JSON)
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	r, err := fresh.Invoke(ctx, &codec.Command{Code: reqSendMessage, Body: []byte("first"), Ext: sendExt("orders")})
	if err != nil || r.Code != codeSuccess {
		t.Fatalf("a new signed client's first send beside a full unsigned pool: %+v %v", r, err)
	}
	if e.s.unauth.InUse() != full {
		t.Fatalf("the unsigned pool holds %d bytes: the large frames were not what was waited for", e.s.unauth.InUse())
	}
}

// One address cannot hold the whole unsigned pool with large frames: a
// large unsigned frame from another address is read beside them.
func TestUnsignedPoolSharedByAddress(t *testing.T) {
	e := newEnv(t, withAuth(t), func(c *Config, _ *broker.Config) {
		c.MaxFrame = 1 << 20
		c.UnauthBytesInFlight = 2 << 20
		c.FrameTimeout = time.Minute
	})
	for range 4 {
		e.stall(1<<20, 1<<20-1)
	}
	// Its share is full: one frame holds the bytes it read (1 MiB but a
	// byte), or its whole size when it waited for room and took it first.
	eventually(t, "127.0.0.1's frames to fill its share", func() bool { return e.s.unauth.Held(netip.MustParsePrefix("127.0.0.1/32")) >= 1<<20-1 })
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	other, err := d.Dial("tcp", e.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		_, _ = other.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 1<<20-1)...))
	}()
	eventually(t, "another address's frame to be read", func() bool { return e.s.unauth.Held(netip.MustParsePrefix("127.0.0.2/32")) >= 1<<20-1 })
}

// Malformed frames on many connections: each is refused and closed, and
// the log gets one line per interval, not one per frame.
func TestMalformedFramesLogRateLimited(t *testing.T) {
	e := newEnv(t)
	for range 20 {
		c := e.stall(2, 0) // length below 4
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("malformed frame: %v, want an error answer and EOF", err)
		}
	}
	if n := strings.Count(e.logs.String(), "malformed frame; closing"); n != 1 {
		t.Fatalf("%d log lines for 20 malformed frames, want 1", n)
	}
	e.createTopic(e.dial(), "T", 1, "")
}

// Large frames that arrive together on many connections, more than the
// budget holds, are all served: none waits for room while holding part
// of it.
func TestConcurrentLargeFramesAllServed(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.MaxBytesInFlight = 1 << 20 })
	e.createTopic(e.dial(), "T", 1, "")
	errs := make(chan error, 6)
	for range 6 {
		c := e.dial()
		go func() {
			r, err := c.Invoke(e.ctx, &codec.Command{Code: reqSendMessage, Body: make([]byte, 900<<10), Ext: sendExt("T")})
			if err == nil && r.Code != codeSuccess {
				err = errors.New(r.Remark)
			}
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
