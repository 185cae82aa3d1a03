package v2service

// Component tests: every RPC family over an in-memory listener (bufconn),
// through the real interceptor chain, against the real broker on an
// in-memory store driven by a fake clock (no sleeps: time is advanced).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

type harness struct {
	t     *testing.T
	clk   *clock.Fake
	store *storage.Store
	b     *broker.Broker
	sess  *session.Registry
	gate  *admission.Gate
	svc   *MessagingService
	srv   *grpcserver.Server
	conn  *grpc.ClientConn
	c     v2.MessagingServiceClient
	// as signs the calls h.ctx makes with this access and secret key
	// (empty: unsigned).
	as [2]string
}

type harnessOpts struct {
	advertise string
	authority string
	auth      *auth.Authenticator
	register  func(*grpc.Server) // more services, before Serve
	inflight  int64              // Options.MaxInFlightBytes
	members   []RouteMember      // ServiceConfig.RouteMembers' answer
}

func newHarness(t *testing.T, opts ...harnessOpts) *harness {
	t.Helper()
	var o harnessOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	h := &harness{t: t, clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), gate: admission.NewGate()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: h.clk.Now, StoreHost: "gw:8081"})
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	b, err := broker.Open(context.Background(), broker.Config{Clock: h.clk, DefaultQueues: 4, Logger: log, PopSnapshotInterval: time.Hour}, st)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	h.sess = session.New(session.Config{Clock: h.clk, OnGone: b.ReleaseClient, Logger: log})
	sc := ServiceConfig{Clock: h.clk, Logger: log, AdvertiseAddr: o.advertise}
	if o.members != nil {
		sc.RouteMembers = func(context.Context) []RouteMember { return o.members }
	}
	h.svc, err = NewMessagingService(sc, b, h.sess, h.gate)
	if err != nil {
		t.Fatal(err)
	}
	b.SetCheckBackSender(h.svc.CheckBackSender(nil)) // as gateway/node wires it (one data group)
	h.srv = grpcserver.New(grpcserver.Options{Gate: h.gate, Sessions: h.sess, Logger: log, Auth: o.auth, MaxInFlightBytes: o.inflight})
	h.svc.Register(h.srv.GRPC)
	if o.register != nil {
		o.register(h.srv.GRPC)
	}
	lis := bufconn.Listen(1 << 20)
	go func() { _ = h.srv.Serve(lis) }()
	dopts := []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}
	if o.authority != "" {
		dopts = append(dopts, grpc.WithAuthority(o.authority))
	}
	h.conn, err = grpc.NewClient("passthrough:///bufnet", dopts...)
	if err != nil {
		t.Fatal(err)
	}
	h.c = v2.NewMessagingServiceClient(h.conn)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.conn.Close()
		h.gate.StartDrain()
		b.Drain()
		if err := h.srv.Stop(ctx); err != nil {
			t.Errorf("grpc stop: %v", err)
		}
		if err := b.Close(ctx); err != nil {
			t.Errorf("broker close: %v", err)
		}
		if err := st.Close(ctx); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return h
}

// ctx is a call context carrying a client id and a deadline.
func (h *harness) ctx(clientID string, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	h.t.Cleanup(cancel)
	if clientID != "" {
		// Duplicated headers, as the Go producer sends on retries: the
		// last value counts.
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "stale-"+clientID, "x-mq-client-id", clientID)
	}
	if h.as[0] != "" {
		ctx = signed(ctx, h.as[0], h.as[1])
	}
	return ctx
}

func (h *harness) topic(name string, typ model.TopicType, queues int32) {
	h.t.Helper()
	if _, err := h.b.CreateTopic(context.Background(), model.Topic{Name: name, Type: typ, Queues: queues}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) group(g model.Group) {
	h.t.Helper()
	if _, err := h.b.CreateGroup(context.Background(), g); err != nil {
		h.t.Fatal(err)
	}
}

// dispatched waits until everything appended is readable.
func (h *harness) dispatched() {
	h.t.Helper()
	_, written := h.store.LogRange()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.store.WaitDispatched(ctx, written); err != nil {
		h.t.Fatal(err)
	}
}

func res(name string) *v2.Resource { return &v2.Resource{Name: name} }

func newMsg(topic, id, tag string, body string) *v2.Message {
	m := &v2.Message{Topic: res(topic), Body: []byte(body),
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL}}
	if tag != "" {
		m.SystemProperties.Tag = &tag
	}
	return m
}

func (h *harness) send(topic string, msgs ...*v2.Message) *v2.SendMessageResponse {
	h.t.Helper()
	resp, err := h.c.SendMessage(h.ctx("producer-1", 5*time.Second), &v2.SendMessageRequest{Messages: msgs})
	if err != nil {
		h.t.Fatalf("SendMessage: %v", err)
	}
	h.dispatched()
	return resp
}

