package e2e

// REST/JSON (the HTTP port, grpc-gateway onto the same gRPC server) against
// the real binary, interoperating with the official Go client and raw v2
// gRPC: receipt handles work across both.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// restClient talks JSON to one mqgate's HTTP port.
type restClient struct {
	t    *testing.T
	base string
	c    *http.Client
	// ak and sk sign every call when set (as).
	ak, sk string
}

// as is r signing its calls with a user's access key and secret key.
func (r *restClient) as(ak, sk string) *restClient {
	c := *r
	c.ak, c.sk = ak, sk
	return &c
}

func newREST(t *testing.T, p *testutil.Proc) *restClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &restClient{t: t, base: "http://" + p.HTTP, c: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// call sends one request and returns the status and the decoded JSON body.
func (r *restClient) call(method, path, body string) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.ak != "" {
		date := time.Now().UTC().Format("20060102T150405Z")
		req.Header.Set("X-Mq-Date-Time", date)
		req.Header.Set("Authorization", v2Signature(r.ak, r.sk, date))
	}
	resp, err := r.c.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		r.t.Fatalf("%s %s: HTTP %d with a non-JSON body %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

// ok is call for requests that must answer 200.
func (r *restClient) ok(method, path, body string) map[string]any {
	r.t.Helper()
	code, m := r.call(method, path, body)
	if code != http.StatusOK {
		r.t.Fatalf("%s %s: HTTP %d %v", method, path, code, m)
	}
	return m
}

// v2Signature is the Authorization a v2 client sends for date, as
// docs/auth.md describes it.
func v2Signature(ak, sk, date string) string {
	m := hmac.New(sha1.New, []byte(sk))
	m.Write([]byte(date))
	return "MQv2-HMAC-SHA1 Credential=" + ak + ", SignedHeaders=x-mq-date-time, Signature=" + hex.EncodeToString(m.Sum(nil))
}

func list(m map[string]any, key string) []map[string]any {
	raw, _ := m[key].([]any)
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i], _ = x.(map[string]any)
	}
	return out
}

func statusCode(v any) int {
	m, _ := v.(map[string]any)
	c, _ := m["code"].(float64)
	return int(c)
}

func (r *restClient) setup(topic, group string) {
	r.t.Helper()
	r.ok("POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"type":"NORMAL","queues":4}`, topic))
	r.ok("POST", "/v1/groups", fmt.Sprintf(`{"name":%q}`, group))
}

func (r *restClient) receive(group, topic, query, body string) []map[string]any {
	r.t.Helper()
	return list(r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":receive"+query, body), "messages")
}

// HTTP send → the official SimpleConsumer receives exactly that: ids,
// bodies (text and base64), tag, keys, properties.
func TestRESTSendOfficialConsumerReceives(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("rest-orders"), uniq("rest-g")
	r.setup(topic, group)
	bin := []byte{0xde, 0xad, 0xbe, 0xef, 0}
	sent := r.ok("POST", "/v1/topics/"+topic+"/messages", `{"messages":[`+
		`{"text":"héllo ✓","tag":"TagA","keys":["k1","k2"],"properties":{"region":"eu"}},`+
		`{"body":"`+base64.StdEncoding.EncodeToString(bin)+`","tag":"TagB"}]}`)
	results := list(sent, "results")
	if len(results) != 2 || statusCode(results[0]["status"]) != int(pb.Code_OK) || statusCode(results[1]["status"]) != int(pb.Code_OK) {
		t.Fatalf("send: %v", sent)
	}
	c := newConsumer(t, p, group, 0, all(topic))
	got := collect(t, c, 2, 20*time.Second, 30*time.Second, nil)
	byID := map[string]*rmq.MessageView{}
	for _, mv := range got {
		byID[mv.GetMessageId()] = mv
	}
	a, b := byID[results[0]["messageId"].(string)], byID[results[1]["messageId"].(string)]
	if a == nil || b == nil {
		t.Fatalf("received ids %v, sent %v", ids(got), results)
	}
	if string(a.GetBody()) != "héllo ✓" || a.GetTag() == nil || *a.GetTag() != "TagA" || !slices.Equal(a.GetKeys(), []string{"k1", "k2"}) ||
		a.GetProperties()["region"] != "eu" || a.GetDeliveryAttempt() != 1 {
		t.Fatalf("text message as the official client sees it: body %q tag %v keys %v props %v attempt %d",
			a.GetBody(), a.GetTag(), a.GetKeys(), a.GetProperties(), a.GetDeliveryAttempt())
	}
	if !bytes.Equal(b.GetBody(), bin) || *b.GetTag() != "TagB" {
		t.Fatalf("binary message: %x %v", b.GetBody(), b.GetTag())
	}
	for _, mv := range got {
		if err := c.Ack(context.Background(), mv); err != nil {
			t.Fatalf("official ack of a REST-sent message: %v", err)
		}
	}
	if again := r.receive(group, topic, "", `{"waitDuration":"0s"}`); len(again) != 0 {
		t.Fatalf("acked messages still there: %v", again)
	}
}

