package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// seen is what the test service's handler and interceptor observed of
// the last call.
type seen struct {
	mu          sync.Mutex
	intercepted bool   // ExtraUnaryInterceptors ran
	clientID    string // ClientID(ctx) in the handler: the chain's call info
	method      string // grpc.Method(ctx)
	md          metadata.MD
	deadline    time.Time
	hasDeadline bool
	callerValue any // the caller's context value, as the handler sees it
	peer        string
}

type callerKey struct{}

// echoService registers test.Echo/Do: it answers its request's value,
// or, for "error:...", "plain", "deadline", "header" and "panic", an error,
// a plain error, a context error, headers and trailers, a panic.
func echoService(srv *Server, s *seen) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: func(impl any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				v := req.(*wrapperspb.StringValue).GetValue()
				s.mu.Lock()
				s.clientID = ClientID(ctx)
				s.method, _ = grpc.Method(ctx)
				s.md, _ = metadata.FromIncomingContext(ctx)
				s.deadline, s.hasDeadline = ctx.Deadline()
				s.callerValue = ctx.Value(callerKey{})
				if p, ok := peer.FromContext(ctx); ok {
					s.peer = p.Addr.String()
				}
				s.mu.Unlock()
				switch {
				case strings.HasPrefix(v, "error:"):
					st, _ := status.New(codes.NotFound, v).WithDetails(wrapperspb.String("detail"))
					return nil, fmt.Errorf("wrapped: %w", st.Err())
				case v == "plain":
					return nil, errors.New("a plain error")
				case v == "deadline":
					return nil, context.DeadlineExceeded
				case v == "header":
					if err := grpc.SetHeader(ctx, metadata.Pairs("x-h", "1")); err != nil {
						return nil, err
					}
					if err := grpc.SetTrailer(ctx, metadata.Pairs("x-t", "2")); err != nil {
						return nil, err
					}
				case v == "panic":
					panic("asked to panic")
				}
				return wrapperspb.String("echo " + v), nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: impl, FullMethod: "/test.Echo/Do"}, h)
		}}},
	}, struct{}{})
}

func newEchoServer(t *testing.T, o Options) (*Server, *seen) {
	t.Helper()
	s := &seen{}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.ExtraUnaryInterceptors = append(o.ExtraUnaryInterceptors, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.mu.Lock()
		s.intercepted = true
		s.mu.Unlock()
		return h(ctx, req)
	})
	srv := New(o)
	echoService(srv, s)
	return srv, s
}

// outcome is what a caller sees of a call: the answer, or the error's
// code, message and details.
func outcome(resp *wrapperspb.StringValue, err error) string {
	if err != nil {
		st := status.Convert(err)
		return fmt.Sprintf("%s %q %v", st.Code(), st.Message(), st.Details())
	}
	return "OK " + resp.GetValue()
}

// In-process calls end exactly as calls over a connection to the same
// server do: answers, status errors with their details, plain and context
// errors, a recovered panic, unknown methods and services.
func TestInProcessMatchesConnection(t *testing.T) {
	srv, _ := newEchoServer(t, Options{})
	conn := serveBufconn(t, srv)
	in := srv.InProcess()
	cases := []struct{ method, value string }{
		{"/test.Echo/Do", "hello"},
		{"/test.Echo/Do", "error:no such thing"},
		{"/test.Echo/Do", "plain"},
		{"/test.Echo/Do", "deadline"},
		{"/test.Echo/Do", "panic"},
		{"/test.Echo/Other", "x"},
		{"/test.Nobody/Do", "x"},
	}
	for _, c := range cases {
		ctx := callCtx(t, "x-mq-client-id", "c1")
		r1, r2 := new(wrapperspb.StringValue), new(wrapperspb.StringValue)
		want := outcome(r1, conn.Invoke(ctx, c.method, wrapperspb.String(c.value), r1))
		got := outcome(r2, in.Invoke(ctx, c.method, wrapperspb.String(c.value), r2))
		if got != want {
			t.Errorf("%s(%q): in process %s, over a connection %s", c.method, c.value, got, want)
		}
	}
}

// The handler runs behind the whole interceptor chain and sees the
// caller's metadata as incoming metadata, its deadline, the method, the
// in-process peer, and none of the caller's context values.
func TestInProcessPassesTheChain(t *testing.T) {
	srv, s := newEchoServer(t, Options{})
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "secret"), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "c1", "x-request-id", "r1")
	out := new(wrapperspb.StringValue)
	if err := srv.InProcess().Invoke(ctx, "/test.Echo/Do", wrapperspb.String("hi"), out); err != nil {
		t.Fatal(err)
	}
	if out.GetValue() != "echo hi" {
		t.Fatalf("answer %q", out.GetValue())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want, _ := ctx.Deadline()
	switch {
	case !s.intercepted:
		t.Error("the interceptor chain did not run")
	case s.clientID != "c1":
		t.Errorf("ClientID %q: the call log interceptor did not run", s.clientID)
	case s.method != "/test.Echo/Do":
		t.Errorf("grpc.Method %q", s.method)
	case s.md.Get("x-request-id")[0] != "r1" || s.md.Get("x-mq-client-id")[0] != "c1":
		t.Errorf("incoming metadata %v", s.md)
	case !s.hasDeadline || !s.deadline.Equal(want):
		t.Errorf("deadline %v %v, want %v", s.deadline, s.hasDeadline, want)
	case s.callerValue != nil:
		t.Errorf("the handler sees the caller's context value %v", s.callerValue)
	case s.peer != InProcessAddr.String():
		t.Errorf("peer %q", s.peer)
	}
}