type received struct {
	frames []*v2.ReceiveMessageResponse
	status *v2.Status
	msgs   []*v2.Message
}

func (h *harness) receive(req *v2.ReceiveMessageRequest, deadline time.Duration) received {
	h.t.Helper()
	stream, err := h.c.ReceiveMessage(h.ctx("consumer-1", deadline), req)
	if err != nil {
		h.t.Fatalf("ReceiveMessage: %v", err)
	}
	var r received
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			h.t.Fatalf("ReceiveMessage stream ended with %v (want gRPC OK)", err)
		}
		r.frames = append(r.frames, f)
		switch c := f.Content.(type) {
		case *v2.ReceiveMessageResponse_Status:
			r.status = c.Status
		case *v2.ReceiveMessageResponse_Message:
			r.msgs = append(r.msgs, c.Message)
		}
	}
	checkFrameShape(h.t, r.frames)
	return r
}

// checkFrameShape asserts a receive stream's shape: one status frame first, messages
// only after an OK status, the delivery timestamp last.
func checkFrameShape(t *testing.T, frames []*v2.ReceiveMessageResponse) {
	t.Helper()
	if len(frames) < 2 {
		t.Fatalf("%d frames, want at least status + delivery timestamp", len(frames))
	}
	if frames[0].GetStatus() == nil {
		t.Fatalf("first frame is %T, want status", frames[0].Content)
	}
	if frames[len(frames)-1].GetDeliveryTimestamp() == nil {
		t.Fatalf("last frame is %T, want delivery timestamp", frames[len(frames)-1].Content)
	}
	for _, f := range frames[1 : len(frames)-1] {
		if f.GetMessage() == nil {
			t.Fatalf("middle frame is %T, want message", f.Content)
		}
	}
	if len(frames) > 2 && frames[0].GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("messages after a non-OK status %v", frames[0].GetStatus())
	}
}

func recvReq(group, topic string, batch int32, invisible time.Duration, filter string) *v2.ReceiveMessageRequest {
	return &v2.ReceiveMessageRequest{
		Group:             res(group),
		MessageQueue:      &v2.MessageQueue{Topic: res(topic), Id: 0, Broker: &v2.Broker{Name: DefaultBrokerName}},
		FilterExpression:  &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: filter},
		BatchSize:         batch,
		InvisibleDuration: durationpb.New(invisible),
	}
}

// nonBlocking is a deadline too short to long-poll: the server answers at
// once, so empty receives need no fake-clock dance.
const nonBlocking = 150 * time.Millisecond

func handleOf(m *v2.Message) string { return m.GetSystemProperties().GetReceiptHandle() }

func (h *harness) ack(group, topic string, handles ...string) *v2.AckMessageResponse {
	h.t.Helper()
	var es []*v2.AckMessageEntry
	for i, hd := range handles {
		es = append(es, &v2.AckMessageEntry{MessageId: fmt.Sprint("m", i), ReceiptHandle: hd})
	}
	resp, err := h.c.AckMessage(h.ctx("consumer-1", 5*time.Second), &v2.AckMessageRequest{Group: res(group), Topic: res(topic), Entries: es})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func code(t *testing.T, st *v2.Status, want v2.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("status %v (%q), want %v", st.GetCode(), st.GetMessage(), want)
	}
}

func TestComponentQueryRoute(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicFIFO, 3)
	ep := &v2.Endpoints{Scheme: v2.AddressScheme_DOMAIN_NAME, Addresses: []*v2.Address{{Host: "mq.example.com", Port: 18081}}}
	req := &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "orders"}, Endpoints: ep}
	r1, err := h.c.QueryRoute(h.ctx("c", 5*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	code(t, r1.Status, v2.Code_OK)
	if len(r1.MessageQueues) != 3 {
		t.Fatalf("%d queues", len(r1.MessageQueues))
	}
	for i, q := range r1.MessageQueues {
		want := &v2.MessageQueue{Topic: &v2.Resource{Name: "orders"}, Id: int32(i), Permission: v2.Permission_READ_WRITE,
			Broker:             &v2.Broker{Name: DefaultBrokerName, Id: 0, Endpoints: ep},
			AcceptMessageTypes: []v2.MessageType{v2.MessageType_FIFO}}
		if !proto.Equal(q, want) {
			t.Fatalf("queue %d = %v, want %v", i, q, want)
		}
	}
	r2, _ := h.c.QueryRoute(h.ctx("c", 5*time.Second), req)
	if !proto.Equal(r1, r2) {
		t.Fatal("route differs between calls (clients rebuild on every difference)")
	}
	r, _ := h.c.QueryRoute(h.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("missing"), Endpoints: ep})
	code(t, r.Status, v2.Code_TOPIC_NOT_FOUND)
	r, _ = h.c.QueryRoute(h.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("bad topic"), Endpoints: ep})
	code(t, r.Status, v2.Code_ILLEGAL_TOPIC)
	r, _ = h.c.QueryRoute(h.ctx("", 5*time.Second), req)
	code(t, r.Status, v2.Code_CLIENT_ID_REQUIRED)

	// Mixed topics accept every type.
	h.topic("mixed", model.TopicMixed, 1)
	r, _ = h.c.QueryRoute(h.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("mixed"), Endpoints: ep})
	if got := r.MessageQueues[0].AcceptMessageTypes; len(got) != 4 {
		t.Fatalf("mixed accepts %v", got)
	}
}

