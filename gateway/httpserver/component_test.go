package httpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

const (
	recvPath   = "/v1/groups/billing/topics/orders:receive"
	ackPath    = "/v1/groups/billing/topics/orders:ack"
	changePath = "/v1/groups/billing/topics/orders:changeInvisibleDuration"
	sendPath   = "/v1/topics/orders/messages"
	resetPath  = "/v1/groups/billing/topics/orders:resetOffset"
	// noWait answers a receive at once.
	noWait = `{"maxMessages":32,"invisibleDuration":"30s","waitDuration":"0s"}`
)

func TestRESTSendReceiveAck(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	bin := []byte{0, 1, 2, 0xff} // not UTF-8: stays base64 even with ?body=text
	send := h.ok("POST", sendPath, `{"messages":[{"text":"hello"},{"body":"`+base64.StdEncoding.EncodeToString(bin)+
		`","tag":"TagA","keys":["k1","k2"],"properties":{"region":"eu"}},{"text":"own id","messageId":"MY-ID-1"}]}`)
	rs := results(t, send)
	if len(rs) != 3 {
		t.Fatalf("%d results for 3 messages: %v", len(rs), send)
	}
	ids := map[string]int{}
	for i, r := range rs {
		if codeOf(t, r["status"]) != v2.Code_OK {
			t.Fatalf("result %d: %v", i, r)
		}
		id, _ := r["messageId"].(string)
		if id == "" {
			t.Fatalf("result %d has no message id", i)
		}
		ids[id] = i
	}
	if len(ids) != 3 || rs[2]["messageId"] != "MY-ID-1" || len(rs[0]["messageId"].(string)) != 34 {
		t.Fatalf("message ids: generated ones must be distinct v1 ids, a given one echoed: %v", rs)
	}
	h.dispatched()

	got := messages(t, h.ok("POST", recvPath+"?body=text", noWait))
	if len(got) != 3 {
		t.Fatalf("received %d of 3", len(got))
	}
	var handles []string
	for _, m := range got {
		switch ids[m["messageId"].(string)] {
		case 0:
			if m["text"] != "hello" || m["body"] != nil {
				t.Fatalf("text message: %v", m)
			}
		case 1:
			if m["body"] != base64.StdEncoding.EncodeToString(bin) || m["text"] != nil || m["tag"] != "TagA" ||
				fmt.Sprint(m["keys"]) != "[k1 k2]" || fmt.Sprint(m["properties"]) != "map[region:eu]" {
				t.Fatalf("binary message: %v", m)
			}
		case 2:
			if m["text"] != "own id" {
				t.Fatalf("message with its own id: %v", m)
			}
		}
		if m["deliveryAttempt"] != float64(1) || m["receiptHandle"] == "" || m["invisibleUntil"] == nil || m["storeTimestamp"] == nil {
			t.Fatalf("delivery fields: %v", m)
		}
		handles = append(handles, m["receiptHandle"].(string))
	}
	// Without ?body=text every body is base64.
	h.ok("POST", sendPath, `{"messages":[{"text":"plain"}]}`)
	h.dispatched()
	plain := messages(t, h.ok("POST", recvPath, noWait))
	if len(plain) != 1 || plain[0]["body"] != base64.StdEncoding.EncodeToString([]byte("plain")) || plain[0]["text"] != nil {
		t.Fatalf("default body format: %v", plain)
	}
	// In flight: nothing more, and an empty receive is an empty array.
	if r := h.do("POST", recvPath, noWait); r.code != 200 || strings.TrimSpace(string(r.body)) != `{"messages":[]}` {
		t.Fatalf("empty receive: %d %s", r.code, r.body)
	}

	ack := results(t, h.ok("POST", ackPath, `{"receiptHandles":["`+strings.Join(handles, `","`)+`","r1.forged",""]}`))
	if len(ack) != 5 {
		t.Fatalf("%d ack results for 5 handles", len(ack))
	}
	for i, r := range ack {
		want := v2.Code_OK
		if i >= 3 {
			want = v2.Code_INVALID_RECEIPT_HANDLE
		}
		if codeOf(t, r["status"]) != want || (i < 3 && r["receiptHandle"] != handles[i]) {
			t.Fatalf("ack result %d: %v, want %v", i, r, want)
		}
	}
	// Past every deadline: the acked messages never come back, the
	// un-acked "plain" one does, as attempt 2.
	h.clk.Advance(time.Minute)
	again := messages(t, h.ok("POST", recvPath+"?body=text", noWait))
	if len(again) != 1 || again[0]["text"] != "plain" || again[0]["deliveryAttempt"] != float64(2) {
		t.Fatalf("after the deadline got %v, want only the un-acked message, attempt 2", again)
	}
}

