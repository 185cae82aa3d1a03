package node

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// By default a new connection must start within a bound, an idle gRPC
// connection is closed, and the connection settings are checked by name.
func TestConnDefaultsAndValidation(t *testing.T) {
	d := Defaults()
	if d.HandshakeTimeout <= 0 || d.HandshakeTimeout > 30*time.Second {
		t.Fatalf("handshake timeout %s", d.HandshakeTimeout)
	}
	if d.GRPCMaxConnectionIdle <= 0 {
		t.Fatal("gRPC connections with no streams are never closed by default")
	}
	if d.ConnAddressShare <= 0 || d.ConnAddressShare >= 100 {
		t.Fatalf("address share %d%%: one address may take a whole listener", d.ConnAddressShare)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.GRPCMaxConns = -1 }, "grpc-max-conns"},
		{func(c *Config) { c.PeerMaxConns = -1 }, "peer-max-conns"},
		{func(c *Config) { c.FDReserve = -1 }, "fd-reserve"},
		{func(c *Config) { c.ConnAddressShare = 0 }, "conn-address-share"},
		{func(c *Config) { c.ConnAddressShare = 101 }, "conn-address-share"},
		{func(c *Config) { c.HandshakeTimeout = 0 }, "handshake-timeout"},
		{func(c *Config) { c.GRPCRequestBudget = 1 << 10 }, "grpc-request-budget"},
	} {
		c := Defaults()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
	}
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// Each listener holds at most its cap: past it, a gRPC client's call fails
// UNAVAILABLE naming the limit and an HTTP client gets a 503, until a
// connection closes.
func TestListenersAreCapped(t *testing.T) {
	cfg := testConfig(t)
	cfg.GRPCMaxConns, cfg.HTTPMaxConns, cfg.ConnAddressShare = 2, 2, 100
	n := openNode(t, cfg)
	var held []net.Conn
	for _, addr := range []string{n.Addrs().GRPC, n.Addrs().GRPC, n.Addrs().HTTP, n.Addrs().HTTP} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitOpen := func(name string, want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for n.limited[name].Open() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %d connections, want %d", name, n.limited[name].Open(), want)
			}
			time.Sleep(5 * time.Millisecond) // polls the accept loop: no event to await
		}
	}
	waitOpen("grpc", 2)
	waitOpen("http", 2)
	cc, err := grpc.NewClient(n.Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "limit of 2 connections") {
		t.Fatalf("a gRPC call past the cap: %v, want UNAVAILABLE naming the limit", err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + n.Addrs().HTTP + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "limit of 2 connections") {
		t.Fatalf("an HTTP request past the cap: %d %s", resp.StatusCode, b)
	}
	// A connection closed makes room.
	held[0].Close()
	held[2].Close()
	waitOpen("grpc", 1)
	waitOpen("http", 1)
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a gRPC call after room was made: %v", err)
	}
	if resp, err := hc.Get("http://" + n.Addrs().HTTP + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("an HTTP request after room was made: %v %v", resp, err)
	}
}

// A gRPC connection that does not complete its HTTP/2 preface and first
// frame within the handshake timeout is closed; so is an HTTP connection
// that sends no request.
func TestHandshakeTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.HandshakeTimeout = 300 * time.Millisecond
	n := openNode(t, cfg)
	for _, c := range []struct{ addr, sent string }{
		{n.Addrs().GRPC, "P"},
		{n.Addrs().GRPC, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{n.Addrs().HTTP, "GET / HTTP/1.1\r\n"},
		{n.Addrs().Metrics, ""},
	} {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(c.sent)); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(conn, 10*time.Second) {
			t.Fatalf("%s: a connection that sent %q is still open", c.addr, c.sent)
		}
	}
}