// Official producer → HTTP receive → HTTP ack: not redelivered, while the
// un-acked control message is (to the official consumer, attempt 2).
func TestRESTReceiveAckOfficialProducer(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("rest-orders"), uniq("rest-g")
	r.setup(topic, group)
	pr := newProducer(t, p, topic)
	sent := sendBodies(t, pr, topic, 2, "t")
	var got []map[string]any
	for len(got) < 2 {
		got = append(got, r.receive(group, topic, "?body=text", `{"maxMessages":2,"invisibleDuration":"60s","waitDuration":"5s"}`)...)
	}
	for _, m := range got {
		if sent[m["messageId"].(string)] != m["text"] || m["deliveryAttempt"] != float64(1) {
			t.Fatalf("HTTP receive of an official send: %v (sent %v)", m, sent)
		}
	}
	// Both become visible again in 1 s; only the first is acked.
	var handles []string
	for _, m := range got {
		ch := r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":changeInvisibleDuration",
			fmt.Sprintf(`{"receiptHandle":%q,"invisibleDuration":"1s"}`, m["receiptHandle"]))
		handles = append(handles, ch["receiptHandle"].(string))
	}
	ack := list(r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":ack", fmt.Sprintf(`{"receiptHandles":[%q]}`, handles[0])), "results")
	if len(ack) != 1 || statusCode(ack[0]["status"]) != int(pb.Code_OK) {
		t.Fatalf("HTTP ack: %v", ack)
	}
	c := newConsumer(t, p, group, 0, all(topic))
	back := collect(t, c, 1, 20*time.Second, 30*time.Second, nil)
	if len(back) != 1 || back[0].GetMessageId() != got[1]["messageId"] || back[0].GetDeliveryAttempt() != 2 {
		t.Fatalf("after the deadline the consumer got %v, want only %v at attempt 2", ids(back), got[1]["messageId"])
	}
	// The acked one stays gone: a long poll well past its deadline finds nothing.
	if again := r.receive(group, topic, "", `{"waitDuration":"2s"}`); len(again) != 0 {
		t.Fatalf("acked over HTTP, redelivered: %v", again)
	}
}

// HTTP receive → HTTP change invisibility → raw gRPC ack with the new
// handle; the superseded handle is refused over HTTP.
func TestRESTChangeInvisibilityThenGRPCAck(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("rest-orders"), uniq("rest-g")
	r.setup(topic, group)
	r.ok("POST", "/v1/topics/"+topic+"/messages", `{"messages":[{"text":"x"}]}`)
	got := r.receive(group, topic, "", `{"waitDuration":"5s"}`)
	if len(got) != 1 {
		t.Fatalf("receive: %v", got)
	}
	old := got[0]["receiptHandle"].(string)
	nh := r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":changeInvisibleDuration",
		fmt.Sprintf(`{"receiptHandle":%q,"invisibleDuration":"120s"}`, old))["receiptHandle"].(string)
	wantCode(t, "gRPC ack of the new handle", dialRaw(t, p).ack(group, topic, nh), pb.Code_OK)
	ack := list(r.ok("POST", "/v1/groups/"+group+"/topics/"+topic+":ack", fmt.Sprintf(`{"receiptHandles":[%q]}`, old)), "results")
	if statusCode(ack[0]["status"]) != int(pb.Code_INVALID_RECEIPT_HANDLE) {
		t.Fatalf("ack of the superseded handle: %v", ack)
	}
}

