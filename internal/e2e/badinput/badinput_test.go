package badinput

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

const (
	topic     = "orders"
	accessKey = "app"
	secretKey = "app-secret"
)

type server struct {
	t    *testing.T
	p    *testutil.Proc
	grpc v2.MessagingServiceClient
}

func start(t *testing.T) *server {
	t.Helper()
	e2eutil.Begin(t)
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte("users:\n  - {accessKey: app, secretKey: app-secret, admin: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, testutil.StartOptions{Args: []string{"--auth-file", users, "--auto-create"}})
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

// logPeakRSS logs the process's peak and current resident set size.
func (s *server) logPeakRSS(when string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.p.Cmd.Process.Pid))
	if err != nil {
		s.t.Logf("peak RSS: %v", err)
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") || strings.HasPrefix(l, "VmRSS:") {
			s.t.Logf("%s: mqgate %s %s", s.t.Name(), when, strings.Join(strings.Fields(l), " "))
		}
	}
}

func signature(date string) string { return hmacHex(secretKey, date) }

// hmacHex is the v2 signature of date under secret.
func hmacHex(secret, date string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(date))
	return hex.EncodeToString(m.Sum(nil))
}

func signedCtx(ctx context.Context) context.Context {
	date := time.Now().UTC().Format("20060102T150405Z")
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "badinput-client", "x-mq-date-time", date,
		"authorization", "MQv2-HMAC-SHA1 Credential="+accessKey+", SignedHeaders=x-mq-date-time, Signature="+signature(date))
}

func restHeaders(h http.Header) {
	date := time.Now().UTC().Format("20060102T150405Z")
	h.Set("X-Mq-Date-Time", date)
	h.Set("Authorization", "MQv2-HMAC-SHA1 Credential="+accessKey+", SignedHeaders=x-mq-date-time, Signature="+signature(date))
	h.Set("Content-Type", "application/json")
}

func message(body int) *v2.Message {
	return &v2.Message{Topic: &v2.Resource{Name: topic}, Body: bytes.Repeat([]byte("x"), body),
		SystemProperties: &v2.SystemProperties{MessageId: fmt.Sprintf("01BADINPUT%022d", time.Now().UnixNano()), BodyEncoding: v2.Encoding_IDENTITY, MessageType: v2.MessageType_NORMAL}}
}

// good checks that a signed client is served on every listener, each
// within a few seconds.
func (s *server) good() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.grpc.SendMessage(signedCtx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{message(1024)}})
	if err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("good gRPC send: %v %v", r.GetStatus(), err)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.p.HTTP+"/v1/topics/"+topic+"/messages", strings.NewReader(`{"messages":[{"text":"good"}]}`))
	restHeaders(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("good REST send: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("good REST send: %d %s", resp.StatusCode, b)
	}
	c, err := client.Dial(ctx, s.p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetCredentials(accessKey, secretKey)
	rr, err := c.Invoke(ctx, &codec.Command{Code: 10, Body: []byte("good"), Ext: map[string]string{
		"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": ""}})
	if err != nil || rr.Code != 0 {
		t.Fatalf("good remoting send: %+v %v", rr, err)
	}
	if resp, err := http.Get("http://" + s.p.HTTP + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

func TestGRPCBadInput(t *testing.T) {
	s := start(t)
	s.good()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := &v2.SendMessageRequest{Messages: []*v2.Message{message(128 << 20)}}
	t0 := time.Now()
	// Unsigned 128 MiB sends: refused from the headers, nothing read.
	parallel(8, func(int) {
		_, err := s.grpc.SendMessage(metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "x"), big)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "UNAUTHORIZED") {
			t.Errorf("unsigned 128 MiB send: %v, want Unauthenticated", err)
		}
	})
	t.Logf("unsigned sends refused after %s", time.Since(t0))
	// Signed but over the receive limit: refused from the length prefix.
	over := &v2.SendMessageRequest{Messages: []*v2.Message{message(16 << 20)}}
	parallel(2, func(int) {
		_, err := s.grpc.SendMessage(signedCtx(ctx), over)
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("signed 16 MiB send: %v, want ResourceExhausted", err)
		}
	})
	t.Logf("oversized sends refused after %s", time.Since(t0))
	s.logPeakRSS("after the oversized sends")
	// A 4 MiB body (the limit) is accepted.
	if r, err := s.grpc.SendMessage(signedCtx(ctx), &v2.SendMessageRequest{Messages: []*v2.Message{message(4 << 20)}}); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("4 MiB send: %v %v", r.GetStatus(), err)
	}
	// Not HTTP/2 at all, a truncated preface, a stalled connection.
	for _, raw := range []string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM", strings.Repeat("\x00", 4096)} {
		c, err := net.Dial("tcp", s.p.GRPC)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(raw))
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = io.ReadAll(c)
		c.Close()
	}
	stalled, err := net.Dial("tcp", s.p.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_, _ = stalled.Write([]byte("PRI * HTTP/2.0\r\n"))
	s.good()
}