// The receive limit applies to in-process calls, and draining refuses them
// as it refuses network ones (the drain interceptor).
func TestInProcessAdmission(t *testing.T) {
	gate := admission.NewGate()
	srv, _ := newEchoServer(t, Options{Gate: gate, MaxBodySize: 1 << 10})
	in := srv.InProcess()
	big := wrapperspb.String(strings.Repeat("x", RecvLimit(1<<10)))
	err := in.Invoke(callCtx(t), "/test.Echo/Do", big, new(wrapperspb.StringValue))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "received message larger than max") {
		t.Fatalf("a request over the receive limit: %v", err)
	}
	gate.StartDrain()
	err = in.Invoke(callCtx(t), "/test.Echo/Do", wrapperspb.String("x"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("a call while draining: %v", err)
	}

}

// The interceptors (the in-flight budget among them) see the size an
// in-process call measured for its request, which is the request's own;
// over a connection there is none and the budget sizes the request itself.
func TestInProcessRequestSize(t *testing.T) {
	type sized struct {
		n, want int
		ok      bool
	}
	var got []sized
	srv := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ExtraUnaryInterceptors: []grpc.UnaryServerInterceptor{
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			m := req.(proto.Message)
			n, ok := requestSize(ctx, m)
			got = append(got, sized{n, proto.Size(m), ok})
			return h(ctx, req)
		},
	}})
	echoService(srv, &seen{})
	conn := serveBufconn(t, srv)
	body := wrapperspb.String(strings.Repeat("x", 300))
	if err := conn.Invoke(callCtx(t), "/test.Echo/Do", body, new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	if err := srv.InProcess().Invoke(callCtx(t), "/test.Echo/Do", body, new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	want := []sized{{0, proto.Size(body), false}, {proto.Size(body), proto.Size(body), true}}
	if !slices.Equal(got, want) {
		t.Fatalf("sizes seen over a connection, then in process: %+v, want %+v", got, want)
	}
	if n, ok := requestSize(context.Background(), body); ok {
		t.Fatalf("a request outside an in-process call has a known size %d", n)
	}
}

// With auth on, the tap refuses an unsigned call before the chain runs,
// with the same status as over a connection.
func TestInProcessAuthTap(t *testing.T) {
	users, err := auth.Parse([]byte("users:\n  - {accessKey: app, secretKey: app-secret, admin: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, s := newEchoServer(t, Options{Auth: auth.New(users)})
	conn := serveBufconn(t, srv)
	r := new(wrapperspb.StringValue)
	want := outcome(r, conn.Invoke(callCtx(t), "/test.Echo/Do", wrapperspb.String("x"), r))
	s.intercepted = false
	got := outcome(r, srv.InProcess().Invoke(callCtx(t), "/test.Echo/Do", wrapperspb.String("x"), r))
	if got != want || !strings.HasPrefix(got, "Unauthenticated") || !strings.Contains(got, v2.Code_UNAUTHORIZED.String()) {
		t.Fatalf("unsigned call in process: %s; over a connection: %s", got, want)
	}
	if s.intercepted {
		t.Fatal("the chain ran for a call the tap refused")
	}
}

// Headers and trailers the handler sets reach grpc.Header and
// grpc.Trailer; metadata a gRPC client would refuse is refused; a
// cancelled caller gets CANCELLED; streams are not served.
func TestInProcessHeadersAndRefusals(t *testing.T) {
	srv, _ := newEchoServer(t, Options{})
	in := srv.InProcess()
	var hdr, trl metadata.MD
	if err := in.Invoke(callCtx(t), "/test.Echo/Do", wrapperspb.String("header"), new(wrapperspb.StringValue), grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get("x-h"); len(got) != 1 || got[0] != "1" {
		t.Errorf("header %v", hdr)
	}
	if got := trl.Get("x-t"); len(got) != 1 || got[0] != "2" {
		t.Errorf("trailer %v", trl)
	}
	err := in.Invoke(callCtx(t, "x-bad", "caf\u00e9"), "/test.Echo/Do", wrapperspb.String("x"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "non-printable") {
		t.Errorf("non-ASCII metadata: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := in.Invoke(ctx, "/test.Echo/Do", wrapperspb.String("x"), new(wrapperspb.StringValue)); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled caller: %v", err)
	}
	if _, err := in.NewStream(callCtx(t), &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Stream"); status.Code(err) != codes.Unimplemented {
		t.Errorf("stream: %v", err)
	}
}

// The handler gets the request's fields and the caller the response's,
// without their bytes being copied.
func TestInProcessMove(t *testing.T) {
	src := &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "t"}, Body: []byte("body")}}}
	dst := new(v2.SendMessageRequest)
	move(dst, src)
	if !proto.Equal(dst, src) {
		t.Fatalf("moved %v, want %v", dst, src)
	}
	if &dst.GetMessages()[0].Body[0] != &src.GetMessages()[0].Body[0] {
		t.Fatal("the body was copied")
	}
}