func TestComponentRouteEndpointsFallbacks(t *testing.T) {
	// No endpoints in the request: the :authority the client dialed.
	h := newHarness(t, harnessOpts{authority: "gw.example.com:9443"})
	h.topic("t", model.TopicNormal, 1)
	r, err := h.c.QueryRoute(h.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("t")})
	if err != nil {
		t.Fatal(err)
	}
	code(t, r.Status, v2.Code_OK)
	want := &v2.Endpoints{Scheme: v2.AddressScheme_DOMAIN_NAME, Addresses: []*v2.Address{{Host: "gw.example.com", Port: 9443}}}
	if got := r.MessageQueues[0].Broker.Endpoints; !proto.Equal(got, want) {
		t.Fatalf("authority endpoints %v", got)
	}
	// --advertise-addr wins over everything.
	h2 := newHarness(t, harnessOpts{advertise: "10.1.2.3:8081", authority: "gw.example.com:9443"})
	h2.topic("t", model.TopicNormal, 1)
	r, _ = h2.c.QueryRoute(h2.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("t"),
		Endpoints: &v2.Endpoints{Addresses: []*v2.Address{{Host: "x", Port: 1}}}})
	want = &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: "10.1.2.3", Port: 8081}}}
	if got := r.MessageQueues[0].Broker.Endpoints; !proto.Equal(got, want) {
		t.Fatalf("advertised endpoints %v", got)
	}
}