// gRPC send → HTTP receive → HTTP ack: the message is not redelivered.
// An SQL92 filter on a REST receive selects on properties; the group
// skips the rest.
func TestRESTSQLFilter(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	h.ok("POST", sendPath, `{"messages":[{"text":"eu-7","tag":"x","properties":{"region":"eu","a":"7"}},`+
		`{"text":"us-9","tag":"x","properties":{"region":"us","a":"9"}},{"text":"eu-1","properties":{"region":"eu","a":"1"}}]}`)
	h.dispatched()
	body := strings.Replace(noWait, "{", `{"sqlFilter":"region = 'eu' AND a BETWEEN 5 AND 10 AND TAGS IS NOT NULL",`, 1)
	got := messages(t, h.ok("POST", recvPath+"?body=text", body))
	if len(got) != 1 || got[0]["text"] != "eu-7" {
		t.Fatalf("sql filter received %v, want only eu-7", got)
	}
	if more := messages(t, h.ok("POST", recvPath+"?body=text", body)); len(more) != 0 {
		t.Fatalf("then %v, want nothing", more)
	}
}

func TestRESTReceivesGRPCSendAndAcks(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	resp, err := h.v2.SendMessage(h.grpcCtx(), &v2.SendMessageRequest{Messages: []*v2.Message{{
		Topic: &v2.Resource{Name: "orders"}, Body: []byte("from gRPC"),
		SystemProperties: &v2.SystemProperties{MessageId: "GRPC-1", MessageType: v2.MessageType_NORMAL, Keys: []string{"key-1"}},
	}}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("gRPC send: %v %v", resp, err)
	}
	h.dispatched()
	got := messages(t, h.ok("POST", recvPath+"?body=text", noWait))
	if len(got) != 1 || got[0]["messageId"] != "GRPC-1" || got[0]["text"] != "from gRPC" || fmt.Sprint(got[0]["keys"]) != "[key-1]" {
		t.Fatalf("HTTP receive of a gRPC send: %v", got)
	}
	ack := results(t, h.ok("POST", ackPath, `{"receiptHandles":["`+got[0]["receiptHandle"].(string)+`"]}`))
	if codeOf(t, ack[0]["status"]) != v2.Code_OK {
		t.Fatalf("ack: %v", ack)
	}
	h.clk.Advance(time.Minute)
	if again := messages(t, h.ok("POST", recvPath, noWait)); len(again) != 0 {
		t.Fatalf("acked over HTTP, redelivered: %v", again)
	}
	// And over gRPC too.
	if m := h.grpcReceive(t); m != nil {
		t.Fatalf("acked over HTTP, redelivered over gRPC: %v", m)
	}
}

// HTTP receive → HTTP change invisibility → gRPC ack with the new handle;
// and HTTP receive → gRPC ack directly.
func TestRESTChangeInvisibilityThenGRPCAck(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	h.ok("POST", sendPath, `{"messages":[{"text":"one"},{"text":"two"}]}`)
	h.dispatched()
	got := messages(t, h.ok("POST", recvPath+"?body=text", `{"maxMessages":2,"invisibleDuration":"10s","waitDuration":"0s"}`))
	if len(got) != 2 {
		t.Fatalf("received %v", got)
	}
	old := got[0]["receiptHandle"].(string)
	ch := h.ok("POST", changePath, `{"receiptHandle":"`+old+`","invisibleDuration":"60s"}`)
	nh, _ := ch["receiptHandle"].(string)
	if nh == "" || nh == old {
		t.Fatalf("new handle %q", nh)
	}
	// The superseded handle is refused.
	if r := h.do("POST", changePath, `{"receiptHandle":"`+old+`","invisibleDuration":"60s"}`); r.code != 400 || codeOf(t, r.json(t)) != v2.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("stale handle: %d %s", r.code, r.body)
	}
	// Past the original 10 s, within the new 60 s: only the other message
	// (never changed) is visible again.
	h.clk.Advance(30 * time.Second)
	back := messages(t, h.ok("POST", recvPath+"?body=text", noWait))
	if len(back) != 1 || back[0]["text"] != got[1]["text"] {
		t.Fatalf("after 30 s got %v, want only %q back", back, got[1]["text"])
	}
	for _, hd := range []string{nh, back[0]["receiptHandle"].(string)} {
		ar, err := h.v2.AckMessage(h.grpcCtx(), &v2.AckMessageRequest{Group: &v2.Resource{Name: "billing"}, Topic: &v2.Resource{Name: "orders"},
			Entries: []*v2.AckMessageEntry{{MessageId: "x", ReceiptHandle: hd}}})
		if err != nil || ar.GetStatus().GetCode() != v2.Code_OK {
			t.Fatalf("gRPC ack of an HTTP handle: %v %v", ar, err)
		}
	}
	h.clk.Advance(2 * time.Minute)
	if again := messages(t, h.ok("POST", recvPath, noWait)); len(again) != 0 {
		t.Fatalf("acked over gRPC, redelivered: %v", again)
	}
}

