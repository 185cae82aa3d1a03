package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// The attacks of a flood: connections that hold descriptors, requests
// that hold memory before they are checked, unsigned frames that hold the
// remoting listener's unsigned pool. Each case asserts the bound and that
// signed clients are still served.

// startConfigured starts mqgate with auth on over users (a users file's text),
// extra flags, and o's launcher.
func startConfigured(t *testing.T, users string, o testutil.StartOptions) *server {
	t.Helper()
	e2eutil.Begin(t)
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Args = append([]string{"--auth-file", path, "--auto-create"}, o.Args...)
	p := testutil.Start(t, o)
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &server{t: t, p: p, grpc: v2.NewMessagingServiceClient(conn)}
	t.Cleanup(func() { s.logPeakRSS("at the end") })
	return s
}

const appUser = "users:\n  - {accessKey: app, secretKey: app-secret, admin: true}\n"

// dialFrom opens a TCP connection to addr from the local address ip (the
// loopback addresses other than 127.0.0.1 stand for other hosts).
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// grpcFrom is a MessagingService client whose connections come from ip.
func grpcFrom(t *testing.T, ip, addr string) v2.MessagingServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dialFrom(ip, a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return v2.NewMessagingServiceClient(cc)
}

// h2Preface is what an HTTP/2 client sends first: the preface and an
// empty SETTINGS frame. A connection that sent it and nothing more is
// open, and idle.
var h2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// flood opens n connections from ip to addr, writes hello on each, and
// returns them (those the server refused are closed by it).
func flood(t *testing.T, ip, addr string, n int, hello []byte) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := dialFrom(ip, addr)
		if err != nil {
			t.Fatalf("flood %s from %s: %v", addr, ip, err)
		}
		if len(hello) > 0 {
			_, _ = c.Write(hello)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// send is a signed 1 KiB gRPC send; it returns the error or a non-OK status.
func send(ctx context.Context, c v2.MessagingServiceClient, topic string) error {
	m := message(1024)
	m.Topic = &v2.Resource{Name: topic}
	r, err := c.SendMessage(signedCtx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	if err == nil && r.GetStatus().GetCode() != v2.Code_OK {
		err = fmt.Errorf("status %v %s", r.GetStatus().GetCode(), r.GetStatus().GetMessage())
	}
	return err
}

// Silent connections (the HTTP/2 handshake, then nothing) on every
// listener cannot take the process's descriptors: with a limit of 1024,
// each listener holds at most its cap and one address at most half of
// it; a new client from another address still connects, and past the cap
// a new gRPC client's call fails UNAVAILABLE naming the limit (HTTP: a
// 503); clients connected before go on, and the store, which opens files
// for new topics, never runs out of descriptors.
func TestConnectionFloodKeepsDescriptorsForTheStore(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux) to start mqgate with a descriptor limit of 1024")
	}
	s := startConfigured(t, appUser, testutil.StartOptions{Launcher: []string{prlimit, "--nofile=1024:1024", "--"}})
	s.good()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// Clients connected before the flood: gRPC, an HTTP keep-alive
	// connection, remoting.
	pre := grpcFrom(t, "127.0.0.1", s.p.GRPC)
	if err := send(ctx, pre, topic); err != nil {
		t.Fatal(err)
	}
	preHTTP := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	readyz := func(c *http.Client) (int, string, error) {
		resp, err := c.Get("http://" + s.p.HTTP + "/readyz")
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), nil
	}
	if code, _, err := readyz(preHTTP); err != nil || code != 200 {
		t.Fatalf("readyz before the flood: %d %v", code, err)
	}
	preRemoting, err := client.Dial(ctx, s.p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer preRemoting.Close()
	preRemoting.SetCredentials(accessKey, secretKey)
	remotingSend := func(topic string) error {
		r, err := preRemoting.Invoke(ctx, &codec.Command{Code: 10, Body: []byte("x"), Ext: map[string]string{
			"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": ""}})
		if err == nil && r.Code != 0 {
			err = fmt.Errorf("code %d %s", r.Code, r.Remark)
		}
		return err
	}
	if err := remotingSend(topic); err != nil {
		t.Fatal(err)
	}

	// 127.0.0.1 floods gRPC past its share: a new gRPC client from there
	// is refused, one from another address is served.
	flood(t, "127.0.0.1", s.p.GRPC, 500, h2Preface)
	_, err = grpcFrom(t, "127.0.0.1", s.p.GRPC).SendMessage(signedCtx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{message(10)}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "too many connections from your address") {
		t.Fatalf("a new gRPC client from the flooding address: %v, want UNAVAILABLE naming the address's share", err)
	}
	if err := send(ctx, grpcFrom(t, "127.0.0.2", s.p.GRPC), topic); err != nil {
		t.Fatalf("a new gRPC client from another address: %v", err)
	}
	// Other addresses fill the listener: a new client is refused, clearly.
	flood(t, "127.0.0.2", s.p.GRPC, 500, h2Preface)
	flood(t, "127.0.0.3", s.p.GRPC, 500, h2Preface)
	_, err = grpcFrom(t, "127.0.0.4", s.p.GRPC).SendMessage(signedCtx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{message(10)}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "holds its limit of") {
		t.Fatalf("a new gRPC client past the cap: %v, want UNAVAILABLE naming the limit", err)
	}
	// The other listeners too, from two addresses each.
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		flood(t, ip, s.p.HTTP, 300, []byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		flood(t, ip, s.p.Remoting, 300, nil)
		flood(t, ip, s.p.Metrics, 50, nil)
	}
	resp, err := (&http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}).Get("http://" + s.p.HTTP + "/healthz")
	if err != nil {
		t.Fatalf("a new HTTP client past the cap: %v, want a 503", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "TOO_MANY_REQUESTS") {
		t.Fatalf("a new HTTP client past the cap: %d %s", resp.StatusCode, b)
	}
	// Clients connected before are served, and the store opens files for
	// new topics (consume queues, metadata).
	for i := range 20 {
		tp := fmt.Sprintf("flood-%d", i)
		if err := send(ctx, pre, tp); err != nil {
			t.Fatalf("send to the new topic %s through a client connected before the flood: %v", tp, err)
		}
		if err := remotingSend(tp); err != nil {
			t.Fatalf("classic send to %s: %v", tp, err)
		}
	}
	if code, body, err := readyz(preHTTP); err != nil || code != 200 {
		t.Fatalf("readyz through a connection made before the flood: %d %s %v", code, body, err)
	}
	if s.p.HasLine("too many open files") {
		t.Fatalf("the process ran out of descriptors:\n%s", s.p.Log())
	}
	lim, ok := s.p.WaitLog(time.Second, func(m map[string]any) bool { return m["msg"] == "connection limits" })
	if !ok {
		t.Fatal("no connection limits line")
	}
	t.Logf("limits: fd_limit %v, fd_reserve %v, fds_open %v, max_conns %v; caps grpc %v, http %v, remoting %v, metrics %v",
		lim["fd_limit"], lim["fd_reserve"], lim["fds_open"], lim["max_conns"], lim["grpc_max_conns"], lim["http_max_conns"],
		lim["remoting_max_conns"], lim["metrics_max_conns"])
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A connection that does not finish starting within the handshake
// timeout (10 s) is closed: on gRPC one that sent only "P", the preface
// without SETTINGS, or nothing; on remoting one that sends nothing.
func TestHalfOpenConnectionsAreClosed(t *testing.T) {
	s := start(t)
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range []struct {
		name, addr string
		sent       []byte
	}{
		{"gRPC, P", s.p.GRPC, []byte("P")},
		{"gRPC, preface without SETTINGS", s.p.GRPC, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")},
		{"gRPC, nothing", s.p.GRPC, nil},
		{"remoting, nothing", s.p.Remoting, nil},
	} {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = conn.Write(c.sent)
		wg.Go(func() {
			// 10 s and a generous margin: before the fix such connections
			// stayed open for minutes.
			if !closedWithin(conn, 30*time.Second) {
				t.Errorf("%s: still open after %s", c.name, time.Since(t0).Round(time.Second))
			}
		})
	}
	wg.Wait()
	t.Logf("closed after %s", time.Since(t0).Round(100*time.Millisecond))
	s.good()
}

// rss samples a process's memory (/proc/PID/status) until stopped, and
// keeps the peaks.
type rss struct {
	pid               int
	peakAnon, peakRSS atomic.Int64 // KiB
	stop              chan struct{}
	done              chan struct{}
	baseAnon, baseRSS int64
}

func readRSS(pid int) (anonKiB, rssKiB int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			anonKiB = v
		case "VmRSS:":
			rssKiB = v
		}
	}
	return anonKiB, rssKiB
}