// Error classes against the real process, and a 4 MiB + 1 body: 413, after
// which the process is healthy and serves the next send.
func TestRESTErrorsAndHealth(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("rest-orders"), uniq("rest-g")
	r.setup(topic, group)
	send := "/v1/topics/" + topic + "/messages"
	for _, c := range []struct {
		method, path, body string
		status, code       int
		mentions           string
	}{
		{"POST", send, `{"messages":[{"text":`, 400, int(pb.Code_BAD_REQUEST), "invalid JSON"},
		{"POST", send, `{"messages":[{"text":"a","colour":1}]}`, 400, int(pb.Code_BAD_REQUEST), "colour"},
		{"POST", send, `{"messages":[{"text":true}]}`, 400, int(pb.Code_BAD_REQUEST), "text"},
		{"POST", "/v1/topics/" + uniq("missing") + "/messages", `{"messages":[{"text":"a"}]}`, 404, int(pb.Code_TOPIC_NOT_FOUND), "does not exist"},
		{"POST", "/v1/groups/" + uniq("missing") + "/topics/" + topic + ":receive", `{}`, 404, int(pb.Code_CONSUMER_GROUP_NOT_FOUND), "does not exist"},
		{"POST", "/v1/topics", fmt.Sprintf(`{"name":%q}`, topic), 409, int(pb.Code_BAD_REQUEST), "already exists"},
		{"POST", send, `{"messages":[{"text":"` + strings.Repeat("a", 4<<20+1) + `"}]}`, 413, int(pb.Code_MESSAGE_BODY_TOO_LARGE), "4194305"},
	} {
		code, m := r.call(c.method, c.path, c.body)
		if code != c.status || statusCode(m) != c.code || !strings.Contains(fmt.Sprint(m["message"]), c.mentions) {
			t.Fatalf("%s %s: HTTP %d %v, want %d with code %d mentioning %q", c.method, c.path[:min(len(c.path), 60)], code, m, c.status, c.code, c.mentions)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(r.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s after the errors: %d", path, resp.StatusCode)
		}
	}
	r.ok("POST", send, `{"messages":[{"text":"still serving"}]}`)
	if got := r.receive(group, topic, "?body=text", `{"waitDuration":"5s"}`); len(got) != 1 || got[0]["text"] != "still serving" {
		t.Fatalf("after a 413: %v", got)
	}
	// The OpenAPI document is served.
	resp, err := http.Get(r.base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 || doc["swagger"] != "2.0" {
		t.Fatalf("/openapi.json: %d %v", resp.StatusCode, err)
	}
}

// A long poll returns when its wait ends if nothing arrives, and as soon as
// a message is sent during the wait.
func TestRESTLongPoll(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	r := newREST(t, p)
	topic, group := uniq("rest-orders"), uniq("rest-g")
	r.setup(topic, group)

	start := time.Now()
	if got := r.receive(group, topic, "", `{"waitDuration":"2s"}`); len(got) != 0 {
		t.Fatalf("empty topic: %v", got)
	}
	if took := time.Since(start); took < 2*time.Second || took > 10*time.Second {
		t.Fatalf("a 2 s long poll took %s", took)
	}

	type answer struct {
		msgs []map[string]any
		took time.Duration
	}
	done := make(chan answer, 1)
	start = time.Now()
	go func() {
		msgs := r.receive(group, topic, "?body=text", `{"waitDuration":"20s"}`)
		done <- answer{msgs, time.Since(start)}
	}()
	r.ok("POST", "/v1/topics/"+topic+"/messages", `{"messages":[{"text":"wake"}]}`)
	a := <-done
	if len(a.msgs) != 1 || a.msgs[0]["text"] != "wake" {
		t.Fatalf("long poll answered %v", a.msgs)
	}
	if a.took > 10*time.Second {
		t.Fatalf("a 20 s long poll took %s to return a message sent at once", a.took)
	}
}