func TestComponentHeartbeatAndTermination(t *testing.T) {
	h := newHarness(t)
	r, err := h.c.Heartbeat(h.ctx("hb-1", 5*time.Second), &v2.HeartbeatRequest{}) // Go's recovery heartbeat
	if err != nil {
		t.Fatal(err)
	}
	code(t, r.Status, v2.Code_OK)
	if _, ok := h.sess.LastSeen("hb-1"); !ok {
		t.Fatal("heartbeat did not register the client")
	}
	r, _ = h.c.Heartbeat(h.ctx("hb-1", 5*time.Second), &v2.HeartbeatRequest{Group: res("g"), ClientType: v2.ClientType_SIMPLE_CONSUMER})
	code(t, r.Status, v2.Code_OK)
	r, _ = h.c.Heartbeat(h.ctx("hb-1", 5*time.Second), &v2.HeartbeatRequest{Group: res("bad group"), ClientType: v2.ClientType_SIMPLE_CONSUMER})
	code(t, r.Status, v2.Code_ILLEGAL_CONSUMER_GROUP)
	r, _ = h.c.Heartbeat(h.ctx("", 5*time.Second), &v2.HeartbeatRequest{})
	code(t, r.Status, v2.Code_CLIENT_ID_REQUIRED)

	n, err := h.c.NotifyClientTermination(h.ctx("hb-1", 5*time.Second), &v2.NotifyClientTerminationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	code(t, n.Status, v2.Code_OK)
	if _, ok := h.sess.LastSeen("hb-1"); ok {
		t.Fatal("terminated client still registered")
	}
	n, _ = h.c.NotifyClientTermination(h.ctx("never-seen", 5*time.Second), &v2.NotifyClientTerminationRequest{Group: res("g")})
	code(t, n.Status, v2.Code_OK)
}

func openTelemetry(t *testing.T, h *harness, clientID string) v2.MessagingService_TelemetryClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if clientID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID)
	}
	if h.as[0] != "" {
		ctx = signed(ctx, h.as[0], h.as[1])
	}
	s, err := h.c.Telemetry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestComponentTelemetryProducer(t *testing.T) {
	h := newHarness(t)
	s := openTelemetry(t, h, "prod-1")
	in := &v2.Settings{
		ClientType:     v2.ClientType_PRODUCER.Enum(),
		AccessPoint:    &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: "127.0.0.1", Port: 8081}}},
		RequestTimeout: durationpb.New(3 * time.Second),
		BackoffPolicy:  &v2.RetryPolicy{MaxAttempts: 3, Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{Multiplier: 1}}},
		PubSub:         &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: []*v2.Resource{res("orders"), {ResourceNamespace: "ns", Name: "pay"}}}},
		UserAgent:      &v2.UA{Language: v2.Language_GOLANG, Version: "5.0.1-rc1"},
	}
	if err := s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: in}}); err != nil {
		t.Fatal(err)
	}
	reply, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	code(t, reply.Status, v2.Code_OK)
	out := reply.GetSettings()
	if out == nil {
		t.Fatal("reply has no settings command (the Go client hangs in Start)")
	}
	pub := out.GetPublishing()
	if pub.GetMaxBodySize() != 4194304 || !pub.GetValidateMessageType() || len(pub.GetTopics()) != 2 {
		t.Fatalf("publishing %v", pub)
	}
	bp := out.GetBackoffPolicy()
	if bp.GetMaxAttempts() != 3 || bp.GetExponentialBackoff().GetInitial().AsDuration() != 10*time.Millisecond ||
		bp.GetExponentialBackoff().GetMax().AsDuration() != time.Second || bp.GetExponentialBackoff().GetMultiplier() != 2 {
		t.Fatalf("backoff %v", bp)
	}
	if out.GetMetric().GetOn() || out.GetClientType() != v2.ClientType_PRODUCER || out.GetRequestTimeout().AsDuration() != 3*time.Second ||
		!proto.Equal(out.GetAccessPoint(), in.AccessPoint) || out.GetUserAgent().GetVersion() != "5.0.1-rc1" {
		t.Fatalf("echoed fields %v", out)
	}
	st, ok := h.sess.Settings("prod-1")
	if !ok || st.ClientType != session.ClientProducer || !slices.Equal(st.PublishingTopics, []string{"orders", "ns%pay"}) || st.RequestTimeout != 3*time.Second {
		t.Fatalf("registry view %+v", st)
	}
	// The stream is the client's command channel now.
	if refs := h.sess.ProducersOf("ns%pay"); len(refs) != 1 || refs[0].ID != "prod-1" {
		t.Fatalf("ProducersOf %+v", refs)
	}
	cmd := &v2.TelemetryCommand{Command: &v2.TelemetryCommand_ReconnectEndpointsCommand{ReconnectEndpointsCommand: &v2.ReconnectEndpointsCommand{Nonce: "n1"}}}
	if err := h.sess.Send("prod-1", cmd); err != nil {
		t.Fatal(err)
	}
	got, err := s.Recv()
	if err != nil || got.GetReconnectEndpointsCommand().GetNonce() != "n1" {
		t.Fatalf("server command: %v %v", got, err)
	}

	// Draining ends the stream with gRPC OK.
	h.gate.StartDrain()
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after drain: %v, want EOF", err)
	}
	// A new stream is refused, and counted like a refused call.
	before := h.gate.Rejected()
	s2 := openTelemetry(t, h, "prod-2")
	if _, err := s2.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("new stream while draining: %v, want Unavailable", err)
	}
	if n := h.gate.Rejected() - before; n != 1 {
		t.Fatalf("refused stream counted %d times, want 1", n)
	}
}

func TestComponentTelemetryConsumer(t *testing.T) {
	h := newHarness(t)
	h.group(model.Group{Name: "fifo-g", FIFO: true, MaxDeliveryAttempts: 5, Retry: model.ExponentialRetryPolicy()})
	settings := func(group string) *v2.TelemetryCommand {
		return &v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
			ClientType: v2.ClientType_SIMPLE_CONSUMER.Enum(),
			PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: res(group),
				Subscriptions:      []*v2.SubscriptionEntry{{Topic: res("orders"), Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "a||b"}}},
				LongPollingTimeout: durationpb.New(7 * time.Second)}},
		}}}
	}
	s := openTelemetry(t, h, "cons-1")
	if err := s.Send(settings("fifo-g")); err != nil {
		t.Fatal(err)
	}
	reply, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	sub := reply.GetSettings().GetSubscription()
	if !sub.GetFifo() || sub.GetReceiveBatchSize() != 32 || sub.GetLongPollingTimeout().AsDuration() != 20*time.Second ||
		sub.GetGroup().GetName() != "fifo-g" || len(sub.GetSubscriptions()) != 1 {
		t.Fatalf("subscription %v", sub)
	}
	bp := reply.GetSettings().GetBackoffPolicy()
	if bp.GetMaxAttempts() != 5 || bp.GetExponentialBackoff().GetInitial().AsDuration() != 5*time.Second {
		t.Fatalf("backoff %v", bp)
	}
	st, _ := h.sess.Settings("cons-1")
	if st.Group != "fifo-g" || st.LongPollingTimeout != 7*time.Second || st.Subscriptions["orders"].Expression != "a||b" {
		t.Fatalf("registry view %+v", st)
	}

	// A group that does not exist: defaults (customized schedule), so the
	// client starts and its receives name the problem.
	s2 := openTelemetry(t, h, "cons-2")
	_ = s2.Send(settings("nogroup"))
	reply, err = s2.Recv()
	if err != nil {
		t.Fatal(err)
	}
	bp = reply.GetSettings().GetBackoffPolicy()
	if bp.GetMaxAttempts() != 17 || len(bp.GetCustomizedBackoff().GetNext()) != 18 || reply.GetSettings().GetSubscription().GetFifo() {
		t.Fatalf("default consumer settings %v", reply.GetSettings())
	}

	// No pub_sub: gRPC INVALID_ARGUMENT.
	s3 := openTelemetry(t, h, "cons-3")
	_ = s3.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{ClientType: v2.ClientType_PRODUCER.Enum()}}})
	if _, err := s3.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no pub_sub: %v", err)
	}
	// Bad group name: INVALID_ARGUMENT too.
	s4 := openTelemetry(t, h, "cons-4")
	_ = s4.Send(settings("bad group"))
	if _, err := s4.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad group: %v", err)
	}
	// Missing client id: a TelemetryCommand carrying the status.
	s5 := openTelemetry(t, h, "")
	_ = s5.Send(settings("fifo-g"))
	r5, err := s5.Recv()
	if err != nil {
		t.Fatal(err)
	}
	code(t, r5.GetStatus(), v2.Code_CLIENT_ID_REQUIRED)
}