// rawHTTP sends head and the first part of a body on a new connection and
// reads the response.
func rawHTTP(t *testing.T, addr, head string, body []byte) (*http.Response, string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = c.Write(append([]byte(strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"), body...)) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), nil
}

func TestRESTBadInput(t *testing.T) {
	s := start(t)
	s.good()
	addr := s.p.HTTP
	payload := []byte(`{"messages":[{"body":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("y"), 11<<20)) + `"}]}`)
	// 30 unsigned 15 MiB POSTs: 401 from the headers.
	parallel(30, func(int) {
		resp, body, err := rawHTTP(t, addr, fmt.Sprintf("POST /v1/topics/%s/messages HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: %d", topic, len(payload)), payload)
		if err != nil || resp.StatusCode != 401 || !strings.Contains(body, `"code":40100`) {
			t.Errorf("unsigned 15 MiB POST: %v %v %s", resp, err, body)
		}
	})
	// Signed but over the body limit: 413.
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/topics/"+topic+"/messages", bytes.NewReader(payload))
	restHeaders(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "PAYLOAD_TOO_LARGE") {
		t.Fatalf("signed 15 MiB POST: %d %s", resp.StatusCode, b)
	}
	s.logPeakRSS("after the oversized POSTs")
	// Malformed and truncated JSON: 400 with a JSON error.
	for _, body := range []string{`{"messages":[{"text":`, `not json`, `{"messages":[{"body":"%%%"}]}`, `{"unknown":1}`} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/topics/"+topic+"/messages", strings.NewReader(body))
		restHeaders(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("body %q: %d %s", body, resp.StatusCode, b)
		}
	}
	// Non-canonical paths: JSON 400, not a redirect.
	for _, p := range []string{"/v1/../x", "/v1/topics/../../readyz", "//v1/topics"} {
		resp, body, err := rawHTTP(t, addr, "GET "+p+" HTTP/1.1\nHost: x", nil)
		if err != nil || resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %v %v %s", p, resp, err, body)
		}
	}
	// Slow clients (a header trickle, a stalled signed body) hold their
	// own connection only.
	var held []net.Conn
	for i := range 16 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if i%2 == 0 {
			_, _ = c.Write([]byte("POST /v1/topics/" + topic + "/messages HTTP/1.1\r\nHost: x\r\n"))
			continue
		}
		h := http.Header{}
		restHeaders(h)
		var sb strings.Builder
		fmt.Fprintf(&sb, "POST /v1/topics/%s/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n", topic)
		_ = h.Write(&sb)
		sb.WriteString("\r\n{")
		_, _ = c.Write([]byte(sb.String()))
	}
	s.good()
	for _, c := range held {
		c.Close()
	}
}

func frameHeader(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestRemotingBadInput(t *testing.T) {
	s := start(t)
	s.good()
	// 16 connections announce 16 MiB frames and send 1 byte: a signed
	// client is served at once.
	var held []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", s.p.Remoting)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_, _ = c.Write(append(frameHeader(16<<20), 0))
	}
	start := time.Now()
	s.good()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a good client took %s beside stalled frames", d)
	}
	// Unsigned large frames really sent: answered NO_PERMISSION, the
	// server stays up.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	parallel(4, func(int) {
		c, err := client.Dial(ctx, s.p.Remoting, codec.JSON)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		r, err := c.Invoke(ctx, &codec.Command{Code: 10, Body: bytes.Repeat([]byte("z"), 15<<20), Ext: map[string]string{
			"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}})
		if err != nil || r.Code != 16 { // NO_PERMISSION
			t.Errorf("unsigned 15 MiB send: %+v %v, want NO_PERMISSION (16)", r, err)
		}
	})
	s.logPeakRSS("after the unsigned large frames")
	// Malformed and truncated frames: an error answer or a closed
	// connection, never a hang.
	for _, raw := range [][]byte{
		{0, 0, 0, 2},
		{0x7f, 0xff, 0xff, 0xff},
		append(frameHeader(8), 0, 0, 0, 100, '{', '}', ' ', ' '),
		append(frameHeader(12), 0, 0, 0, 8, '{', '"', 'c', 'o', 'd', 'e', '"', ':'),
		{0, 0},
	} {
		c, err := net.Dial("tcp", s.p.Remoting)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(raw)
		if len(raw) < 4 {
			c.(*net.TCPConn).CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("frame %x: %v, want an answer and a closed connection", raw, err)
		}
		c.Close()
	}
	s.good()
	for _, c := range held {
		c.Close()
	}
}
