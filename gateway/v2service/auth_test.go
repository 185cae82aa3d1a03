package v2service

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// signed adds what the official Go client sends.
func signed(ctx context.Context, ak, sk string) context.Context {
	date := time.Now().UTC().Format(auth.DateTimeLayout)
	m := hmac.New(sha1.New, []byte(sk))
	m.Write([]byte(date))
	return metadata.AppendToOutgoingContext(ctx, "x-mq-date-time", date,
		"authorization", "MQv2-HMAC-SHA1 Credential="+ak+"//Rocketmq, SignedHeaders=x-mq-date-time, Signature="+hex.EncodeToString(m.Sum(nil)))
}

func authHarness(t *testing.T) *harness {
	return authHarnessWith(t, nil)
}

func authHarnessWith(t *testing.T, register func(*grpc.Server)) *harness {
	t.Helper()
	users, err := auth.Parse([]byte(`
users:
  - {accessKey: app, secretKey: app-secret, publish: [orders], subscribe: [orders], groups: [g-app]}
  - {accessKey: ops, secretKey: ops-secret, admin: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{auth: auth.New(users), register: register})
	h.topic("orders", model.TopicNormal, 1)
	h.topic("payments", model.TopicNormal, 1)
	h.group(model.Group{Name: "g-app"})
	h.group(model.Group{Name: "g-other"})
	return h
}

func unauthorized(t *testing.T, st *v2.Status, want string) {
	t.Helper()
	code(t, st, v2.Code_UNAUTHORIZED)
	if !strings.Contains(st.GetMessage(), want) {
		t.Fatalf("message %q, want it to say %q", st.GetMessage(), want)
	}
}

func TestAuthUnary(t *testing.T) {
	h := authHarness(t)
	send := func(topic, id string) *v2.SendMessageResponse {
		t.Helper()
		r, err := h.c.SendMessage(h.ctx("p1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg(topic, id, "", "x")}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// An unsigned send is refused before its messages are read (authTap):
	// a gRPC error naming the v2 code.
	unsigned := func(want string) {
		t.Helper()
		_, err := h.c.SendMessage(h.ctx("p1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01A", "", "x")}})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "UNAUTHORIZED (40100)") || !strings.Contains(err.Error(), want) {
			t.Fatalf("unsigned send: %v, want Unauthenticated, UNAUTHORIZED (40100) and %q", err, want)
		}
	}
	unsigned("no authorization header")
	h.as = [2]string{"app", "wrong"}
	unsigned("wrong signature")
	// Other calls answer in their response's status.
	q0, err := h.c.QueryRoute(h.ctx("p1", 5*time.Second), &v2.QueryRouteRequest{Topic: res("orders")})
	if err != nil {
		t.Fatal(err)
	}
	unauthorized(t, q0.Status, "wrong signature")
	h.as = [2]string{"app", "app-secret"}
	code(t, send("orders", "01C").Status, v2.Code_OK)
	unauthorized(t, send("payments", "01D").Status, `may not publish to topic "payments"`)
	// A batch with one forbidden topic stores nothing.
	r, err := h.c.SendMessage(h.ctx("p1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{
		newMsg("orders", "01E", "", "x"), newMsg("payments", "01F", "", "y")}})
	if err != nil {
		t.Fatal(err)
	}
	unauthorized(t, r.Status, "payments")
	q, err := h.c.QueryRoute(h.ctx("p1", 5*time.Second), &v2.QueryRouteRequest{Topic: res("payments")})
	if err != nil {
		t.Fatal(err)
	}
	unauthorized(t, q.Status, "neither publish to nor consume")
	a, err := h.c.AckMessage(h.ctx("c1", 5*time.Second), &v2.AckMessageRequest{Group: res("g-other"), Topic: res("orders"),
		Entries: []*v2.AckMessageEntry{{MessageId: "x", ReceiptHandle: "h"}}})
	if err != nil {
		t.Fatal(err)
	}
	unauthorized(t, a.Status, `consumer group "g-other"`)

	// Only 01C was stored: the admin sees exactly it.
	h.as = [2]string{"ops", "ops-secret"}
	if got := h.receiveIDs("g-other", "orders"); strings.Join(got, ",") != "01C" {
		t.Fatalf("orders holds %v, want [01C]", got)
	}
	if got := h.receiveIDs("g-other", "payments"); len(got) != 0 {
		t.Fatalf("payments holds %v, want nothing", got)
	}

	// Health checks need no credentials.
	if _, err := healthpb.NewHealthClient(h.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check without credentials: %v", err)
	}
}

func TestAuthStreams(t *testing.T) {
	h := authHarness(t)
	h.as = [2]string{"app", "app-secret"}
	code(t, h.send("orders", newMsg("orders", "01A", "", "a"), newMsg("orders", "01B", "", "b")).Status, v2.Code_OK)
	h.dispatched()

	recv := func(group string) received {
		return h.receive(&v2.ReceiveMessageRequest{Group: res(group), MessageQueue: &v2.MessageQueue{Topic: res("orders"), Id: -1},
			FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}, BatchSize: 1,
			InvisibleDuration: durationpb.New(time.Minute)}, 5*time.Second)
	}
	// The request read by the interceptor reaches the handler intact:
	// batch size 1 gives one message.
	r := recv("g-app")
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 1 {
		t.Fatalf("got %d messages, want 1 (batch size 1)", len(r.msgs))
	}
	r = recv("g-other")
	unauthorized(t, r.status, `consumer group "g-other"`)
	if len(r.msgs) != 0 || len(r.frames) != 2 {
		t.Fatalf("refused receive answered %d frames with %d messages", len(r.frames), len(r.msgs))
	}
	h.as = [2]string{}
	unauthorized(t, recv("g-app").status, "no authorization header")

	p := h.pull(&v2.PullMessageRequest{Group: res("g-other"), MessageQueue: &v2.MessageQueue{Topic: res("orders"), Id: 0}, Offset: 0, BatchSize: 8}, 5*time.Second)
	unauthorized(t, p.status, "no authorization header")
	h.as = [2]string{"app", "app-secret"}
	p = h.pull(&v2.PullMessageRequest{Group: res("g-other"), MessageQueue: &v2.MessageQueue{Topic: res("orders"), Id: 0}, Offset: 0, BatchSize: 8}, 5*time.Second)
	unauthorized(t, p.status, `consumer group "g-other"`)

	// Telemetry: a status-only command, then gRPC OK.
	h.as = [2]string{"app", "bad"}
	st, err := h.c.Telemetry(h.ctx("c1", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	unauthorized(t, cmd.GetStatus(), "wrong signature")
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("telemetry after refusal: %v, want the stream ended with OK", err)
	}
}

// Services other than MessagingService answer a gRPC error, and a caller
// of the admin API must be an admin.
func TestAuthOtherServices(t *testing.T) {
	h := authHarnessWith(t, func(s *grpc.Server) { adminv1.RegisterAdminServiceServer(s, adminv1.UnimplementedAdminServiceServer{}) })
	admin := adminv1.NewAdminServiceClient(h.conn)
	ctx := h.ctx("", 5*time.Second)
	_, err := admin.ListTopics(ctx, &adminv1.ListTopicsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unsigned admin call: %v, want Unauthenticated", err)
	}
	_, err = admin.ListTopics(signed(ctx, "app", "app-secret"), &adminv1.ListTopicsRequest{})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin API") {
		t.Fatalf("non-admin admin call: %v, want PermissionDenied", err)
	}
	// The rule is the service's method prefix, so it covers every admin
	// RPC, the ones that move a group's position included.
	_, err = admin.ResetOffset(signed(ctx, "app", "app-secret"), &adminv1.ResetOffsetRequest{Group: "billing", Topic: "orders",
		To: &adminv1.ResetOffsetRequest_Position{Position: adminv1.ResetPosition_RESET_POSITION_LATEST}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "admin API") {
		t.Fatalf("non-admin ResetOffset: %v, want PermissionDenied", err)
	}
	// An admin gets through to the service (here one that implements
	// nothing).
	_, err = admin.ListTopics(signed(ctx, "ops", "ops-secret"), &adminv1.ListTopicsRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("admin call: %v, want Unimplemented from the service", err)
	}
}

// A transaction check carries the half message and goes to a producer
// that declared the topic in its Settings, which any signed user can
// declare: with auth on a declaration counts only for a topic the user
// may publish to. app, who may publish only to orders, declares the
// transactional topic paytx as well and is never asked about its
// messages; the admin's producer is.
func TestAuthCheckBackOnlyToPublishersOfTheTopic(t *testing.T) {
	h := authHarness(t)
	h.topic("paytx", model.TopicTransaction, 1)
	h.as = [2]string{"ops", "ops-secret"}
	owner := telemetryProducer(t, h, "owner", res("paytx"))
	sent := h.sendOne("owner", txMsg(res("paytx"), "SECRET"))
	// app's producer is the most recently seen producer of paytx.
	h.clk.Advance(time.Second)
	h.as = [2]string{"app", "app-secret"}
	spy := telemetryProducer(t, h, "spy", res("orders"), res("paytx"))
	h.clk.Advance(5 * time.Second)
	cmd := recvCommand(t, owner, 10*time.Second)
	if cmd.GetRecoverOrphanedTransactionCommand().GetTransactionId() != sent.TransactionId {
		t.Fatalf("the owner's command %v, want the check", cmd)
	}
	// The spy got nothing: its next frame is the one pushed here.
	if err := h.sess.Send("spy", &v2.TelemetryCommand{Command: &v2.TelemetryCommand_ReconnectEndpointsCommand{
		ReconnectEndpointsCommand: &v2.ReconnectEndpointsCommand{Nonce: "marker"}}}); err != nil {
		t.Fatal(err)
	}
	if cmd := recvCommand(t, spy, 10*time.Second); cmd.GetReconnectEndpointsCommand().GetNonce() != "marker" {
		t.Fatalf("app's producer received %v", cmd)
	}
}
