package grpcserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/admission"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// A request larger than the receive limit is refused from its length
// prefix; one body at the broker's limit still fits, and the broker
// answers it.
func TestReceiveLimit(t *testing.T) {
	if MaxRecvMsgSize != RecvLimit(0) || RecvLimit(DefaultMaxBodySize) != MaxRecvMsgSize {
		t.Fatalf("MaxRecvMsgSize %d, RecvLimit(0) %d", MaxRecvMsgSize, RecvLimit(0))
	}
	if MaxRecvMsgSize > 8<<20 {
		t.Fatalf("receive limit %d is far above a 4 MiB body", MaxRecvMsgSize)
	}
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	big := newMsg("orders", "01A", "", strings.Repeat("x", MaxRecvMsgSize))
	_, err := h.c.SendMessage(h.ctx("p1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{big}}, grpc.MaxCallSendMsgSize(64<<20))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("oversized send: %v, want ResourceExhausted", err)
	}
	atLimit := newMsg("orders", "01B", "", strings.Repeat("x", DefaultMaxBodySize))
	code(t, h.send("orders", atLimit).Status, v2.Code_OK)
	// A batch of small messages within the limit is fine too.
	var batch []*v2.Message
	for i := range maxSendEnvelopes {
		batch = append(batch, newMsg("orders", "02"+string(rune('A'+i)), "", strings.Repeat("y", 64<<10)))
	}
	code(t, h.send("orders", batch...).Status, v2.Code_OK)
}

// Requests held by handlers count against the in-flight budget; a call
// that does not fit gets TOO_MANY_REQUESTS (MessagingService) or
// RESOURCE_EXHAUSTED (other services) at once, and room comes back when
// a call ends.
func TestBudgetUnary(t *testing.T) {
	b := admission.NewBudget(1 << 20)
	ic := budgetUnary(b)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, req any) (any, error) {
		close(entered)
		<-release
		return &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
	}
	big := &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01A", "", strings.Repeat("x", 700<<10))}}
	send := &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_SendMessage_FullMethodName}
	done := make(chan error)
	go func() {
		_, err := ic(context.Background(), big, send, slow)
		done <- err
	}()
	<-entered
	if b.InUse() < 700<<10 {
		t.Fatalf("a running call holds %d bytes of the budget", b.InUse())
	}
	fast := func(ctx context.Context, req any) (any, error) {
		return &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
	}
	resp, err := ic(context.Background(), big, send, fast)
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.(*v2.SendMessageResponse).GetStatus(), v2.Code_TOO_MANY_REQUESTS)
	_, err = ic(context.Background(), big, &grpc.UnaryServerInfo{FullMethod: "/mqgate.rest.v1.MessagingService/SendMessage"}, fast)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over budget on another service: %v, want ResourceExhausted", err)
	}
	// Small calls still fit beside the held one.
	resp, err = ic(context.Background(), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01B", "", "x")}}, send, fast)
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.(*v2.SendMessageResponse).GetStatus(), v2.Code_OK)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 0 {
		t.Fatalf("%d bytes still held after every call ended", b.InUse())
	}
	resp, err = ic(context.Background(), big, send, fast)
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.(*v2.SendMessageResponse).GetStatus(), v2.Code_OK)
}

// Through the server: the budget applies to real calls.
func TestBudgetThroughServer(t *testing.T) {
	h := newHarness(t, harnessOpts{inflight: 64 << 10})
	h.topic("orders", model.TopicNormal, 1)
	code(t, h.send("orders", newMsg("orders", "01A", "", strings.Repeat("x", 32<<10))).Status, v2.Code_OK)
	// A request larger than the whole budget is admitted alone.
	code(t, h.send("orders", newMsg("orders", "01B", "", strings.Repeat("x", 128<<10))).Status, v2.Code_OK)
}
