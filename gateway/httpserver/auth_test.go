package httpserver

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/auth"
)

// signedHeaders are what an HTTP client sends to sign a call:
// X-Mq-Date-Time and an MQv2-HMAC-SHA1 Authorization over it.
func signedHeaders(ak, sk string) []string {
	date := time.Now().UTC().Format(auth.DateTimeLayout)
	m := hmac.New(sha1.New, []byte(sk))
	m.Write([]byte(date))
	return []string{"X-Mq-Date-Time", date,
		"Authorization", "MQv2-HMAC-SHA1 Credential=" + ak + ", SignedHeaders=x-mq-date-time, Signature=" + hex.EncodeToString(m.Sum(nil))}
}

// With auth on, REST calls are signed like gRPC ones: an unsigned or
// badly signed call is 401, a call outside the user's permissions is 401
// with UNAUTHORIZED (40100) and changes nothing, the admin endpoints that
// change something, list clients or show the cluster need an admin (403
// otherwise), and the admin views show a user what it may see only.
func TestRESTAuth(t *testing.T) {
	users, err := auth.Parse([]byte(`
users:
  - {accessKey: app, secretKey: app-secret, publish: [orders], subscribe: [orders], groups: [billing]}
  - {accessKey: ops, secretKey: ops-secret, admin: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{auth: auth.New(users)})
	app, ops := signedHeaders("app", "app-secret"), signedHeaders("ops", "ops-secret")
	want := func(r reply, code int, says string) {
		t.Helper()
		if r.code != code || !strings.Contains(string(r.body), says) {
			t.Fatalf("HTTP %d %s, want %d saying %q", r.code, r.body, code, says)
		}
	}

	want(h.do("POST", "/v1/topics", `{"name":"orders","queues":2}`), 401, "authentication required")
	want(h.do("POST", "/v1/topics", `{"name":"orders","queues":2}`, signedHeaders("ops", "wrong")...), 401, "wrong signature")
	want(h.do("POST", "/v1/topics", `{"name":"orders","queues":2}`, app...), 403, "admin API")
	want(h.do("POST", "/v1/groups/billing/topics/orders:resetOffset", `{"position":"RESET_POSITION_LATEST"}`, app...), 403, "admin API")
	for _, p := range []string{"/v1/clients", "/v1/cluster"} {
		want(h.do("GET", p, "", app...), 403, "admin API")
	}
	want(h.do("POST", "/v1/cluster/groups/broker:transferLeadership", `{"to":2}`, app...), 403, "admin API")
	want(h.do("POST", "/v1/groups/billing/deadLetters:redrive", `{}`, app...), 403, "admin API")
	for _, c := range []struct{ path, body string }{
		{"/v1/topics", `{"name":"orders","queues":2}`}, {"/v1/topics", `{"name":"payments","queues":2}`},
		{"/v1/groups", `{"name":"billing"}`}, {"/v1/groups", `{"name":"other"}`},
	} {
		h.ok("POST", c.path, c.body, ops...)
	}

	// The views: what app may publish to or consume, and its groups.
	want(h.do("GET", "/v1/topics", "", app...), 200, `"name":"orders"`)
	if r := h.do("GET", "/v1/topics", "", app...); strings.Contains(string(r.body), "payments") {
		t.Fatalf("app lists a topic it may not use: %s", r.body)
	}
	want(h.do("GET", "/v1/groups", "", app...), 200, `"name":"billing"`)
	if r := h.do("GET", "/v1/groups", "", app...); strings.Contains(string(r.body), `"other"`) {
		t.Fatalf("app lists a group it may not use: %s", r.body)
	}
	want(h.do("GET", "/v1/topics/orders/status", "", app...), 200, `"name":"orders"`)
	want(h.do("GET", "/v1/topics/payments/status", "", app...), 403, `may neither publish to nor consume topic \"payments\"`)
	want(h.do("GET", "/v1/groups/billing/status", "", app...), 200, `"name":"billing"`)
	want(h.do("GET", "/v1/groups/other/status", "", app...), 403, `consumer group \"other\"`)
	want(h.do("GET", "/v1/groups/other/deadLetters", "", app...), 403, `consumer group \"other\"`)
	want(h.do("GET", "/v1/topics/payments/queues/0/messages", "", app...), 403, `may not consume topic \"payments\"`)
	want(h.do("GET", "/v1/topics/orders/queues/0/messages", "", app...), 200, `"messages":[]`)
	want(h.do("GET", "/v1/whoami", "", app...), 200, `"admin":false`)
	want(h.do("GET", "/v1/whoami", "", ops...), 200, `"admin":true`)
	want(h.do("GET", "/v1/messages?key=k", "", app...), 200, `"messages":[]`)
	want(h.do("GET", "/v1/messages?key=k&topic=payments", "", app...), 403, `topic \"payments\"`)

	want(h.do("POST", sendPath, `{"messages":[{"text":"hello"}]}`), 401, "authentication required")
	h.ok("POST", sendPath, `{"messages":[{"text":"hello"}]}`, app...)
	r := h.do("POST", "/v1/topics/payments/messages", `{"messages":[{"text":"no"}]}`, app...)
	want(r, 401, `may not publish to topic \"payments\"`)
	want(r, 401, "40100")
	want(h.do("GET", "/v1/topics/payments/route", "", app...), 401, "neither publish to nor consume")
	h.ok("GET", "/v1/topics/orders/route", "", app...)
	want(h.do("POST", "/v1/groups/other/topics/orders:receive", noWait, app...), 401, `consumer group \"other\"`)
	want(h.do("POST", "/v1/groups/other/topics/orders:ack", `{"receiptHandles":["x"]}`, app...), 401, `consumer group \"other\"`)
	want(h.do("POST", "/v1/groups/other/topics/orders:changeInvisibleDuration", `{"receiptHandle":"x","invisibleDuration":"30s"}`, app...), 401, `consumer group \"other\"`)
	h.dispatched()
	got := messages(t, h.ok("POST", recvPath+"?body=text", noWait, app...))
	if len(got) != 1 || got[0]["text"] != "hello" {
		t.Fatalf("billing received %v, want the one message sent", got)
	}
	// The refused send stored nothing.
	if got := messages(t, h.ok("POST", "/v1/groups/other/topics/payments:receive", noWait, ops...)); len(got) != 0 {
		t.Fatalf("payments holds %v after a refused send", got)
	}
	// A lookup across every topic finds messages of topics app may
	// consume only; ops finds both.
	h.ok("POST", "/v1/topics/orders/messages", `{"messages":[{"text":"o","keys":["shared"]}]}`, ops...)
	h.ok("POST", "/v1/topics/payments/messages", `{"messages":[{"text":"p","keys":["shared"]}]}`, ops...)
	h.dispatched()
	if r := h.do("GET", "/v1/messages?key=shared", "", app...); strings.Count(string(r.body), `"messageId"`) != 1 || !strings.Contains(string(r.body), `"topic":"orders"`) {
		t.Fatalf("app's lookup: %d %s", r.code, r.body)
	}
	if r := h.do("GET", "/v1/messages?key=shared", "", ops...); strings.Count(string(r.body), `"messageId"`) != 2 {
		t.Fatalf("ops's lookup: %d %s", r.code, r.body)
	}
	// Stats count what app may see.
	if r := h.do("GET", "/v1/stats", "", app...); r.code != 200 || strings.Contains(string(r.body), "payments") || !strings.Contains(string(r.body), `"topic":"orders"`) {
		t.Fatalf("app's stats: %d %s", r.code, r.body)
	}
	// Health needs no credentials.
	if r := h.do("GET", "/healthz", ""); r.code != 200 {
		t.Fatalf("healthz: %d %s", r.code, r.body)
	}
}
