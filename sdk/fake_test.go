package sdk

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// fakeServer is a tiny in-process MessagingService for the edge cases a
// real mqgate cannot be made to produce on demand (a stalled send, a
// Telemetry stream that never answers). Everything else is tested against
// the real binary (sdk_test.go).
type fakeServer struct {
	v2.UnimplementedMessagingServiceServer

	// send answers attempt n (1-based); nil answers OK.
	send func(ctx context.Context, n int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error)
	// noSettingsReply: the Telemetry stream never answers.
	noSettingsReply bool
	// holdStreams: Telemetry streams stay open after the client's
	// half-close until the server stops (Close must cancel them).
	holdStreams bool
	// backoff is the producer backoff the settings reply carries.
	backoff *v2.RetryPolicy
	// afterSettings are sent on the stream after the settings reply.
	afterSettings []*v2.TelemetryCommand
	// endFirstStream: the first Telemetry stream ends after its reply.
	endFirstStream bool

	mu         sync.Mutex
	attempts   []sendAttempt
	streams    int
	fromClient []*v2.TelemetryCommand
	terminated []string
	heartbeats int
	changed    chan struct{} // closed and replaced on every recorded event
}

type sendAttempt struct {
	ids         []string
	deadline    time.Time
	hasDeadline bool
	md          metadata.MD
}

func (f *fakeServer) event() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// wait blocks until cond holds (checked under f.mu after every event) or
// 5 s pass.
func (f *fakeServer) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("fake server: timed out waiting for %s", what)
		}
	}
}

func (f *fakeServer) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	a := sendAttempt{}
	for _, m := range req.GetMessages() {
		a.ids = append(a.ids, m.GetSystemProperties().GetMessageId())
	}
	a.deadline, a.hasDeadline = ctx.Deadline()
	a.md, _ = metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.attempts = append(f.attempts, a)
	n := len(f.attempts)
	f.event()
	f.mu.Unlock()
	if f.send != nil {
		return f.send(ctx, n, req)
	}
	return okSend(req), nil
}

func okSend(req *v2.SendMessageRequest) *v2.SendMessageResponse {
	resp := &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK, Message: "OK"}}
	for i, m := range req.GetMessages() {
		resp.Entries = append(resp.Entries, &v2.SendResultEntry{Status: &v2.Status{Code: v2.Code_OK}, MessageId: m.GetSystemProperties().GetMessageId(), Offset: int64(i)})
	}
	return resp
}

func statusOnly(c v2.Code) *v2.SendMessageResponse {
	return &v2.SendMessageResponse{Status: &v2.Status{Code: c, Message: c.String()}}
}

func (f *fakeServer) Heartbeat(context.Context, *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	f.mu.Lock()
	f.heartbeats++
	f.event()
	f.mu.Unlock()
	return &v2.HeartbeatResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
}

func (f *fakeServer) NotifyClientTermination(ctx context.Context, _ *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.terminated = append(f.terminated, strings.Join(md.Get("x-mq-client-id"), ","))
	f.event()
	f.mu.Unlock()
	return &v2.NotifyClientTerminationResponse{Status: &v2.Status{Code: v2.Code_OK}}, nil
}

func (f *fakeServer) Telemetry(stream grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]) error {
	f.mu.Lock()
	f.streams++
	endAfterReply := f.endFirstStream && f.streams == 1
	f.event()
	f.mu.Unlock()
	for {
		cmd, err := stream.Recv()
		if err != nil {
			if f.holdStreams {
				<-stream.Context().Done()
			}
			return nil
		}
		f.mu.Lock()
		f.fromClient = append(f.fromClient, cmd)
		f.event()
		f.mu.Unlock()
		s := cmd.GetSettings()
		if s == nil || f.noSettingsReply {
			continue
		}
		reply := &v2.Settings{ClientType: s.ClientType, AccessPoint: s.AccessPoint, RequestTimeout: s.RequestTimeout, PubSub: s.PubSub, UserAgent: s.UserAgent}
		reply.BackoffPolicy = f.backoff
		if reply.BackoffPolicy == nil {
			reply.BackoffPolicy = &v2.RetryPolicy{MaxAttempts: 3, Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
				Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2}}}
		}
		if err := stream.Send(&v2.TelemetryCommand{Status: &v2.Status{Code: v2.Code_OK}, Command: &v2.TelemetryCommand_Settings{Settings: reply}}); err != nil {
			return nil
		}
		for _, c := range f.afterSettings {
			if err := stream.Send(c); err != nil {
				return nil
			}
		}
		if endAfterReply {
			return nil
		}
	}
}

// startFake serves f on a loopback port until the test ends.
func startFake(t *testing.T, f *fakeServer) string {
	t.Helper()
	f.changed = make(chan struct{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	v2.RegisterMessagingServiceServer(gs, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return lis.Addr().String()
}

// dialFake dials addr (a fake server); the client is closed at cleanup
// unless the test closed it.
func dialFake(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// waitGoroutines waits until at most base goroutines (a count taken
// before the client was dialed) remain — grpc ends some of its own
// asynchronously after Close — and none runs SDK code or grpc's client
// connection; it fails with their stacks otherwise.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		sdkStacks := sdkGoroutines()
		if n <= base && sdkStacks == "" {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after Close, %d before; still running SDK code:\n%s\nall:\n%s", n, base, sdkStacks, buf)
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // polling a condition that has no event to wait on
	}
}

// sdkGoroutines returns the stacks of goroutines running this package's
// client code (the fake server's handlers and the tests' own goroutines
// aside) or grpc's client connection.
func sdkGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		client := strings.Contains(g, "mqgate/sdk.(*") && !strings.Contains(g, "mqgate/sdk.(*fakeServer)") ||
			strings.Contains(g, "grpc.(*ClientConn)") || strings.Contains(g, "transport.(*http2Client)")
		if client && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// unusedAddr returns a loopback "host:port" nothing listens on: the port
// is reserved and released again, so a connection to it is refused.
func unusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