func sampleRSS(pid int) *rss {
	r := &rss{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	r.baseAnon, r.baseRSS = readRSS(pid)
	go func() {
		defer close(r.done)
		t := time.NewTicker(20 * time.Millisecond) // a sampling period: there is no event for memory use
		defer t.Stop()
		for {
			a, v := readRSS(pid)
			if a > r.peakAnon.Load() {
				r.peakAnon.Store(a)
			}
			if v > r.peakRSS.Load() {
				r.peakRSS.Store(v)
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// end stops sampling and returns the peaks in MiB.
func (r *rss) end() (anonMiB, rssMiB int64) {
	close(r.stop)
	<-r.done
	return r.peakAnon.Load() >> 10, r.peakRSS.Load() >> 10
}

// grpcFrame is a gRPC length-prefixed message.
func grpcFrame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}

// h2Sender sends gRPC calls over a connection of its own, with a request
// body it does not copy (750 of them share one 5 MiB body).
type h2Sender struct {
	c    *http.Client
	addr string
}

func newH2Sender(addr string) *h2Sender {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &h2Sender{addr: addr, c: &http.Client{Transport: &http.Transport{Protocols: p}}}
}

// call sends body to method as user (empty: unsigned) and returns the gRPC
// status code and, for a SendMessage answered with a response, its v2
// status code.
func (h *h2Sender) call(ctx context.Context, method string, body []byte, user, secret string) (codes.Code, v2.Code, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+h.addr+method, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("X-Mq-Client-Id", "flood")
	if user != "" {
		date := time.Now().UTC().Format("20060102T150405Z")
		req.Header.Set("X-Mq-Date-Time", date)
		req.Header.Set("Authorization", "MQv2-HMAC-SHA1 Credential="+user+", SignedHeaders=x-mq-date-time, Signature="+hmacHex(secret, date))
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	st := resp.Header.Get("Grpc-Status")
	if st == "" {
		st = resp.Trailer.Get("Grpc-Status")
	}
	n, err := strconv.Atoi(st)
	if err != nil {
		return 0, 0, fmt.Errorf("no grpc-status (HTTP %d)", resp.StatusCode)
	}
	var v2code v2.Code
	if len(out) >= 5 {
		var r v2.SendMessageResponse
		if proto.Unmarshal(out[5:], &r) == nil {
			v2code = r.GetStatus().GetCode()
		}
	}
	return codes.Code(n), v2code, nil
}

// floodSends has senders send body rounds times each, all at once, and
// counts the outcomes ("grpc code/v2 code").
func floodSends(ctx context.Context, senders []*h2Sender, rounds int, body []byte, user, secret string) map[string]int {
	var mu sync.Mutex
	out := map[string]int{}
	var wg sync.WaitGroup
	for _, h := range senders {
		wg.Go(func() {
			for range rounds {
				gc, vc, err := h.call(ctx, "/apache.rocketmq.v2.MessagingService/SendMessage", body, user, secret)
				k := fmt.Sprintf("%s/%s", gc, vc)
				if err != nil {
					k = "error: " + err.Error()
				}
				mu.Lock()
				out[k]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

const floodUsers = appUser +
	"  - {accessKey: cons, secretKey: cons-secret, publish: [], subscribe: [orders], groups: [g]}\n" +
	"  - {accessKey: pub, secretKey: pub-secret, publish: [\"pub-*\"]}\n" +
	"  - {accessKey: pub2, secretKey: pub2-secret, publish: [\"pub-*\"]}\n"

// senders is how many concurrent 5 MiB sends the flood makes
// (MQGATE_BADINPUT_SENDERS, default 750).
func senders() int {
	if n, err := strconv.Atoi(os.Getenv("MQGATE_BADINPUT_SENDERS")); err == nil && n > 0 {
		return n
	}
	return 750
}

// 750 signed callers each send a 5 MiB SendMessage (under the 6 MiB
// receive limit) at once, twice. A consume-only user's sends are refused
// before they are read; a publisher's sends to a topic it may not publish
// to are read within the 256 MiB request budget, of which one user may
// hold half. With Go's soft memory limit set, the server's anonymous
// memory stays under the budget plus a fixed overhead, and another user's
// send is answered meanwhile.
func TestGRPCRequestFloodStaysWithinTheBudget(t *testing.T) {
	const floodSoftLimit = 512 << 20
	// Go's soft memory limit, as docs/operations.md and the Kubernetes
	// manifests set it: without one, the garbage collector's headroom
	// (freed request buffers not yet collected) grows with the rate of the
	// flood, to 1.0-1.3 GiB here, however small the budget.
	// MQGATE_TEST_FLOOD_SOFT_LIMIT=off measures without it (for
	// docs/performance.md; the bound is then not checked).
	soft := os.Getenv("MQGATE_TEST_FLOOD_SOFT_LIMIT") != "off"
	var env []string
	if soft {
		env = []string{"GOMEMLIMIT=" + strconv.Itoa(floodSoftLimit>>20) + "MiB"}
	}
	s := startConfigured(t, floodUsers, testutil.StartOptions{Env: env})
	s.good()
	n := senders()
	pid := s.p.Cmd.Process.Pid
	body := grpcFrame(t, &v2.SendMessageRequest{Messages: []*v2.Message{message(5 << 20)}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var hs []*h2Sender
	for range n {
		hs = append(hs, newH2Sender(s.p.GRPC))
	}
	t.Cleanup(func() {
		for _, h := range hs {
			h.c.CloseIdleConnections()
		}
	})
	baseAnon, baseRSS := readRSS(pid)
	t.Logf("before: RssAnon %d MiB, VmRSS %d MiB", baseAnon>>10, baseRSS>>10)

	// A consume-only user: refused when each call opens.
	r := sampleRSS(pid)
	t0 := time.Now()
	got := floodSends(ctx, hs, 2, body, "cons", "cons-secret")
	anon, vm := r.end()
	t.Logf("%d consume-only senders × 2 × 5 MiB in %s: %v; peak RssAnon %d MiB, VmRSS %d MiB", n, time.Since(t0).Round(time.Millisecond), got, anon, vm)
	if got[codes.PermissionDenied.String()+"/"+v2.Code_CODE_UNSPECIFIED.String()] != 2*n {
		t.Errorf("consume-only sends: %v, want all PERMISSION_DENIED", got)
	}
	if anon > 256 {
		t.Errorf("consume-only sends refused unread took the server to %d MiB of anonymous memory", anon)
	}

	// Publishers to a topic they may not publish to: read within the
	// budget, then refused. Another user sends meanwhile. First one user
	// (who may hold half of the budget), then two (the whole budget).
	for _, phase := range []struct {
		name  string
		users [][2]string
	}{
		{"one publisher", [][2]string{{"pub", "pub-secret"}}},
		{"two publishers", [][2]string{{"pub", "pub-secret"}, {"pub2", "pub2-secret"}}},
	} {
		r := sampleRSS(pid)
		t0 := time.Now()
		var good []time.Duration
		var busy atomic.Int64
		goodDone := make(chan error, 1)
		stop := make(chan struct{})
		go func() {
			defer close(goodDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
				err := send(cctx, s.grpc, topic)
				ccancel()
				if err != nil && strings.Contains(err.Error(), "TOO_MANY_REQUESTS") {
					busy.Add(1) // answered: retry later
					continue
				}
				if err != nil {
					goodDone <- err
					return
				}
				good = append(good, time.Since(start))
			}
		}()
		got := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		per := len(hs) / len(phase.users)
		for i, u := range phase.users {
			wg.Go(func() {
				out := floodSends(ctx, hs[i*per:(i+1)*per], 2, body, u[0], u[1])
				mu.Lock()
				for k, v := range out {
					got[k] += v
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		close(stop)
		if err := <-goodDone; err != nil {
			t.Errorf("%s: another user's send during the flood: %v", phase.name, err)
		}
		anon, vm := r.end()
		slices.Sort(good)
		var p50, worst time.Duration
		if len(good) > 0 {
			p50, worst = good[len(good)/2], good[len(good)-1]
		}
		t.Logf("%s, %d senders × 2 × 5 MiB in %s: %v; peak RssAnon %d MiB, VmRSS %d MiB; another user's sends meanwhile: %d stored (median %s, slowest %s), %d answered TOO_MANY_REQUESTS",
			phase.name, per*len(phase.users), time.Since(t0).Round(time.Millisecond), got, anon, vm, len(good), p50.Round(time.Millisecond), worst.Round(time.Millisecond), busy.Load())
		switch {
		case len(good) == 0:
			t.Errorf("%s: no send of another user was stored during the flood", phase.name)
		case len(phase.users) == 1 && busy.Load() > 0:
			// One user holds at most half of the budget: the others find room.
			t.Errorf("%s: another user's sends were refused for the budget %d times", phase.name, busy.Load())
		}
		if read := got[codes.OK.String()+"/"+v2.Code_UNAUTHORIZED.String()]; read == 0 {
			t.Errorf("%s: no publisher send was read and refused: %v", phase.name, got)
		}
		// The budget (256 MiB) holds what reads and handlers hold; beside
		// it, the connections, the windows of waiting calls and what the
		// garbage collector has not collected yet, which the soft limit
		// keeps near it: at most 4× the budget however many senders (the
		// peaks measured run from 2× to 3.6×, machine by machine; the
		// flood unbounded would hold 750 × 2 × 5 MiB).
		if soft && anon > 4*256 {
			t.Errorf("%s: peak anonymous memory %d MiB: above 4× the request budget (256 MiB) with GOMEMLIMIT %d MiB", phase.name, anon, floodSoftLimit>>20)
		}
	}
	s.good()
}

// firstSends measures new signed clients' first sends, each on a new
// connection (the dial included), until done says stop (at least n).
func firstSends(t *testing.T, ctx context.Context, addr string, n int, done func() bool) []time.Duration {
	t.Helper()
	var took []time.Duration
	for len(took) < n || !done() {
		if len(took) >= 5000 {
			t.Fatal("the attack did not progress while 5000 clients were served")
		}
		t0 := time.Now()
		c, err := client.Dial(ctx, addr, codec.JSON)
		if err != nil {
			t.Fatal(err)
		}
		c.SetCredentials(accessKey, secretKey)
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := c.Invoke(cctx, &codec.Command{Code: 10, Body: []byte("first"), Ext: map[string]string{
			"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": ""}})
		ccancel()
		c.Close()
		d := time.Since(t0)
		if err != nil || r.Code != 0 {
			t.Fatalf("a new signed client's first send beside unsigned large frames: %+v %v after %s", r, err, d)
		}
		took = append(took, d)
	}
	slices.Sort(took)
	return took
}

// Unsigned connections that hold the remoting listener's unsigned pool
// with large frames do not delay a new signed client: its first request
// on a new connection is answered in well under a second (the target is
// 100 ms), where it used to wait for a large frame to finish or time out.
// First two connections (from two addresses) hold all but the last byte
// of a 16 MiB frame each, which filled the 32 MiB pool; then four
// connections keep re-filling 16 MiB frames.
func TestRemotingUnsignedFramesDoNotDelayNewSignedClients(t *testing.T) {
	s := start(t)
	s.good()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stalled []net.Conn
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		c, err := dialFrom(ip, s.p.Remoting)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stalled = append(stalled, c)
		go func() { _, _ = c.Write(append(frameHeader(16<<20), make([]byte, 16<<20-1)...)) }()
	}
	held := firstSends(t, ctx, s.p.Remoting, 20, func() bool { return true })
	for _, c := range stalled {
		c.Close()
	}

	big := make([]byte, 16<<20-512)
	ext := map[string]string{"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refilled atomic.Int64
	for range 4 {
		wg.Go(func() {
			c, err := client.Dial(ctx, s.p.Remoting, codec.JSON)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Invoke(ctx, &codec.Command{Code: 10, Body: big, Ext: ext}); err != nil {
					return
				}
				refilled.Add(1)
			}
		})
	}
	refill := firstSends(t, ctx, s.p.Remoting, 20, func() bool { return refilled.Load() >= 8 })
	close(stop)
	wg.Wait()
	t.Logf("a new signed client's first send (dial included): %d clients beside two stalled 16 MiB unsigned frames: median %s, slowest %s; "+
		"%d clients while 4 connections re-filled 16 MiB unsigned frames (%d sent): median %s, slowest %s",
		len(held), held[len(held)/2].Round(time.Microsecond), held[len(held)-1].Round(time.Microsecond),
		len(refill), refilled.Load(), refill[len(refill)/2].Round(time.Microsecond), refill[len(refill)-1].Round(time.Microsecond))
	// A generous bound for a loaded machine; the target is 100 ms.
	if worst := max(held[len(held)-1], refill[len(refill)-1]); worst > 5*time.Second {
		t.Fatalf("a new signed client waited %s", worst)
	}
	s.good()
}
