package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

var quiet = slog.New(slog.DiscardHandler)

// accepted serves l, handing every accepted connection to the channel.
func accepted(t *testing.T, l *Listener) <-chan net.Conn {
	t.Helper()
	ch := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}
	}()
	t.Cleanup(func() { l.Close() })
	return ch
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// dialFrom dials addr from the local address ip (loopback addresses other
// than 127.0.0.1 stand for other clients).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c (within 5 s).
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func waitAccept(t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

func TestCapAndAddressShare(t *testing.T) {
	p := NewPool(0)
	l := p.Wrap(listen(t), Options{Logger: quiet, Name: "test", Max: 4, AddressShare: 2})
	ch := accepted(t, l)
	addr := l.Addr().String()
	// 127.0.0.1 takes its share; a third connection from it is refused.
	var held []net.Conn
	for range 2 {
		dialFrom(t, "127.0.0.1", addr)
		held = append(held, waitAccept(t, ch))
	}
	if c := dialFrom(t, "127.0.0.1", addr); !closedByServer(c) {
		t.Fatal("a connection over its address's share was not closed")
	}
	if l.Refused(ReasonAddress) != 1 {
		t.Fatalf("refused for the address share: %d, want 1", l.Refused(ReasonAddress))
	}
	// Another address still connects, up to the listener's cap.
	for range 2 {
		dialFrom(t, "127.0.0.2", addr)
		held = append(held, waitAccept(t, ch))
	}
	if c := dialFrom(t, "127.0.0.3", addr); !closedByServer(c) {
		t.Fatal("a connection over the listener's cap was not closed")
	}
	if l.Refused(ReasonCap) != 1 || l.Open() != 4 || p.Open() != 4 {
		t.Fatalf("refused for the cap %d, open %d, pool %d", l.Refused(ReasonCap), l.Open(), p.Open())
	}
	// Closing gives the slot back (once, however often it is closed).
	held[0].Close()
	held[0].Close()
	if l.Open() != 3 || p.Open() != 3 {
		t.Fatalf("open %d, pool %d after a close", l.Open(), p.Open())
	}
	dialFrom(t, "127.0.0.1", addr)
	waitAccept(t, ch)
}

func TestPoolBoundsEveryListener(t *testing.T) {
	p := NewPool(3)
	a := p.Wrap(listen(t), Options{Logger: quiet, Name: "a", Max: 10})
	b := p.Wrap(listen(t), Options{Logger: quiet, Name: "b", Max: 10})
	cha, chb := accepted(t, a), accepted(t, b)
	for range 2 {
		dialFrom(t, "127.0.0.1", a.Addr().String())
		waitAccept(t, cha)
	}
	dialFrom(t, "127.0.0.1", b.Addr().String())
	held := waitAccept(t, chb)
	if c := dialFrom(t, "127.0.0.1", b.Addr().String()); !closedByServer(c) {
		t.Fatal("a connection past the pool was not closed")
	}
	if b.Refused(ReasonFDs) != 1 || b.Open() != 1 {
		t.Fatalf("refused for descriptors %d, open %d", b.Refused(ReasonFDs), b.Open())
	}
	held.Close()
	p.SetMax(5)
	for range 3 {
		dialFrom(t, "127.0.0.1", a.Addr().String())
		waitAccept(t, cha)
	}
	if p.Open() != 5 {
		t.Fatalf("pool holds %d, want 5", p.Open())
	}
}

func TestExemptAddressesHaveNoShare(t *testing.T) {
	p := NewPool(0)
	l := p.Wrap(listen(t), Options{Logger: quiet, Name: "test", Max: 3, AddressShare: 1,
		Exempt: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.9") }})
	ch := accepted(t, l)
	for range 3 {
		dialFrom(t, "127.0.0.9", l.Addr().String())
		waitAccept(t, ch)
	}
	if c := dialFrom(t, "127.0.0.9", l.Addr().String()); !closedByServer(c) {
		t.Fatal("an exempt address went past the cap")
	}
	if l.Refused(ReasonCap) != 1 || l.Refused(ReasonAddress) != 0 {
		t.Fatalf("refused for the cap %d, for the share %d", l.Refused(ReasonCap), l.Refused(ReasonAddress))
	}
}

func TestFirstBytesDeadline(t *testing.T) {
	p := NewPool(0)
	l := p.Wrap(listen(t), Options{Logger: quiet, Name: "peer", FirstBytes: 4, FirstBytesTimeout: 200 * time.Millisecond})
	ch := accepted(t, l)
	// Serve: echo whatever arrives.
	go func() {
		for c := range ch {
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	silent := dialFrom(t, "127.0.0.1", l.Addr().String())
	if _, err := silent.Write([]byte("abc")); err != nil { // 3 of the 4 bytes
		t.Fatal(err)
	}
	talker := dialFrom(t, "127.0.0.1", l.Addr().String())
	if _, err := talker.Write([]byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(silent) {
		t.Fatal("a connection that did not send its first bytes stayed open")
	}
	// The one that did is served past the deadline.
	time.Sleep(400 * time.Millisecond) // past the deadline: what is tested is that nothing happens
	if _, err := talker.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	_ = talker.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(talker, got); err != nil || string(got) != "abcde" {
		t.Fatalf("echo %q, %v", got, err)
	}
	if l.Open() != 1 {
		t.Fatalf("open %d, want 1", l.Open())
	}
}

func TestHTTPRefusal(t *testing.T) {
	p := NewPool(0)
	l := p.Wrap(listen(t), Options{Logger: quiet, Name: "http", Max: 1,
		Refuse: HTTPRefusal(http.StatusServiceUnavailable, "application/json", JSONRefusal(42900, "TOO_MANY_REQUESTS"))})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	holder := dialFrom(t, "127.0.0.1", l.Addr().String())
	if _, err := holder.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(holder), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first connection: %v %v", resp, err)
	}
	// The refusal answers a request: nothing comes before one.
	early := dialFrom(t, "127.0.0.1", l.Addr().String())
	_ = early.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := early.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("before any request the refused connection gave %d bytes, %v", n, err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(b), `"code":42900`) || !strings.Contains(string(b), "limit of 1 connections") {
		t.Fatalf("refusal: %d %v %s", resp.StatusCode, resp.Header, b)
	}
}

func TestHTTP2RefusalReachesGRPCClients(t *testing.T) {
	p := NewPool(0)
	l := p.Wrap(listen(t), Options{Logger: quiet, Name: "grpc", Max: 1, Refuse: HTTP2Refusal()})
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	call := func() error {
		cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("first client: %v", err)
	}
	// More silent connections than refusals run at once, each holding its
	// refusal until its deadline: the newest client still gets its answer.
	for range maxRefusing + 8 {
		c := dialFrom(t, "127.0.0.1", l.Addr().String())
		if _, err := c.Write(append([]byte(h2Preface), appendFrame(nil, frameSettings, 0, 0, nil)...)); err != nil {
			t.Fatal(err)
		}
	}
	err := call()
	if err == nil || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "limit of 1 connections") {
		t.Fatalf("second client: %v, want UNAVAILABLE naming the limit", err)
	}
}

func TestOpenFDs(t *testing.T) {
	n, err := OpenFDs()
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, err := OpenFDs(); err != nil || m != n+1 {
		t.Fatalf("open descriptors %d then %d after opening one (%v)", n, m, err)
	}
	if lim, err := FDLimit(); err != nil || lim < n {
		t.Fatalf("descriptor limit %d, %v", lim, err)
	}
}

func TestDefaults(t *testing.T) {
	if DefaultReserve(1024) != 256 || DefaultReserve(20000) != 2500 {
		t.Fatalf("reserve %d, %d", DefaultReserve(1024), DefaultReserve(20000))
	}
	sum := 0
	for _, name := range []string{GRPC, HTTP, Remoting, Metrics, Peer} {
		sum += DefaultCap(name, 20000, 2500)
	}
	if sum > 20000-2500 {
		t.Fatalf("the default caps add up to %d, more than the %d descriptors left", sum, 20000-2500)
	}
	if DefaultCap(GRPC, 20000, 2500) != 7000 || DefaultCap(Metrics, 20000, 2500) != 64 ||
		DefaultCap(GRPC, 1<<20, DefaultReserve(1<<20)) != 16384 || DefaultCap(HTTP, 100, 256) != 16 {
		t.Fatalf("caps %d %d %d %d", DefaultCap(GRPC, 20000, 2500), DefaultCap(Metrics, 20000, 2500),
			DefaultCap(GRPC, 1<<20, DefaultReserve(1<<20)), DefaultCap(HTTP, 100, 256))
	}
}