// gRPC receive → HTTP change invisibility and HTTP ack.
func TestRESTAcksGRPCReceive(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	h.ok("POST", sendPath, `{"messages":[{"text":"one"}]}`)
	h.dispatched()
	m := h.grpcReceive(t)
	if m == nil {
		t.Fatal("gRPC receive got nothing")
	}
	ch := h.ok("POST", changePath, `{"receiptHandle":"`+m.GetSystemProperties().GetReceiptHandle()+`","invisibleDuration":"20s"}`)
	ack := results(t, h.ok("POST", ackPath, `{"receiptHandles":["`+ch["receiptHandle"].(string)+`"]}`))
	if codeOf(t, ack[0]["status"]) != v2.Code_OK {
		t.Fatalf("HTTP ack of a gRPC delivery: %v", ack)
	}
	h.clk.Advance(time.Minute)
	if again := h.grpcReceive(t); again != nil {
		t.Fatalf("redelivered: %v", again)
	}
}

// grpcReceive is one non-blocking v2 receive on billing/orders: the
// message, or nil for MESSAGE_NOT_FOUND.
func (h *harness) grpcReceive(t *testing.T) *v2.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(h.grpcCtx(), 150*time.Millisecond) // too short to long-poll
	defer cancel()
	stream, err := h.v2.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "billing"},
		MessageQueue:     &v2.MessageQueue{Topic: &v2.Resource{Name: "orders"}},
		FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:        1, InvisibleDuration: durationpb.New(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var msg *v2.Message
	for {
		f, err := stream.Recv()
		if err != nil {
			break
		}
		if st := f.GetStatus(); st != nil && st.Code != v2.Code_OK && st.Code != v2.Code_MESSAGE_NOT_FOUND {
			t.Fatalf("gRPC receive: %v", st)
		}
		if m := f.GetMessage(); m != nil {
			msg = m
		}
	}
	return msg
}

