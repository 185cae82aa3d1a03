package v2service

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// A request larger than the receive limit is refused from its length
// prefix; one body at the broker's limit still fits, and the broker
// answers it.
func TestReceiveLimit(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	big := newMsg("orders", "01A", "", strings.Repeat("x", grpcserver.MaxRecvMsgSize))
	_, err := h.c.SendMessage(h.ctx("p1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{big}}, grpc.MaxCallSendMsgSize(64<<20))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("oversized send: %v, want ResourceExhausted", err)
	}
	atLimit := newMsg("orders", "01B", "", strings.Repeat("x", grpcserver.DefaultMaxBodySize))
	code(t, h.send("orders", atLimit).Status, v2.Code_OK)
	// A batch of small messages within the limit is fine too.
	var batch []*v2.Message
	for i := range 32 {
		batch = append(batch, newMsg("orders", "02"+string(rune('A'+i)), "", strings.Repeat("y", 64<<10)))
	}
	code(t, h.send("orders", batch...).Status, v2.Code_OK)
}

// Through the server: the budget applies to real calls.
func TestBudgetThroughServer(t *testing.T) {
	h := newHarness(t, harnessOpts{inflight: 64 << 10})
	h.topic("orders", model.TopicNormal, 1)
	code(t, h.send("orders", newMsg("orders", "01A", "", strings.Repeat("x", 32<<10))).Status, v2.Code_OK)
	// A request larger than the whole budget is admitted alone.
	code(t, h.send("orders", newMsg("orders", "01B", "", strings.Repeat("x", 128<<10))).Status, v2.Code_OK)
}