func TestComponentSendReceiveAck(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 4)
	h.group(model.Group{Name: "g"})
	resp := h.send("orders", newMsg("orders", "ID-1", "a", "one"), newMsg("orders", "ID-2", "", "two"), newMsg("orders", "ID-3", "b", "three"))
	code(t, resp.Status, v2.Code_OK)
	if len(resp.Entries) != 3 {
		t.Fatalf("%d entries", len(resp.Entries))
	}
	for i, e := range resp.Entries {
		code(t, e.Status, v2.Code_OK)
		if e.MessageId != fmt.Sprint("ID-", i+1) {
			t.Fatalf("entry %d id %q (must echo the client's id)", i, e.MessageId)
		}
	}

	r := h.receive(recvReq("g", "orders", 32, 30*time.Second, "*"), 5*time.Second)
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 3 {
		t.Fatalf("received %d", len(r.msgs))
	}
	bodies := map[string]string{}
	for _, m := range r.msgs {
		sp := m.SystemProperties
		bodies[sp.MessageId] = string(m.Body)
		if m.Topic.GetName() != "orders" || sp.GetDeliveryAttempt() != 1 || handleOf(m) == "" ||
			sp.GetBodyDigest().GetChecksum() != md5Upper(m.Body) || sp.GetMessageType() != v2.MessageType_NORMAL ||
			sp.GetInvisibleDuration().AsDuration() != 30*time.Second || sp.StoreTimestamp == nil || sp.QueueOffset == nil ||
			sp.GetBornHost() == "" { // none sent: the producer's peer address
			t.Fatalf("delivered %v", m)
		}
		if (sp.MessageId == "ID-2") != (sp.Tag == nil) {
			t.Fatalf("tag presence wrong on %s: %v", sp.MessageId, sp.Tag)
		}
	}
	if bodies["ID-1"] != "one" || bodies["ID-2"] != "two" || bodies["ID-3"] != "three" {
		t.Fatalf("bodies %v", bodies)
	}
	// In flight: nothing more to receive.
	code(t, h.receive(recvReq("g", "orders", 32, 30*time.Second, "*"), nonBlocking).status, v2.Code_MESSAGE_NOT_FOUND)

	var handles []string
	for _, m := range r.msgs {
		handles = append(handles, handleOf(m))
	}
	// Mixed batch: MULTIPLE_RESULTS with per-entry codes in request order.
	a := h.ack("g", "orders", handles[0], "r1.forged", "")
	code(t, a.Status, v2.Code_MULTIPLE_RESULTS)
	code(t, a.Entries[0].Status, v2.Code_OK)
	code(t, a.Entries[1].Status, v2.Code_INVALID_RECEIPT_HANDLE)
	code(t, a.Entries[2].Status, v2.Code_INVALID_RECEIPT_HANDLE)
	if a.Entries[1].ReceiptHandle != "r1.forged" || a.Entries[1].MessageId != "m1" {
		t.Fatalf("entry 1 = %v", a.Entries[1])
	}
	a = h.ack("g", "orders", handles[1:]...)
	code(t, a.Status, v2.Code_OK)
	// A second ack of an acked delivery is refused.
	a = h.ack("g", "orders", handles...)
	code(t, a.Status, v2.Code_INVALID_RECEIPT_HANDLE)
	// Acked messages never come back.
	h.clk.Advance(time.Minute)
	code(t, h.receive(recvReq("g", "orders", 32, 30*time.Second, "*"), nonBlocking).status, v2.Code_MESSAGE_NOT_FOUND)
}

