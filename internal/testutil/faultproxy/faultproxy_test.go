package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echo is a target that answers every line with the same line, and
// records each line it received.
type echo struct {
	lis net.Listener
	mu  sync.Mutex
	got []string
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{lis: lis}
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.mu.Lock()
					e.got = append(e.got, line)
					e.mu.Unlock()
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echo) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes line and reads the answer, within d.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestForwards(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.lis.Addr().String())
	c, r := dial(t, p.Addr())
	for _, line := range []string{"one\n", "two\n"} {
		got, err := roundTrip(c, r, line, 5*time.Second)
		if err != nil || got != line {
			t.Fatalf("round trip of %q: %q, %v", line, got, err)
		}
	}
}

// TestBlockCutsLiveConnections: a connection forwarded before Block is
// closed by it.
func TestBlockCutsLiveConnections(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.lis.Addr().String())
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(c, r, "before\n", 5*time.Second); err != nil || got != "before\n" {
		t.Fatalf("round trip before Block: %q, %v", got, err)
	}
	p.Block()
	if !p.Blocked() {
		t.Fatal("Blocked is false after Block")
	}
	// The proxy closed its end: the read ends with EOF (or a reset), not
	// with the deadline and not with an answer.
	got, err := roundTrip(c, r, "after\n", 5*time.Second)
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("after Block a live connection answered %q, %v; want it closed", got, err)
	}
	for _, line := range e.received() {
		if line == "after\n" {
			t.Fatal("a line written after Block reached the target")
		}
	}
}

// TestBlockHoldsNewConnections: a connection made while blocked is
// accepted but reaches the target only once unblocked, and what its
// client wrote meanwhile is delivered then.
func TestBlockHoldsNewConnections(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.lis.Addr().String())
	p.Block()
	c, r := dial(t, p.Addr()) // accepted (held), so the dial succeeds
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	// Nothing comes back while blocked: the read runs into its deadline.
	if err := c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("while blocked a held connection read %q, %v; want the read deadline", got, err)
	}
	if got := e.received(); len(got) != 0 {
		t.Fatalf("while blocked the target received %q", got)
	}
	p.Unblock()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Unblock the held connection read %q, %v; want the line it wrote while blocked", got, err)
	}
	// New connections are forwarded again, and so are live ones.
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "new\n", 5*time.Second); err != nil || got != "new\n" {
		t.Fatalf("round trip after Unblock: %q, %v", got, err)
	}
	if got, err := roundTrip(c, r, "again\n", 5*time.Second); err != nil || got != "again\n" {
		t.Fatalf("second round trip of the formerly held connection: %q, %v", got, err)
	}
}

// TestBlockAgain: a link can be cut and restored more than once.
func TestBlockAgain(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.lis.Addr().String())
	for i := range 3 {
		c, r := dial(t, p.Addr())
		if got, err := roundTrip(c, r, "x\n", 5*time.Second); err != nil || got != "x\n" {
			t.Fatalf("round %d: round trip: %q, %v", i, got, err)
		}
		p.Block()
		if got, err := roundTrip(c, r, "y\n", 5*time.Second); err == nil {
			t.Fatalf("round %d: a live connection answered %q after Block", i, got)
		}
		p.Unblock()
	}
}

func TestTargetDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := lis.Addr().String()
	lis.Close() // nothing listens there now
	p := startProxy(t, target)
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(c, r, "x\n", 5*time.Second); err == nil {
		t.Fatalf("a connection to a target that is down answered %q", got)
	}
}

func TestClose(t *testing.T) {
	e := startEcho(t)
	p, err := New("127.0.0.1:0", e.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	live, r := dial(t, p.Addr())
	if got, err := roundTrip(live, r, "x\n", 5*time.Second); err != nil || got != "x\n" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	p.Block()
	held, hr := dial(t, p.Addr())
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for name, cr := range map[string]struct {
		c net.Conn
		r *bufio.Reader
	}{"live": {live, r}, "held": {held, hr}} {
		if got, err := roundTrip(cr.c, cr.r, "y\n", 5*time.Second); err == nil {
			t.Errorf("%s connection answered %q after Close", name, got)
		}
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the proxy's address accepts connections after Close")
	}
}