// Every error class with its HTTP status and a body naming the problem.
func TestRESTErrors(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	if _, err := h.b.CreateTopic(context.Background(), model.Topic{Name: "readonly", Type: model.TopicNormal, Queues: 1, Perm: model.PermRead}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     v2.Code
		mentions                 string
	}{
		{"malformed JSON", "POST", sendPath, `{"messages":[`, 400, v2.Code_BAD_REQUEST, "invalid JSON body"},
		{"trailing garbage", "POST", sendPath, `{"messages":[{"text":"a"}]} x`, 400, v2.Code_BAD_REQUEST, "syntax error"},
		{"unknown field", "POST", sendPath, `{"messages":[{"text":"a","colour":"red"}]}`, 400, v2.Code_BAD_REQUEST, `unknown field "colour"`},
		{"wrong type", "POST", recvPath, `{"maxMessages":"many"}`, 400, v2.Code_BAD_REQUEST, "maxMessages"},
		{"wrong type in a message", "POST", sendPath, `{"messages":[{"text":5}]}`, 400, v2.Code_BAD_REQUEST, "text"},
		{"bad duration", "POST", recvPath, `{"invisibleDuration":"soon"}`, 400, v2.Code_BAD_REQUEST, "invisibleDuration"},
		{"text and body", "POST", sendPath, `{"messages":[{"text":"a","body":"YQ=="}]}`, 400, v2.Code_BAD_REQUEST, "body"},
		{"bad base64", "POST", sendPath, `{"messages":[{"body":"%%%"}]}`, 400, v2.Code_BAD_REQUEST, "body"},
		{"no messages", "POST", sendPath, `{"messages":[]}`, 400, v2.Code_MESSAGE_CORRUPTED, "at least one message"},
		{"empty body", "POST", sendPath, `{"messages":[{"tag":"a"}]}`, 400, v2.Code_MESSAGE_BODY_EMPTY, "messages[0]"},
		{"illegal tag", "POST", sendPath, `{"messages":[{"text":"a","tag":"a|b"}]}`, 400, v2.Code_ILLEGAL_MESSAGE_TAG, "tag"},
		{"delay beyond a day", "POST", "/v1/topics/orders/messages", `{"messages":[{"text":"a","deliveryTimestamp":"2099-01-01T00:00:00Z"}]}`, 400, v2.Code_ILLEGAL_DELIVERY_TIME, "delivery time"},
		{"message group on a NORMAL topic", "POST", sendPath, `{"messages":[{"text":"a","messageGroup":"g1"}]}`, 400, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "NORMAL"},
		{"too many properties bytes", "POST", sendPath, `{"messages":[{"text":"a","properties":{"p":"` + strings.Repeat("x", 17000) + `"}}]}`, 413, v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, "16384"},
		{"illegal topic name", "POST", "/v1/topics/bad%20name/messages", `{"messages":[{"text":"a"}]}`, 400, v2.Code_ILLEGAL_TOPIC, "bad name"},
		{"max messages", "POST", recvPath, `{"maxMessages":100}`, 400, v2.Code_BAD_REQUEST, "maxMessages 100"},
		{"invisible too short", "POST", recvPath, `{"invisibleDuration":"1s"}`, 400, v2.Code_ILLEGAL_INVISIBLE_TIME, "invisibleDuration 1s"},
		{"wait too long", "POST", recvPath, `{"waitDuration":"60s"}`, 400, v2.Code_ILLEGAL_POLLING_TIME, "waitDuration 1m0s"},
		{"bad filter", "POST", recvPath, "{\"filter\":\"a\\u0001\"}", 400, v2.Code_ILLEGAL_FILTER_EXPRESSION, "filter"},
		{"malformed sql filter", "POST", recvPath, `{"sqlFilter":"a > 'x'"}`, 400, v2.Code_ILLEGAL_FILTER_EXPRESSION, "SQL92"},
		{"tags and sql filter", "POST", recvPath, `{"filter":"a","sqlFilter":"a > 1"}`, 400, v2.Code_ILLEGAL_FILTER_EXPRESSION, "not both"},
		{"no handles", "POST", ackPath, `{"receiptHandles":[]}`, 400, v2.Code_BAD_REQUEST, "receiptHandles"},
		{"no handle", "POST", changePath, `{"invisibleDuration":"10s"}`, 400, v2.Code_INVALID_RECEIPT_HANDLE, "receiptHandle"},
		{"no duration", "POST", changePath, `{"receiptHandle":"r1.x"}`, 400, v2.Code_ILLEGAL_INVISIBLE_TIME, "invisibleDuration"},
		{"forged handle", "POST", changePath, `{"receiptHandle":"r1.forged","invisibleDuration":"10s"}`, 400, v2.Code_INVALID_RECEIPT_HANDLE, ""},
		{"?body= value", "POST", recvPath + "?body=xml", `{}`, 400, v2.Code_BAD_REQUEST, "body="},
		{"send to unknown topic", "POST", "/v1/topics/nope/messages", `{"messages":[{"text":"a"}]}`, 404, v2.Code_TOPIC_NOT_FOUND, `"nope"`},
		{"receive from unknown topic", "POST", "/v1/groups/billing/topics/nope:receive", `{}`, 404, v2.Code_TOPIC_NOT_FOUND, `"nope"`},
		{"receive for unknown group", "POST", "/v1/groups/nobody/topics/orders:receive", `{}`, 404, v2.Code_CONSUMER_GROUP_NOT_FOUND, `"nobody"`},
		{"ack on unknown group", "POST", "/v1/groups/nobody/topics/orders:ack", `{"receiptHandles":["r1.x"]}`, 404, v2.Code_CONSUMER_GROUP_NOT_FOUND, `"nobody"`},
		{"route of unknown topic", "GET", "/v1/topics/nope/route", "", 404, v2.Code_TOPIC_NOT_FOUND, `"nope"`},
		{"admin: unknown topic", "GET", "/v1/topics/nope", "", 404, v2.Code_NOT_FOUND, `"nope"`},
		{"admin: delete unknown group", "DELETE", "/v1/groups/nobody", "", 404, v2.Code_NOT_FOUND, `"nobody"`},
		{"admin: bad topic type", "POST", "/v1/topics", `{"name":"x","type":"PURPLE"}`, 400, v2.Code_BAD_REQUEST, "PURPLE"},
		{"admin: create existing topic", "POST", "/v1/topics", `{"name":"orders"}`, 409, v2.Code_BAD_REQUEST, `"orders" already exists`},
		{"admin: create existing group", "POST", "/v1/groups", `{"name":"billing"}`, 409, v2.Code_BAD_REQUEST, `"billing" already exists`},
		{"admin: reset offset without a target", "POST", resetPath, `{}`, 400, v2.Code_BAD_REQUEST, "a time, a position (RESET_POSITION_EARLIEST or RESET_POSITION_LATEST), or an offset with queue_id"},
		{"admin: reset offset to no position", "POST", resetPath, `{"position":"RESET_POSITION_UNSPECIFIED"}`, 400, v2.Code_BAD_REQUEST, "RESET_POSITION_UNSPECIFIED"},
		{"admin: reset offset to an unknown position", "POST", resetPath, `{"position":"FIRST"}`, 400, v2.Code_BAD_REQUEST, "FIRST"},
		{"admin: reset offset to a time and a position", "POST", resetPath, `{"time":"2026-12-01T10:00:00Z","position":"RESET_POSITION_LATEST"}`, 400, v2.Code_BAD_REQUEST, "position"},
		{"admin: reset offset to a bad time", "POST", resetPath, `{"time":"yesterday"}`, 400, v2.Code_BAD_REQUEST, "time"},
		{"admin: reset offset to an offset without a queue", "POST", resetPath, `{"offset":"5"}`, 400, v2.Code_BAD_REQUEST, "needs queue_id"},
		{"admin: reset offset of an unknown queue", "POST", resetPath, `{"position":"RESET_POSITION_LATEST","queueId":9}`, 400, v2.Code_BAD_REQUEST, "queue 9"},
		{"admin: reset offset past a queue's end", "POST", resetPath, `{"offset":"5","queueId":0}`, 400, v2.Code_BAD_REQUEST, "holds offsets 0 to 0"},
		{"forbidden", "POST", "/v1/topics/readonly/messages", `{"messages":[{"text":"a"}]}`, 403, v2.Code_FORBIDDEN, "not writable"},
		{"no such endpoint", "POST", "/v1/nothing", `{}`, 404, v2.Code_NOT_FOUND, "/v1/nothing"},
		{"method not allowed", "PUT", "/v1/topics", `{}`, 405, v2.Code_BAD_REQUEST, "PUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(c.method, c.path, c.body)
			if r.code != c.status {
				t.Fatalf("HTTP %d, want %d: %s", r.code, c.status, r.body)
			}
			m := r.json(t)
			if got := codeOf(t, m); got != c.code {
				t.Fatalf("code %v, want %v: %s", got, c.code, r.body)
			}
			if msg, _ := m["message"].(string); !strings.Contains(msg, c.mentions) || msg == "" {
				t.Fatalf("message %q does not mention %q", msg, c.mentions)
			}
			if r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Request-Id") == "" {
				t.Fatalf("headers %v", r.header)
			}
		})
	}
}

