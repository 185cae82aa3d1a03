package grpcserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The receive limit leaves room for one body at the default limit plus
// the envelopes of a full batch, and stays near the body limit. (Sends
// through a real server at and over the limit: v2service's
// TestReceiveLimit.)
func TestRecvLimitArithmetic(t *testing.T) {
	if MaxRecvMsgSize != RecvLimit(0) || RecvLimit(DefaultMaxBodySize) != MaxRecvMsgSize {
		t.Fatalf("MaxRecvMsgSize %d, RecvLimit(0) %d", MaxRecvMsgSize, RecvLimit(0))
	}
	if MaxRecvMsgSize > 8<<20 {
		t.Fatalf("receive limit %d is far above a 4 MiB body", MaxRecvMsgSize)
	}
	if RecvLimit(1<<20) != 1<<20+maxSendEnvelopes*sendEnvelope {
		t.Fatalf("RecvLimit(1 MiB) = %d", RecvLimit(1<<20))
	}
}

func newMsg(topic, id, body string) *v2.Message {
	return &v2.Message{Topic: &v2.Resource{Name: topic}, Body: []byte(body),
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL}}
}

func code(t *testing.T, st *v2.Status, want v2.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("status %v (%s), want %v", st.GetCode(), st.GetMessage(), want)
	}
}

// Requests that arrive decoded (in-process calls) count against the
// request budget while their handlers hold them; a call that does not fit
// gets TOO_MANY_REQUESTS (MessagingService) or RESOURCE_EXHAUSTED (other
// services) at once, and room comes back when a call ends.
func TestBudgetDecodedCalls(t *testing.T) {
	r := newReads(2<<20, RecvLimit(0), nil, nil)
	ic := r.unary()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, req any) (any, error) {
		close(entered)
		<-release
		return &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
	}
	big := &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01A", strings.Repeat("x", 700<<10))}}
	send := &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_SendMessage_FullMethodName}
	done := make(chan error)
	go func() {
		_, err := ic(context.Background(), big, send, slow)
		done <- err
	}()
	<-entered
	if r.main.InUse() < 700<<10 {
		t.Fatalf("a running call holds %d bytes of the budget", r.main.InUse())
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
	resp, err = ic(context.Background(), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01B", "x")}}, send, fast)
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.(*v2.SendMessageResponse).GetStatus(), v2.Code_OK)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.main.InUse() != 0 {
		t.Fatalf("%d bytes still held after every call ended", r.main.InUse())
	}
	resp, err = ic(context.Background(), big, send, fast)
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.(*v2.SendMessageResponse).GetStatus(), v2.Code_OK)
}

// With a sizer (Options.RequestSize), the budget holds the sizer's figure
// for the requests it measures and proto.Size's for the others.
func TestBudgetUsesTheSizer(t *testing.T) {
	r := newReads(2<<20, RecvLimit(0), nil, nil)
	r.sizer = func(m proto.Message) (int, bool) {
		if _, ok := m.(*v2.SendMessageRequest); ok {
			return 123456, true
		}
		return 0, false
	}
	ic := r.unary()
	var held int64
	hold := func(ctx context.Context, req any) (any, error) {
		held = r.main.InUse()
		return &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
	}
	send := &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_SendMessage_FullMethodName}
	if _, err := ic(context.Background(), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01A", "x")}}, send, hold); err != nil {
		t.Fatal(err)
	}
	if held != 123456 {
		t.Fatalf("a send held %d bytes, want the sizer's 123456", held)
	}
	ack := &v2.AckMessageRequest{Topic: &v2.Resource{Name: "orders"}}
	if _, err := ic(context.Background(), ack, &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_AckMessage_FullMethodName}, hold); err != nil {
		t.Fatal(err)
	}
	if want := int64(proto.Size(ack)); held != want {
		t.Fatalf("an ack held %d bytes, want proto.Size's %d", held, want)
	}
}