func TestComponentSendErrors(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.topic("fifo", model.TopicFIFO, 1)
	send := func(msgs ...*v2.Message) *v2.SendMessageResponse {
		resp, err := h.c.SendMessage(h.ctx("p", 5*time.Second), &v2.SendMessageRequest{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r := send(newMsg("missing", "X", "", "b"))
	code(t, r.Status, v2.Code_TOPIC_NOT_FOUND)
	if len(r.Entries) != 0 {
		t.Fatal("entries on a rejected request")
	}
	code(t, send(newMsg("orders", "X", "", "")).Status, v2.Code_MESSAGE_BODY_EMPTY)
	g := "grp"
	fm := newMsg("orders", "X", "", "b")
	fm.SystemProperties.MessageGroup = &g
	fm.SystemProperties.MessageType = v2.MessageType_FIFO
	code(t, send(fm).Status, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	code(t, send(newMsg("fifo", "X", "", "b")).Status, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	resp, err := h.c.SendMessage(h.ctx("", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "X", "", "b")}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.Status, v2.Code_CLIENT_ID_REQUIRED)
}

func TestComponentReceiveValidation(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	cases := []struct {
		name string
		req  *v2.ReceiveMessageRequest
		want v2.Code
	}{
		{"bad topic", recvReq("g", "a b", 1, 30*time.Second, "*"), v2.Code_ILLEGAL_TOPIC},
		{"bad group", recvReq("a b", "orders", 1, 30*time.Second, "*"), v2.Code_ILLEGAL_CONSUMER_GROUP},
		{"topic before group", recvReq("a b", "a b", 1, 30*time.Second, "*"), v2.Code_ILLEGAL_TOPIC},
		{"invisible too short", recvReq("g", "orders", 1, 5*time.Second, "*"), v2.Code_ILLEGAL_INVISIBLE_TIME},
		{"invisible too long", recvReq("g", "orders", 1, 13*time.Hour, "*"), v2.Code_ILLEGAL_INVISIBLE_TIME},
		{"malformed sql filter", func() *v2.ReceiveMessageRequest {
			r := recvReq("g", "orders", 1, 30*time.Second, "a > 'x'")
			r.FilterExpression.Type = v2.FilterType_SQL
			return r
		}(), v2.Code_ILLEGAL_FILTER_EXPRESSION},
		{"unknown topic", recvReq("g", "missing", 1, 30*time.Second, "*"), v2.Code_TOPIC_NOT_FOUND},
		{"unknown group", recvReq("nog", "orders", 1, 30*time.Second, "*"), v2.Code_CONSUMER_GROUP_NOT_FOUND},
		{"nothing there", recvReq("g", "orders", 1, 30*time.Second, "*"), v2.Code_MESSAGE_NOT_FOUND},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code(t, h.receive(c.req, nonBlocking).status, c.want)
		})
	}
	// auto_renew needs no invisible duration.
	r := recvReq("g", "orders", 1, 0, "*")
	r.InvisibleDuration, r.AutoRenew = nil, true
	code(t, h.receive(r, nonBlocking).status, v2.Code_MESSAGE_NOT_FOUND)

	// Missing client id: a status frame and a delivery timestamp.
	stream, err := h.c.ReceiveMessage(h.ctx("", 5*time.Second), recvReq("g", "orders", 1, 30*time.Second, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var frames []*v2.ReceiveMessageResponse
	for {
		f, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		frames = append(frames, f)
	}
	checkFrameShape(t, frames)
	code(t, frames[0].GetStatus(), v2.Code_CLIENT_ID_REQUIRED)
}

func TestComponentLongPollWokenByArrival(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	done := make(chan received, 1)
	go func() { done <- h.receive(recvReq("g", "orders", 4, 30*time.Second, "*"), 10*time.Second) }()
	// The receive parks (nothing there); a send wakes it before its poll
	// time, which only the fake clock could end.
	r := wokenByArrival(t, h, "orders", done)
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) == 0 || r.msgs[0].SystemProperties.MessageId != "W" {
		t.Fatalf("woken receive got %v", r.msgs)
	}
}

// wokenByArrival checks that a call parked in a long poll, answering on
// done, is woken by a message sent to topic (id "W"): no answer before the
// first send, an answer soon after one. The send repeats every 200 ms in
// case one raced ahead of the park.
func wokenByArrival[T any](t *testing.T, h *harness, topic string, done <-chan T) T {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("answered before any send: %+v", r)
	case <-time.After(100 * time.Millisecond): // time to park
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := h.c.SendMessage(h.ctx("p", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg(topic, "W", "", "wake")}})
		if err != nil || resp.Status.Code != v2.Code_OK {
			t.Fatalf("send: %v %v", resp, err)
		}
		select {
		case r := <-done:
			return r
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("parked call was not woken by an arrival")
		}
	}
}

func TestComponentTagFilter(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 2)
	h.group(model.Group{Name: "g"})
	h.send("orders", newMsg("orders", "A", "a", "1"), newMsg("orders", "B", "b", "2"), newMsg("orders", "C", "c", "3"), newMsg("orders", "N", "", "4"))
	var got []string
	for range 4 {
		r := h.receive(recvReq("g", "orders", 32, 30*time.Second, "a || b"), nonBlocking)
		for _, m := range r.msgs {
			got = append(got, m.SystemProperties.MessageId)
		}
		if r.status.Code == v2.Code_MESSAGE_NOT_FOUND {
			break
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("filtered receive got %v, want [A B]", got)
	}
}

func TestComponentChangeInvisibleAndRedelivery(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	h.send("orders", newMsg("orders", "M", "", "body"))
	r := h.receive(recvReq("g", "orders", 1, 10*time.Second, "*"), 5*time.Second)
	code(t, r.status, v2.Code_OK)
	old := handleOf(r.msgs[0])

	change := func(handle string, d *durationpb.Duration) *v2.ChangeInvisibleDurationResponse {
		resp, err := h.c.ChangeInvisibleDuration(h.ctx("consumer-1", 5*time.Second), &v2.ChangeInvisibleDurationRequest{
			Group: res("g"), Topic: res("orders"), ReceiptHandle: handle, InvisibleDuration: d, MessageId: "M"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Out of range: the request's handle is echoed.
	bad := change(old, durationpb.New(13*time.Hour))
	code(t, bad.Status, v2.Code_ILLEGAL_INVISIBLE_TIME)
	if bad.ReceiptHandle != old {
		t.Fatal("failed change did not echo the handle")
	}
	ok := change(old, durationpb.New(30*time.Second))
	code(t, ok.Status, v2.Code_OK)
	if ok.ReceiptHandle == "" || ok.ReceiptHandle == old {
		t.Fatalf("new handle %q", ok.ReceiptHandle)
	}
	// Past the original 10 s but within the new 30 s: still invisible.
	h.clk.Advance(15 * time.Second)
	code(t, h.receive(recvReq("g", "orders", 1, 10*time.Second, "*"), nonBlocking).status, v2.Code_MESSAGE_NOT_FOUND)
	// The superseded handle fails and changes nothing; it is echoed.
	stale := change(old, durationpb.New(time.Minute))
	code(t, stale.Status, v2.Code_INVALID_RECEIPT_HANDLE)
	if stale.ReceiptHandle != old {
		t.Fatal("stale change did not echo the handle")
	}
	code(t, h.ack("g", "orders", old).Entries[0].Status, v2.Code_INVALID_RECEIPT_HANDLE)
	// Not acked: it comes back after the new deadline, attempt 2.
	h.clk.Advance(16 * time.Second)
	r2 := h.receive(recvReq("g", "orders", 1, 10*time.Second, "*"), 5*time.Second)
	code(t, r2.status, v2.Code_OK)
	if r2.msgs[0].SystemProperties.GetDeliveryAttempt() != 2 || r2.msgs[0].SystemProperties.MessageId != "M" {
		t.Fatalf("redelivery %v", r2.msgs[0].SystemProperties)
	}
	code(t, h.ack("g", "orders", ok.ReceiptHandle).Entries[0].Status, v2.Code_INVALID_RECEIPT_HANDLE) // redelivered since
	code(t, h.ack("g", "orders", handleOf(r2.msgs[0])).Status, v2.Code_OK)
}

func TestComponentMaxAttemptsAndForwardToDLQ(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g", MaxDeliveryAttempts: 2})
	h.group(model.Group{Name: "dlq-reader"})
	h.send("orders", newMsg("orders", "M1", "", "first"), newMsg("orders", "M2", "", "second"))

	// M1: forwarded on request.
	r := h.receive(recvReq("g", "orders", 2, 10*time.Second, "*"), 5*time.Second)
	if len(r.msgs) != 2 {
		t.Fatalf("received %d", len(r.msgs))
	}
	var m1, m2 *v2.Message
	for _, m := range r.msgs {
		if m.SystemProperties.MessageId == "M1" {
			m1 = m
		} else {
			m2 = m
		}
	}
	fr, err := h.c.ForwardMessageToDeadLetterQueue(h.ctx("consumer-1", 5*time.Second), &v2.ForwardMessageToDeadLetterQueueRequest{
		Group: res("g"), Topic: res("orders"), ReceiptHandle: handleOf(m1), MessageId: "M1", DeliveryAttempt: 1, MaxDeliveryAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	code(t, fr.Status, v2.Code_OK)
	fr, _ = h.c.ForwardMessageToDeadLetterQueue(h.ctx("consumer-1", 5*time.Second), &v2.ForwardMessageToDeadLetterQueueRequest{
		Group: res("g"), Topic: res("orders"), ReceiptHandle: handleOf(m1)})
	code(t, fr.Status, v2.Code_INVALID_RECEIPT_HANDLE)

	// M2: never acked; delivered max_attempts (2) times, then dead-lettered.
	_ = m2
	h.clk.Advance(11 * time.Second)
	r = h.receive(recvReq("g", "orders", 2, 10*time.Second, "*"), 5*time.Second)
	if len(r.msgs) != 1 || r.msgs[0].SystemProperties.MessageId != "M2" || r.msgs[0].SystemProperties.GetDeliveryAttempt() != 2 {
		t.Fatalf("second delivery %v", r.msgs)
	}
	h.clk.Advance(11 * time.Second)
	code(t, h.receive(recvReq("g", "orders", 2, 10*time.Second, "*"), nonBlocking).status, v2.Code_MESSAGE_NOT_FOUND)

	// The DLQ topic is routable and readable like any topic.
	h.dispatched()
	rt, _ := h.c.QueryRoute(h.ctx("c", 5*time.Second), &v2.QueryRouteRequest{Topic: res("%DLQ%g"),
		Endpoints: &v2.Endpoints{Addresses: []*v2.Address{{Host: "127.0.0.1", Port: 8081}}}})
	code(t, rt.Status, v2.Code_OK)
	var got []string
	for range 3 {
		d := h.receive(recvReq("dlq-reader", "%DLQ%g", 32, 30*time.Second, "*"), nonBlocking)
		for _, m := range d.msgs {
			got = append(got, m.SystemProperties.MessageId+":"+string(m.Body))
			if m.Topic.GetName() != "%DLQ%g" {
				t.Fatalf("DLQ message topic %v", m.Topic)
			}
			if dl := m.SystemProperties.GetDeadLetterQueue(); dl.GetTopic() != "orders" {
				t.Fatalf("dead_letter_queue info %v", dl)
			}
		}
		if len(got) >= 2 {
			break
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"M1:first", "M2:second"}) {
		t.Fatalf("DLQ holds %v", got)
	}
}

// A stream that breaks mid-batch releases the unsent deliveries at once.
func TestComponentReceiveWriteFailureReleases(t *testing.T) {
	h := newHarness(t)
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	h.send("orders", newMsg("orders", "A", "", "1"), newMsg("orders", "B", "", "2"), newMsg("orders", "C", "", "3"))
	ctx := grpcserver.WithCallIDs(context.Background(), "c", "r")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Frames: status (1), A (2), B (3) fails.
	fs := &recordingStream{ctx: ctx, failAt: 3}
	if err := h.svc.ReceiveMessage(recvReq("g", "orders", 3, 60*time.Second, "*"), fs); err == nil {
		t.Fatal("write failure not reported")
	}
	sent := fs.sent[1].(*v2.ReceiveMessageResponse).GetMessage().SystemProperties.MessageId
	h.dispatched()
	r := h.receive(recvReq("g", "orders", 3, 60*time.Second, "*"), 5*time.Second)
	var back []string
	for _, m := range r.msgs {
		back = append(back, m.SystemProperties.MessageId)
	}
	if len(back) != 2 || slices.Contains(back, sent) {
		t.Fatalf("sent %s; visible again %v (want the two unsent)", sent, back)
	}
}

func TestComponentNamespaces(t *testing.T) {
	h := newHarness(t)
	h.topic("tenant%orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "tenant%g"})
	ns := func(name string) *v2.Resource { return &v2.Resource{ResourceNamespace: "tenant", Name: name} }
	m := newMsg("orders", "N1", "", "x")
	m.Topic = ns("orders")
	resp, err := h.c.SendMessage(h.ctx("p", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.Status, v2.Code_OK)
	h.dispatched()
	req := recvReq("g", "orders", 1, 30*time.Second, "*")
	req.Group, req.MessageQueue.Topic = ns("g"), ns("orders")
	r := h.receive(req, 5*time.Second)
	code(t, r.status, v2.Code_OK)
	// Delivered topic: the bare name plus the namespace.
	if tp := r.msgs[0].Topic; tp.Name != "orders" || tp.ResourceNamespace != "tenant" {
		t.Fatalf("delivered topic %v", tp)
	}
	a, _ := h.c.AckMessage(h.ctx("c", 5*time.Second), &v2.AckMessageRequest{Group: ns("g"), Topic: ns("orders"),
		Entries: []*v2.AckMessageEntry{{MessageId: "N1", ReceiptHandle: handleOf(r.msgs[0])}}})
	code(t, a.Status, v2.Code_OK)
	// The same names without the namespace are other resources.
	code(t, h.receive(recvReq("g", "orders", 1, 30*time.Second, "*"), nonBlocking).status, v2.Code_TOPIC_NOT_FOUND)
}