// A body one byte over the 4 MiB message limit gets 413, and the server
// goes on serving: health, and the next send.
func TestRESTBodyTooLarge(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	const limit = 4 << 20
	for _, enc := range []string{"text", "body"} {
		raw := strings.Repeat("a", limit+1)
		v := raw
		if enc == "body" {
			v = base64.StdEncoding.EncodeToString([]byte(raw))
		}
		r := h.do("POST", sendPath, `{"messages":[{"`+enc+`":"`+v+`"}]}`)
		if r.code != http.StatusRequestEntityTooLarge || codeOf(t, r.json(t)) != v2.Code_MESSAGE_BODY_TOO_LARGE ||
			!strings.Contains(r.json(t)["message"].(string), fmt.Sprint(limit+1)) {
			t.Fatalf("%s of %d bytes: HTTP %d %s", enc, limit+1, r.code, r.body)
		}
	}
	// Exactly the limit is fine.
	if rs := results(t, h.ok("POST", sendPath, `{"messages":[{"text":"`+strings.Repeat("a", limit)+`"}]}`)); codeOf(t, rs[0]["status"]) != v2.Code_OK {
		t.Fatalf("4 MiB body: %v", rs)
	}
	if r := h.do("GET", "/healthz", ""); r.code != 200 {
		t.Fatalf("healthz after 413: %d", r.code)
	}
	h.ok("POST", sendPath, `{"messages":[{"text":"still serving"}]}`)
}

