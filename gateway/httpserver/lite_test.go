package httpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// A LITE topic is created over REST, and its lite topics with each
// group's backlog are listed there, a page at a time.
func TestRESTLiteTopics(t *testing.T) {
	h := newHarness(t)
	created := h.ok("POST", "/v1/topics", `{"name":"chat","type":"LITE","queues":2,"liteTtl":"3600s"}`)
	if tp := created["topic"].(map[string]any); tp["type"] != "LITE" || tp["liteTtl"] != "3600s" {
		t.Fatalf("created %v", tp)
	}
	h.ok("POST", "/v1/groups", `{"name":"g"}`)
	ctx := context.Background()
	for _, lt := range []string{"conv-a", "conv-b", "conv-a"} {
		if _, err := h.b.Send(ctx, "chat", []*model.Message{{Topic: "chat", LiteTopic: lt, ID: lt, Body: []byte("x")}}, model.Producer{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.b.SyncLiteSubscription(ctx, broker.LiteSyncRequest{ClientID: "c1", Group: "g", Topic: "chat", Action: lite.PartialAdd, Lites: []string{"conv-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.b.Receive(ctx, broker.ReceiveRequest{Group: "g", Topic: "chat", ClientID: "c1", Max: 1, Invisible: 60e9, QueueID: -1}); err != nil {
		t.Fatal(err)
	}
	var page struct {
		LiteTopics []struct {
			Name        string
			MinOffset   string
			MaxOffset   string
			ExpireTime  string
			Subscribers []string
			Groups      []struct {
				Group          string
				ConsumedOffset string
				Ready          string
				InFlight       string
			}
		}
		Total         string
		NextPageToken string
	}
	r := h.do("GET", "/v1/topics/chat/liteTopics?pageSize=1", "")
	if r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if page.Total != "2" || page.NextPageToken != "conv-a" || len(page.LiteTopics) != 1 {
		t.Fatalf("first page %s", r.body)
	}
	a := page.LiteTopics[0]
	if a.Name != "conv-a" || a.MaxOffset != "2" || a.ExpireTime == "" || len(a.Subscribers) != 1 || len(a.Groups) != 1 ||
		a.Groups[0].Ready != "1" || a.Groups[0].InFlight != "1" {
		t.Fatalf("conv-a: %s", r.body)
	}
	r = h.do("GET", "/v1/topics/chat/liteTopics?pageSize=1&pageToken=conv-a", "")
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.LiteTopics) != 1 || page.LiteTopics[0].Name != "conv-b" || page.NextPageToken != "" {
		t.Fatalf("second page %s", r.body)
	}
	// Another type of topic has no lite topics.
	h.ok("POST", "/v1/topics", `{"name":"orders"}`)
	wantError(t, h.do("GET", "/v1/topics/orders/liteTopics", ""), 400, v2.Code_BAD_REQUEST, "not LITE")
	wantError(t, h.do("POST", "/v1/topics", `{"name":"x","liteTtl":"60s"}`), 400, v2.Code_BAD_REQUEST, "LITE topics only")
}

func wantError(t *testing.T, r reply, status int, code v2.Code, mentions string) {
	t.Helper()
	if r.code != status {
		t.Fatalf("HTTP %d, want %d: %s", r.code, status, r.body)
	}
	m := r.json(t)
	if got := codeOf(t, m); got != code {
		t.Fatalf("code %v, want %v: %s", got, code, r.body)
	}
	if msg, _ := m["message"].(string); !strings.Contains(msg, mentions) {
		t.Fatalf("message %q does not mention %q", msg, mentions)
	}
}
