package lite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

var seq atomic.Int64

// begin skips in -short mode, and under -race unless MQGATE_E2E_RACE is
// set (as the other end-to-end packages: make test runs them in its pass
// without -race), and runs the test in parallel: each test starts its own
// mqgate.
func begin(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end (starts the mqgate binary)")
	}
	if testutil.RaceEnabled && os.Getenv("MQGATE_E2E_RACE") == "" {
		t.Skip("end-to-end tests run in make test's pass without -race (set MQGATE_E2E_RACE=1 to run them under -race)")
	}
	t.Parallel()
}

// start runs mqgate without its remoting listener.
func start(t *testing.T, o testutil.StartOptions) *testutil.Proc {
	t.Helper()
	o.NoRemoting = true
	return testutil.Start(t, o)
}

// uniq is a name unique to this process and call.
func uniq(prefix string) string { return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1)) }

// client is one v2 client (one client id) on one connection, as the Java
// client keeps one per endpoint.
type client struct {
	t  *testing.T
	c  v2.MessagingServiceClient
	id string
	// tel is the Telemetry stream once settings were sent.
	tel v2.MessagingService_TelemetryClient
}

func dial(t *testing.T, addr, role string) *client {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, c: v2.NewMessagingServiceClient(conn), id: uniq(role)}
}

// ctx carries the headers the Java client sends on every call
// (ClientImpl.sign: x-mq-client-id, language, protocol version).
func (c *client) ctx(d time.Duration) context.Context {
	ctx := testutil.Context(c.t, d)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", c.id, "x-mq-language", "JAVA", "x-mq-protocol", "v2",
		"x-mq-client-version", "5.1.0")
}

func res(name string) *v2.Resource { return &v2.Resource{Name: name} }

func code(t *testing.T, what string, st *v2.Status, want v2.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("%s: %v (%q), want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}

// queryRoute is ClientImpl.startUp → fetchTopicRoute.
func (c *client) queryRoute(topic string) []*v2.MessageQueue {
	c.t.Helper()
	r, err := c.c.QueryRoute(c.ctx(10*time.Second), &v2.QueryRouteRequest{Topic: res(topic)})
	if err != nil {
		c.t.Fatal(err)
	}
	code(c.t, "QueryRoute "+topic, r.GetStatus(), v2.Code_OK)
	return r.GetMessageQueues()
}

// settings opens the Telemetry stream and sends the client's settings
// (ClientImpl.onTopicRouteDataUpdate → syncSettings); it returns the
// server's reply.
func (c *client) settings(s *v2.Settings) *v2.Settings {
	c.t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", c.id,
		"x-mq-language", "JAVA", "x-mq-protocol", "v2", "x-mq-client-version", "5.1.0"))
	c.t.Cleanup(cancel)
	tel, err := c.c.Telemetry(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := tel.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: s}}); err != nil {
		c.t.Fatal(err)
	}
	reply, err := tel.Recv()
	if err != nil {
		c.t.Fatalf("settings reply: %v", err)
	}
	c.tel = tel
	return reply.GetSettings()
}

// liteConsumerSettings are a lite consumer's settings: its group and the
// bound (parent) topic with "*" (LitePushConsumerBuilderImpl.bindTopic:
// "Default subscription: (bindTopic, *)").
func liteConsumerSettings(ct v2.ClientType, group, parent string) *v2.Settings {
	return &v2.Settings{
		ClientType:     ct.Enum(),
		RequestTimeout: durationpb.New(3 * time.Second),
		UserAgent:      &v2.UA{Language: v2.Language_JAVA, Version: "5.1.0"},
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: res(group),
			Subscriptions: []*v2.SubscriptionEntry{{Topic: res(parent), Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}}}}},
	}
}

func producerSettings(topics ...string) *v2.Settings {
	var rs []*v2.Resource
	for _, t := range topics {
		rs = append(rs, res(t))
	}
	return &v2.Settings{ClientType: v2.ClientType_PRODUCER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		UserAgent: &v2.UA{Language: v2.Language_JAVA, Version: "5.1.0"},
		PubSub:    &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: rs}}}
}

// heartbeat is ClientImpl.doHeartbeat (ConsumerImpl.wrapHeartbeatRequest).
func (c *client) heartbeat(group string, ct v2.ClientType) {
	c.t.Helper()
	req := &v2.HeartbeatRequest{ClientType: ct}
	if group != "" {
		req.Group = res(group)
	}
	r, err := c.c.Heartbeat(c.ctx(10*time.Second), req)
	if err != nil {
		c.t.Fatal(err)
	}
	code(c.t, "Heartbeat", r.GetStatus(), v2.Code_OK)
}