// A request body over MaxRequestBytes is cut off: 413 whether or not the
// client announced its length.
func TestRESTRequestTooLarge(t *testing.T) {
	h := newHarness(t, harnessOpts{maxRequestBytes: 1 << 10})
	h.setup("orders", "NORMAL", "billing")
	big := `{"messages":[{"text":"` + strings.Repeat("a", 2<<10) + `"}]}`
	r := h.do("POST", sendPath, big)
	if r.code != 413 || codeOf(t, r.json(t)) != v2.Code_PAYLOAD_TOO_LARGE {
		t.Fatalf("announced: %d %s", r.code, r.body)
	}
	// Chunked: no Content-Length, the limit cuts the read.
	req, _ := http.NewRequest("POST", h.base+sendPath, struct{ *strings.Reader }{strings.NewReader(big)})
	resp, err := h.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength > 0 {
		t.Fatalf("chunked: %d (content length %d)", resp.StatusCode, req.ContentLength)
	}
	h.ok("POST", sendPath, `{"messages":[{"text":"small"}]}`)
}

// Too many parked receives: 429.
func TestRESTTooManyRequests(t *testing.T) {
	h := newHarness(t, harnessOpts{maxParked: 1})
	h.setup("orders", "NORMAL", "billing")
	// Two long polls on an empty topic with one parking place: whichever
	// comes second is refused at once; the other stays parked (the fake
	// clock never ends its wait) until the cleanup drains it.
	answers := make(chan reply, 2)
	for range 2 {
		go func() { answers <- h.do("POST", recvPath, `{"waitDuration":"20s"}`) }()
	}
	r := <-answers
	if r.code != http.StatusTooManyRequests || codeOf(t, r.json(t)) != v2.Code_TOO_MANY_REQUESTS {
		t.Fatalf("second long poll: %d %s", r.code, r.body)
	}
	h.b.Drain()
	if r := <-answers; r.code != 200 || len(messages(t, r.json(t))) != 0 {
		t.Fatalf("drained long poll: %d %s", r.code, r.body)
	}
}

