package v2service

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The unary interceptors, through a real server against the real broker:
// drain admission (sends refused, acks admitted), the client id check and
// the session registry.
func TestInterceptorsDrainAndClientID(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)

	// No client id: CLIENT_ID_REQUIRED as the response's status, gRPC OK.
	r, err := h.c.SendMessage(h.ctx("", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01A", "", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, r.Status, v2.Code_CLIENT_ID_REQUIRED)
	if _, ok := h.sess.LastSeen(""); ok {
		t.Fatal("a call without a client id registered a client")
	}

	// A call with one marks the client seen.
	code(t, h.send("orders", newMsg("orders", "01B", "", "b")).Status, v2.Code_OK)
	if _, ok := h.sess.LastSeen("producer-1"); !ok {
		t.Fatal("the sender was not marked seen")
	}

	h.gate.StartDrain()
	before := h.gate.Rejected()
	_, err = h.c.SendMessage(h.ctx("c1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01C", "", "c")}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "draining") {
		t.Fatalf("send while draining: %v, want UNAVAILABLE (draining)", err)
	}
	if n := h.gate.Rejected() - before; n != 1 {
		t.Fatalf("refused send counted %d times, want 1", n)
	}
	// An ack finishes work already handed out: admitted (the forged handle
	// gets its own answer from the handler, not UNAVAILABLE).
	a, err := h.c.AckMessage(h.ctx("c1", 5*time.Second), &v2.AckMessageRequest{
		Group: res("g"), Topic: res("orders"),
		Entries: []*v2.AckMessageEntry{{MessageId: "x", ReceiptHandle: "not-a-handle"}},
	})
	if err != nil {
		t.Fatalf("ack while draining: %v, want admitted", err)
	}
	if a.GetStatus().GetCode() == v2.Code_OK {
		t.Fatalf("forged handle acked: %v", a)
	}
}
