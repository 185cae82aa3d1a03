package v2service

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func liteMsg(parent, lite, id, body string) *v2.Message {
	return &v2.Message{Topic: res(parent), Body: []byte(body),
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_LITE, LiteTopic: &lite}}
}

// receiveAs is h.receive with the caller's client id.
func (h *harness) receiveAs(clientID string, req *v2.ReceiveMessageRequest) received {
	h.t.Helper()
	stream, err := h.c.ReceiveMessage(h.ctx(clientID, 10*time.Second), req)
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
			h.t.Fatalf("ReceiveMessage: %v", err)
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

func (h *harness) syncLite(clientID string, req *v2.SyncLiteSubscriptionRequest) *v2.Status {
	h.t.Helper()
	ctx := context.Background()
	if clientID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID)
	}
	r, err := h.c.SyncLiteSubscription(ctx, req)
	if err != nil {
		h.t.Fatalf("SyncLiteSubscription: gRPC error %v", err)
	}
	return r.GetStatus()
}

// A lite simple consumer's calls at the edge: Settings tell the quota and
// the longest name, SyncLiteSubscription checks what it is given, LITE
// messages travel with their lite topic, acks and expiry notices work.
func TestComponentLite(t *testing.T) {
	h := newHarness(t)
	if _, err := h.b.CreateTopic(context.Background(), model.Topic{Name: "chat", Type: model.TopicLite, Queues: 4, LiteTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h.topic("orders", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})

	tel := openTelemetry(t, h, "lite-1")
	if err := tel.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType:     v2.ClientType_LITE_SIMPLE_CONSUMER.Enum(),
		RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: res("g"),
			Subscriptions: []*v2.SubscriptionEntry{{Topic: res("chat"), Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	reply, err := tel.Recv()
	if err != nil {
		t.Fatal(err)
	}
	sub := reply.GetSettings().GetSubscription()
	if sub.GetLiteSubscriptionQuota() != 3000 || sub.GetMaxLiteTopicSize() != 64 || !sub.GetFifo() {
		t.Fatalf("lite settings reply %v", sub)
	}

	add := func(lites ...string) *v2.SyncLiteSubscriptionRequest {
		return &v2.SyncLiteSubscriptionRequest{Action: v2.LiteSubscriptionAction_PARTIAL_ADD, Topic: res("chat"), Group: res("g"), LiteTopicSet: lites}
	}
	code(t, h.syncLite("lite-1", add("")), v2.Code_ILLEGAL_LITE_TOPIC)
	code(t, h.syncLite("", add("conv-1")), v2.Code_CLIENT_ID_REQUIRED)
	normal := add("conv-1")
	normal.Topic = res("orders")
	code(t, h.syncLite("lite-1", normal), v2.Code_BAD_REQUEST)
	code(t, h.syncLite("lite-1", add("conv-1")), v2.Code_OK)

	code(t, h.send("chat", liteMsg("chat", "conv-1", "L1", "hello")).GetEntries()[0].GetStatus(), v2.Code_OK)
	code(t, h.send("chat", liteMsg("chat", "conv-2", "L2", "other")).GetEntries()[0].GetStatus(), v2.Code_OK)
	// A LITE message to a NORMAL topic, a NORMAL one to a LITE topic.
	code(t, h.send("orders", liteMsg("orders", "conv-1", "L3", "x")).GetStatus(), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	code(t, h.send("chat", newMsg("chat", "N1", "", "x")).GetStatus(), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)

	r := h.receiveAs("lite-1", recvReq("g", "chat", 16, 30*time.Second, "*"))
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 1 || r.msgs[0].GetSystemProperties().GetLiteTopic() != "conv-1" ||
		r.msgs[0].GetSystemProperties().GetMessageType() != v2.MessageType_LITE || string(r.msgs[0].Body) != "hello" {
		t.Fatalf("lite receive: %v", r.msgs)
	}
	sp := r.msgs[0].GetSystemProperties()
	lt := sp.GetLiteTopic()
	ack, err := h.c.AckMessage(h.ctx("lite-1", 5*time.Second), &v2.AckMessageRequest{Group: res("g"), Topic: res("chat"),
		Entries: []*v2.AckMessageEntry{{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle(), LiteTopic: &lt}}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, ack.GetStatus(), v2.Code_OK)

	// conv-1 goes idle past the TTL: the client is told on its stream.
	h.clk.Advance(2 * time.Minute)
	h.b.ExpireLiteTopics()
	cmd, err := tel.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if n := cmd.GetNotifyUnsubscribeLiteCommand(); n.GetLiteTopic() != "conv-1" {
		t.Fatalf("telemetry command %v, want NotifyUnsubscribeLiteCommand for conv-1", cmd)
	}
}