// While draining every REST call is refused with 503: nothing was done.
func TestRESTUnavailableWhileDraining(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	h.gate.StartDrain()
	for _, c := range []struct{ method, path, body string }{
		{"POST", sendPath, `{"messages":[{"text":"late"}]}`},
		{"POST", recvPath, noWait},
		{"GET", "/v1/topics", ""},
	} {
		r := h.do(c.method, c.path, c.body)
		if r.code != http.StatusServiceUnavailable || codeOf(t, r.json(t)) != v2.Code_INTERNAL_SERVER_ERROR ||
			!strings.Contains(r.json(t)["message"].(string), "draining") {
			t.Fatalf("%s %s while draining: %d %s", c.method, c.path, r.code, r.body)
		}
		if ra := r.header.Get("Retry-After"); ra == "" {
			t.Fatalf("%s %s while draining: 503 without Retry-After", c.method, c.path)
		}
	}
}

// A long poll answers as soon as a message arrives during its wait. The
// broker runs on a fake clock, so the wait itself can never end the call:
// only the arrival can.
func TestRESTLongPollWokenBySend(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	answer := make(chan reply, 1)
	armed := h.clk.Timers()
	go func() { answer <- h.do("POST", recvPath+"?body=text", `{"waitDuration":"20s"}`) }()
	// Send once the receive is parked: its wait timer is armed.
	for {
		changed := h.clk.Changed() // before the check, so no arming is missed
		if h.clk.Timers() > armed {
			break
		}
		select {
		case <-changed:
		case r := <-answer:
			t.Fatalf("the receive answered before any send: %d %s", r.code, r.body)
		case <-time.After(10 * time.Second):
			t.Fatal("the receive never parked")
		}
	}
	h.ok("POST", sendPath, `{"messages":[{"text":"wake up"}]}`)
	r := <-answer
	if r.code != 200 {
		t.Fatalf("woken receive: %d %s", r.code, r.body)
	}
	if got := messages(t, r.json(t)); len(got) != 1 || got[0]["text"] != "wake up" {
		t.Fatalf("woken receive got %v", got)
	}
}

// A long poll on an empty topic ends with its wait (real clock here): an
// empty array, not before the wait and not much after.
func TestRESTLongPollEndsWithItsWait(t *testing.T) {
	if testing.Short() {
		t.Skip("waits a real second")
	}
	h := newHarness(t, harnessOpts{realClock: true})
	h.setup("orders", "NORMAL", "billing")
	start := time.Now()
	r := h.do("POST", recvPath, `{"waitDuration":"1s"}`)
	took := time.Since(start)
	if r.code != 200 || strings.TrimSpace(string(r.body)) != `{"messages":[]}` {
		t.Fatalf("empty long poll: %d %s", r.code, r.body)
	}
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("a 1 s long poll took %s", took)
	}
}

func TestRESTRoute(t *testing.T) {
	h := newHarness(t)
	h.ok("POST", "/v1/topics", `{"name":"mixed","type":"MIXED","queues":3}`)
	m := h.ok("GET", "/v1/topics/mixed/route", "")
	if m["topic"] != "mixed" || m["type"] != "MIXED" || fmt.Sprint(m["acceptMessageTypes"]) != "[NORMAL FIFO DELAY TRANSACTION]" {
		t.Fatalf("route: %v", m)
	}
	qs := m["queues"].([]any)
	if len(qs) != 3 || fmt.Sprint(qs[2]) != "map[id:2 permission:READ_WRITE]" {
		t.Fatalf("queues: %v", qs)
	}
}