// sync is LiteSubscriptionManager.syncLiteSubscription: action, the bound
// topic, the group, the lite topics, and an offset option for an add.
func (c *client) sync(action v2.LiteSubscriptionAction, group, parent string, opt *v2.OffsetOption, lites ...string) *v2.Status {
	c.t.Helper()
	r, err := c.c.SyncLiteSubscription(c.ctx(10*time.Second), &v2.SyncLiteSubscriptionRequest{Action: action,
		Topic: res(parent), Group: res(group), LiteTopicSet: lites, OffsetOption: opt})
	if err != nil {
		c.t.Fatal(err)
	}
	return r.GetStatus()
}

var msgSeq atomic.Int64

// send is ProducerImpl.send of messages built with setLiteTopic:
// PublishingMessageImpl makes them MessageType LITE and sets lite_topic.
func (c *client) send(parent, lite string, bodies ...string) (*v2.Status, []*v2.SendResultEntry) {
	c.t.Helper()
	var msgs []*v2.Message
	for _, b := range bodies {
		id := fmt.Sprintf("01AABBCCDDEEFF%04X%016X", os.Getpid()&0xffff, msgSeq.Add(1))
		lt := lite
		msgs = append(msgs, &v2.Message{Topic: res(parent), Body: []byte(b), SystemProperties: &v2.SystemProperties{
			MessageId: id, MessageType: v2.MessageType_LITE, LiteTopic: &lt, BodyEncoding: v2.Encoding_IDENTITY}})
	}
	r, err := c.c.SendMessage(c.ctx(10*time.Second), &v2.SendMessageRequest{Messages: msgs})
	if err != nil {
		c.t.Fatal(err)
	}
	return r.GetStatus(), r.GetEntries()
}

func (c *client) mustSend(parent, lite string, bodies ...string) {
	c.t.Helper()
	for _, b := range bodies {
		st, _ := c.send(parent, lite, b)
		code(c.t, "send to "+lite, st, v2.Code_OK)
	}
}

// receive is ConsumerImpl.receiveMessage with the request
// wrapReceiveMessageRequest builds: the group, a queue of the bound topic,
// "*", the batch size, the long-polling timeout, and either the
// invisible duration (simple consumers, auto_renew false) or auto_renew
// (push consumers).
func (c *client) receive(group string, mq *v2.MessageQueue, batch int32, invisible, poll time.Duration) (*v2.Status, []*v2.Message) {
	c.t.Helper()
	req := &v2.ReceiveMessageRequest{Group: res(group), MessageQueue: mq,
		FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:          batch,
		LongPollingTimeout: durationpb.New(poll)}
	if invisible > 0 {
		req.InvisibleDuration = durationpb.New(invisible)
	} else {
		req.AutoRenew = true
		req.AttemptId = proto(fmt.Sprint("attempt-", seq.Add(1)))
	}
	stream, err := c.c.ReceiveMessage(c.ctx(poll+10*time.Second), req)
	if err != nil {
		c.t.Fatal(err)
	}
	var st *v2.Status
	var msgs []*v2.Message
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.t.Fatalf("ReceiveMessage: %v", err)
		}
		if s := f.GetStatus(); s != nil {
			st = s
		}
		if m := f.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
	return st, msgs
}

func proto(s string) *string { return &s }

// ack is ConsumerImpl.ackMessage → wrapAckMessageRequest: one entry with
// the message id, the receipt handle and, for a lite consumer, the lite
// topic.
func (c *client) ack(group, parent string, m *v2.Message) *v2.Status {
	c.t.Helper()
	sp := m.GetSystemProperties()
	lt := sp.GetLiteTopic()
	r, err := c.c.AckMessage(c.ctx(10*time.Second), &v2.AckMessageRequest{Group: res(group), Topic: res(parent),
		Entries: []*v2.AckMessageEntry{{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle(), LiteTopic: &lt}}})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(r.GetEntries()) != 1 {
		c.t.Fatalf("ack answered %d entries", len(r.GetEntries()))
	}
	return r.GetEntries()[0].GetStatus()
}

// receiveAll receives (each call waiting up to poll) until want messages
// came or d passed.
func (c *client) receiveAll(group string, mq *v2.MessageQueue, want int, d time.Duration) []*v2.Message {
	c.t.Helper()
	var got []*v2.Message
	deadline := time.Now().Add(d)
	for len(got) < want && time.Now().Before(deadline) {
		st, msgs := c.receive(group, mq, 32, 30*time.Second, 2*time.Second)
		if st.GetCode() != v2.Code_OK && st.GetCode() != v2.Code_MESSAGE_NOT_FOUND {
			c.t.Fatalf("receive: %v %s", st.GetCode(), st.GetMessage())
		}
		got = append(got, msgs...)
	}
	return got
}

// byLite is the bodies received per lite topic, in order.
func byLite(ms []*v2.Message) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		lt := m.GetSystemProperties().GetLiteTopic()
		out[lt] = append(out[lt], string(m.GetBody()))
	}
	return out
}

func cli(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testutil.Binary(t), append(args, "--server", addr)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mqgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func contains(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s does not show %q:\n%s", what, w, out)
		}
	}
}
