package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// messaging registers SendMessage and AckMessage of the v2
// MessagingService: a send whose first message's topic is "hold" waits
// for release before it answers; every call answers OK.
func messaging(srv *Server, release <-chan struct{}, entered chan<- struct{}) {
	handler := func(newReq func() any, method string) grpc.MethodHandler {
		return func(impl any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := newReq()
			if err := dec(in); err != nil {
				return nil, err
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: impl, FullMethod: method}, func(ctx context.Context, req any) (any, error) {
				if r, ok := req.(*v2.SendMessageRequest); ok {
					if r.GetMessages()[0].GetTopic().GetName() == "hold" {
						entered <- struct{}{}
						<-release
					}
					return &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
				}
				return &v2.AckMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
			})
		}
	}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "apache.rocketmq.v2.MessagingService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "SendMessage", Handler: handler(func() any { return new(v2.SendMessageRequest) }, v2.MessagingService_SendMessage_FullMethodName)},
			{MethodName: "AckMessage", Handler: handler(func() any { return new(v2.AckMessageRequest) }, v2.MessagingService_AckMessage_FullMethodName)},
		},
	}, struct{}{})
}

// await waits for a held call to enter its handler, failing when it
// ended instead.
func await(t *testing.T, entered <-chan struct{}, held <-chan error) {
	t.Helper()
	select {
	case <-entered:
	case err := <-held:
		t.Fatalf("the call to hold ended: %v", err)
	}
}

// readsServer serves a MessagingService (messaging) on a loopback port
// with a decode-counting codec.
func readsServer(t *testing.T, o Options) (addr string, codec *countingCodec, release func(), entered chan struct{}) {
	t.Helper()
	codec = &countingCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	o.Codec = codec
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(o)
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	entered = make(chan struct{}, 16)
	messaging(srv, released, entered)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return lis.Addr().String(), codec, release, entered
}

// clientFrom is a client of addr whose connections come from the local
// address ip.
func clientFrom(t *testing.T, addr, ip string) v2.MessagingServiceClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return v2.NewMessagingServiceClient(cc)
}

func sendOf(topic string, body int) *v2.SendMessageRequest {
	return &v2.SendMessageRequest{Messages: []*v2.Message{newMsg(topic, "01X", strings.Repeat("x", body))}}
}

// A request is read only once the budget has room for the receive limit
// under its caller's share: a caller whose held requests leave no room is
// answered TOO_MANY_REQUESTS with its request unread, while another
// address is read and served.
func TestRequestsAreReadWithinTheBudget(t *testing.T) {
	// The receive limit is 64 KiB + 2 MiB of envelopes; a share holds one
	// read's reservation (readFactor times it) and 768 KiB more.
	read := readFactor * int64(RecvLimit(64<<10))
	addr, codec, release, entered := readsServer(t, Options{MaxBodySize: 64 << 10, MaxInFlightBytes: 2 * (read + 768<<10)})
	a := clientFrom(t, addr, "127.0.0.1")
	held := make(chan error, 1)
	go func() {
		_, err := a.SendMessage(callCtx(t, "x-mq-client-id", "c1"), sendOf("hold", 60<<10))
		held <- err
	}()
	await(t, entered, held)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "c1")
	// 60 KiB held + a read fit the share: read.
	if r, err := a.SendMessage(ctx, sendOf("t", 1<<10)); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("a second call within the share: %v %v", r.GetStatus(), err)
	}
	if got := codec.unmarshal.Load(); got != 2 {
		t.Fatalf("%d requests decoded, want 2", got)
	}
	// Hold more: an 800 KiB request, then the share has no room for
	// another read.
	go func() {
		_, err := a.SendMessage(callCtx(t, "x-mq-client-id", "c1"), sendOf("hold", 800<<10))
		held <- err
	}()
	await(t, entered, held)
	r, err := a.SendMessage(ctx, sendOf("t", 1<<10))
	if err != nil || r.GetStatus().GetCode() != v2.Code_TOO_MANY_REQUESTS {
		t.Fatalf("a call over its caller's share: %v %v, want TOO_MANY_REQUESTS", r.GetStatus(), err)
	}
	if got := codec.unmarshal.Load(); got != 3 {
		t.Fatalf("%d requests decoded, want 3: the refused one must not be read", got)
	}
	b := clientFrom(t, addr, "127.0.0.2")
	if r, err := b.SendMessage(ctx, sendOf("t", 1<<10)); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("another address beside a full share: %v %v", r.GetStatus(), err)
	}
	release()
	for range 2 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
}

// With auth on, a unary call whose signature does not verify is answered
// UNAUTHORIZED without its request being read, and a SendMessage from a
// user who may publish to no topic is refused when it opens.
func TestUnsignedAndConsumeOnlyCallsAreNotRead(t *testing.T) {
	users, err := auth.Parse([]byte("users:\n  - {accessKey: app, secretKey: app-secret}\n  - {accessKey: cons, secretKey: cons-secret, publish: [], subscribe: [t], groups: [g]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr, codec, _, _ := readsServer(t, Options{Auth: auth.New(users)})
	c := clientFrom(t, addr, "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := &v2.AckMessageRequest{Group: &v2.Resource{Name: strings.Repeat("g", 4<<20)}}
	r, err := c.AckMessage(metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "c1"), big)
	if err != nil || r.GetStatus().GetCode() != v2.Code_UNAUTHORIZED {
		t.Fatalf("unsigned 4 MiB ack: %v %v, want UNAUTHORIZED", r.GetStatus(), err)
	}
	date := time.Now().UTC().Format(auth.DateTimeLayout)
	cons := metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "c1", "x-mq-date-time", date,
		"authorization", auth.V2Sign("cons", "cons-secret", date))
	_, err = c.SendMessage(cons, sendOf("t", 4<<20))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may not publish to any topic") {
		t.Fatalf("a consume-only user's send: %v, want PERMISSION_DENIED", err)
	}
	if got := codec.unmarshal.Load(); got != 0 {
		t.Fatalf("%d requests decoded, want none", got)
	}
	// The consume-only user's other calls are read and checked as before.
	if r, err := c.AckMessage(cons, &v2.AckMessageRequest{Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "t"}}); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("a consume-only user's ack: %v %v", r.GetStatus(), err)
	}
}
