package grpcserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
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

// A panic in a handler becomes INTERNAL with the server's message, is
// logged with its stack and the call's outcome, and is counted in
// rpc.server.call.duration as INTERNAL; the server keeps serving.
func TestInterceptorsRecoverPanic(t *testing.T) {
	var logs testutil.SyncBuffer
	reader := sdkmetric.NewManualReader()
	srv := New(Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	// A one-method service whose handler panics when asked to.
	srv.GRPC.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Panicky",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(_ context.Context, req any) (any, error) {
				if req.(*wrapperspb.StringValue).GetValue() == "panic" {
					panic("asked to panic")
				}
				return req, nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Panicky/Do"}, h)
		}}},
	}, struct{}{})
	conn := serveBufconn(t, srv)
	call := func(v string) error {
		return conn.Invoke(callCtx(t), "/test.Panicky/Do", wrapperspb.String(v), new(wrapperspb.StringValue))
	}

	err := call("panic")
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "logged by the server") {
		t.Fatalf("panicking call: %v, want INTERNAL", err)
	}
	if out := logs.String(); !strings.Contains(out, "panic in gRPC handler") || !strings.Contains(out, "asked to panic") ||
		!strings.Contains(out, "grpc.code=Internal") {
		t.Fatalf("log does not show the panic and the call's outcome:\n%s", out)
	}
	if err := call("calm"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	got := durations(t, reader)
	const method = "test.Panicky/Do"
	if got[method+"|INTERNAL|INTERNAL"] != 1 || got[method+"|OK|"] != 1 {
		t.Fatalf("rpc.server.call.duration counts %v", got)
	}
}
