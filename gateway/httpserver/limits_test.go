package httpserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

// rawRequest writes head (a request line and headers, without the blank
// line) and then body on a new connection, and returns the connection
// and a reader of its responses.
func rawRequest(t *testing.T, h *harness, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// With auth on, an unsigned request is answered 401 from its headers: the
// server does not wait for (or read) its body.
func TestRESTAuthBeforeBody(t *testing.T) {
	users, err := auth.Parse([]byte("users:\n  - {accessKey: app, secretKey: app-secret, publish: [orders]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{auth: auth.New(users)})
	// 8 MiB announced, 10 bytes sent: the answer cannot wait for the rest.
	_, br := rawRequest(t, h, "POST "+sendPath+" HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 8388608", `{"messages`)
	resp, body := readResponse(t, br)
	if resp.StatusCode != 401 || !strings.Contains(body, `"code":40100`) || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("unsigned large POST: %d %s", resp.StatusCode, body)
	}
}

// Request bodies in flight are bounded: while one holds the budget, the
// next is answered 429 with Retry-After; room comes back when it ends.
func TestRESTInFlightBudget(t *testing.T) {
	h := newHarness(t, harnessOpts{inflight: 4 << 10})
	h.setup("orders", "NORMAL", "billing")
	msg := `{"messages":[{"text":"` + strings.Repeat("a", 3<<10) + `"}]}`
	// The first request announces its body and sends half: it holds its
	// reservation while the server waits for the rest.
	c, br := rawRequest(t, h, fmt.Sprintf("POST %s HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: %d", sendPath, len(msg)), msg[:len(msg)/2])
	testutil.Eventually(t, "the first body's reservation", func() bool { return h.rest.budget.InUse() > 0 })
	req, _ := http.NewRequest("POST", h.base+sendPath, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "TOO_MANY_REQUESTS") {
		t.Fatalf("second body over the budget: %d %s (Retry-After %q)", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
	if _, err := io.WriteString(c, msg[len(msg)/2:]); err != nil {
		t.Fatal(err)
	}
	if resp, body := readResponse(t, br); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	testutil.Eventually(t, "the budget released", func() bool { return h.rest.budget.InUse() == 0 })
	h.ok("POST", sendPath, msg)
}

// A body that does not arrive within BodyTimeout gets 408 and the
// connection is closed; the server goes on serving.
func TestRESTSlowBody(t *testing.T) {
	h := newHarness(t, harnessOpts{bodyTimeout: 300 * time.Millisecond})
	h.setup("orders", "NORMAL", "billing")
	c, br := rawRequest(t, h, "POST "+sendPath+" HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 100", "{")
	resp, body := readResponse(t, br)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "did not arrive") {
		t.Fatalf("slow body: %d %s", resp.StatusCode, body)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection of a timed-out body: %v, want it closed (EOF)", err)
	}
	if h.rest.budget.InUse() != 0 {
		t.Fatalf("a timed-out body holds %d bytes of the budget", h.rest.budget.InUse())
	}
	h.ok("POST", sendPath, `{"messages":[{"text":"after"}]}`)
}

// Paths that are not canonical get a JSON 400, not the ServeMux's HTML
// redirect.
func TestRESTUncleanPath(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/v1/../x", "/v1/topics/../../healthz", "//v1/topics", "/v1/./topics", "/x/.."} {
		_, br := rawRequest(t, h, "GET "+p+" HTTP/1.1\nHost: x", "")
		resp, body := readResponse(t, br)
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, v2.Code_BAD_REQUEST.String()) {
			t.Fatalf("GET %s: %d %s %s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if r := h.do("GET", "/healthz", ""); r.code != 200 {
		t.Fatalf("healthz: %d", r.code)
	}
}