// Admin REST keeps its paths: create, get, list, delete topics and groups.
func TestRESTAdmin(t *testing.T) {
	h := newHarness(t)
	if m := h.ok("POST", "/v1/topics", `{"name":"t1","type":"FIFO","queues":2}`); fmt.Sprint(m["topic"].(map[string]any)["type"]) != "FIFO" {
		t.Fatalf("create topic: %v", m)
	}
	if m := h.ok("GET", "/v1/topics/t1", ""); m["topic"].(map[string]any)["queues"] != float64(2) {
		t.Fatalf("get topic: %v", m)
	}
	if m := h.ok("GET", "/v1/topics", ""); len(m["topics"].([]any)) != 1 {
		t.Fatalf("list topics: %v", m)
	}
	if m := h.ok("POST", "/v1/groups", `{"name":"g1","fifo":true,"maxDeliveryAttempts":5}`); m["group"].(map[string]any)["fifo"] != true {
		t.Fatalf("create group: %v", m)
	}
	if m := h.ok("GET", "/v1/groups/g1", ""); m["group"].(map[string]any)["maxDeliveryAttempts"] != float64(5) {
		t.Fatalf("get group: %v", m)
	}
	if m := h.ok("GET", "/v1/groups", ""); len(m["groups"].([]any)) != 1 {
		t.Fatalf("list groups: %v", m)
	}
	h.ok("DELETE", "/v1/groups/g1", "")
	h.ok("DELETE", "/v1/topics/t1", "")
	if m := h.ok("GET", "/v1/topics", ""); len(m["topics"].([]any)) != 0 {
		t.Fatalf("list after delete: %v", m)
	}
}

// The read-only admin views over REST: a topic's status (queues, stored
// messages, each group's progress), a group's status (per topic, dead
// letters) and stored messages by id or key.
func TestRESTDescribeAndLookup(t *testing.T) {
	h := newHarness(t)
	h.setup("orders", "NORMAL", "billing")
	h.ok("POST", sendPath, `{"messages":[{"text":"one"},{"text":"two","keys":["k1"]},{"text":"three","messageId":"MY-ID-1"}]}`)
	h.dispatched()
	if got := messages(t, h.ok("POST", recvPath, `{"maxMessages":1,"invisibleDuration":"30s","waitDuration":"0s"}`)); len(got) != 1 {
		t.Fatalf("received %d, want 1", len(got))
	}

	ts := h.ok("GET", "/v1/topics/orders/status", "")
	if ts["topic"].(map[string]any)["name"] != "orders" || len(ts["queues"].([]any)) != 2 || ts["messages"] != "3" {
		t.Fatalf("topic status: %v", ts)
	}
	gs, _ := ts["groups"].([]any)
	if len(gs) != 1 {
		t.Fatalf("topic status groups: %v", ts)
	}
	if g := gs[0].(map[string]any); g["group"] != "billing" || g["inFlight"] != "1" || g["backlog"] != "3" {
		t.Fatalf("billing's progress in orders: %v", g)
	}

	gr := h.ok("GET", "/v1/groups/billing/status", "")
	if gr["group"].(map[string]any)["name"] != "billing" || gr["deadLetterQueue"].(map[string]any)["topic"] != "%DLQ%billing" {
		t.Fatalf("group status: %v", gr)
	}
	if tp := gr["topics"].([]any); len(tp) != 1 || tp[0].(map[string]any)["topic"] != "orders" {
		t.Fatalf("group status topics: %v", gr)
	}

	lookup := func(query string) []map[string]any {
		t.Helper()
		return messages(t, h.ok("GET", "/v1/messages?"+query, ""))
	}
	if ms := lookup("messageId=MY-ID-1"); len(ms) != 1 || ms[0]["topic"] != "orders" || ms[0]["state"] != "STORED" {
		t.Fatalf("lookup by id: %v", ms)
	}
	if ms := lookup("topic=orders&key=k1"); len(ms) != 1 || fmt.Sprint(ms[0]["keys"]) != "[k1]" {
		t.Fatalf("lookup by key: %v", ms)
	}
	if ms := lookup("key=nothing"); len(ms) != 0 {
		t.Fatalf("lookup of an unknown key: %v", ms)
	}
	for _, c := range []struct{ path, want string }{
		{"/v1/messages", "message"},
		{"/v1/topics/nope/status", "nope"},
		{"/v1/groups/nobody/status", "nobody"},
	} {
		r := h.do("GET", c.path, "")
		if wantCode := map[bool]int{true: 400, false: 404}[c.path == "/v1/messages"]; r.code != wantCode || !strings.Contains(string(r.body), c.want) {
			t.Fatalf("GET %s: HTTP %d %s, want %d naming %s", c.path, r.code, r.body, wantCode, c.want)
		}
	}
}
