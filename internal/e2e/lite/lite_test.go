package lite

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

// A producer and a lite simple consumer in the Java client's order:
//
//   - producer: ClientImpl.startUp (QueryRoute of its topic), the
//     Telemetry settings, then ProducerImpl.send of messages built with
//     MessageBuilder.setLiteTopic (PublishingMessageImpl: type LITE);
//   - consumer: LiteSimpleConsumerImpl.startUp → SimpleConsumerImpl →
//     ClientImpl.startUp (QueryRoute of the bound topic, Telemetry
//     settings with client type LITE_SIMPLE_CONSUMER, Heartbeat), then
//     LiteSubscriptionManager.startUp (syncAllLiteSubscription:
//     COMPLETE_ADD of its set, empty at first), subscribeLite
//     (PARTIAL_ADD, with an OffsetOption or without), receive
//     (SimpleConsumerImpl.receive0 on the first readable queue the
//     overridden updateSubscriptionLoadBalancer keeps), ack
//     (ConsumerImpl.wrapAckMessageRequest with the lite topic),
//     unsubscribeLite (PARTIAL_REMOVE), and the 30 s COMPLETE_ADD.
//
// Sources: apache/rocketmq-clients java/client/src/main/java/org/apache/
// rocketmq/client/java/impl/consumer/{LiteSimpleConsumerImpl,
// LiteSubscriptionManager, SimpleConsumerImpl, ConsumerImpl}.java and
// impl/ClientImpl.java.
func TestLiteSimpleConsumer(t *testing.T) {
	begin(t)
	p := start(t, testutil.StartOptions{})
	parent, group := uniq("chat"), uniq("g")
	cli(t, p.GRPC, "topic", "create", parent, "--type", "LITE", "--queues", "4")
	cli(t, p.GRPC, "group", "create", group)

	pr := dial(t, p.GRPC, "producer")
	pr.queryRoute(parent)
	pr.settings(producerSettings(parent))

	c := dial(t, p.GRPC, "lite-simple")
	mqs := c.queryRoute(parent)
	if len(mqs) == 0 {
		t.Fatal("no queues in the route")
	}
	mq := mqs[0] // the first readable queue: lite consumers need only the broker
	reply := c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	if s := reply.GetSubscription(); s.GetLiteSubscriptionQuota() != 3000 || s.GetMaxLiteTopicSize() != 64 {
		t.Fatalf("settings reply %v: want the lite quota and name limit", s)
	}
	c.heartbeat(group, v2.ClientType_LITE_SIMPLE_CONSUMER)
	code(t, "startUp COMPLETE_ADD", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil), v2.Code_OK)

	// Messages sent before the subscription are there for it (the
	// default start is the oldest message kept).
	pr.mustSend(parent, "order-1", "a1", "a2")
	code(t, "subscribeLite order-1", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "order-1"), v2.Code_OK)
	code(t, "subscribeLite order-2", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "order-2"), v2.Code_OK)
	pr.mustSend(parent, "order-2", "b1")
	pr.mustSend(parent, "order-1", "a3")
	pr.mustSend(parent, "order-3", "c1") // not subscribed

	got := c.receiveAll(group, mq, 4, 20*time.Second)
	if want := map[string][]string{"order-1": {"a1", "a2", "a3"}, "order-2": {"b1"}}; fmt.Sprint(byLite(got)) != fmt.Sprint(want) {
		t.Fatalf("received %v, want %v", byLite(got), want)
	}
	for _, m := range got {
		if m.GetSystemProperties().GetMessageType() != v2.MessageType_LITE || m.GetTopic().GetName() != parent {
			t.Fatalf("delivered %v", m.GetSystemProperties())
		}
	}
	// order-1's run is in flight: a new message of it waits for the acks.
	pr.mustSend(parent, "order-1", "a4")
	if st, ms := c.receive(group, mq, 32, 30*time.Second, time.Second); len(ms) != 0 {
		t.Fatalf("a lite topic with a run in flight delivered again: %v %v", st, byLite(ms))
	}
	for _, m := range got {
		code(t, "ack", c.ack(group, parent, m), v2.Code_OK)
	}
	if more := c.receiveAll(group, mq, 1, 20*time.Second); fmt.Sprint(byLite(more)) != fmt.Sprint(map[string][]string{"order-1": {"a4"}}) {
		t.Fatalf("after the acks: %v", byLite(more))
	} else {
		code(t, "ack a4", c.ack(group, parent, more[0]), v2.Code_OK)
	}

	// The CLI shows the lite topics and the group's backlog.
	out := cli(t, p.GRPC, "topic", "lite", parent)
	contains(t, "topic lite", out, "3 lite topics", "order-1", "order-2", "order-3", group)

	// unsubscribeLite: nothing more of order-2.
	code(t, "unsubscribeLite", c.sync(v2.LiteSubscriptionAction_PARTIAL_REMOVE, group, parent, nil, "order-2"), v2.Code_OK)
	pr.mustSend(parent, "order-2", "b2")
	if _, ms := c.receive(group, mq, 32, 30*time.Second, time.Second); len(ms) != 0 {
		t.Fatalf("unsubscribed lite topic delivered: %v", byLite(ms))
	}
	// The periodic syncAllLiteSubscription (COMPLETE_ADD) replaces the set.
	code(t, "syncAll", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "order-2"), v2.Code_OK)
	if ms := c.receiveAll(group, mq, 1, 20*time.Second); fmt.Sprint(byLite(ms)) != fmt.Sprint(map[string][]string{"order-2": {"b2"}}) {
		t.Fatalf("after COMPLETE_ADD: %v", byLite(ms))
	}

	// subscribeLite with OffsetOption MAX starts after the newest message.
	pr.mustSend(parent, "order-5", "old")
	code(t, "subscribeLite MAX", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent,
		&v2.OffsetOption{OffsetType: &v2.OffsetOption_Policy_{Policy: v2.OffsetOption_MAX}}, "order-5"), v2.Code_OK)
	pr.mustSend(parent, "order-5", "new")
	if ms := c.receiveAll(group, mq, 1, 20*time.Second); fmt.Sprint(byLite(ms)) != fmt.Sprint(map[string][]string{"order-5": {"new"}}) {
		t.Fatalf("subscription at MAX: %v", byLite(ms))
	}

	// Names are checked as the Java client checks them locally
	// (LiteSubscriptionManager.validateLiteTopic: not blank, at most
	// maxLiteTopicSize).
	code(t, "blank", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, ""), v2.Code_ILLEGAL_LITE_TOPIC)
	long := string(slices.Repeat([]byte("x"), 65))
	code(t, "too long", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, long), v2.Code_ILLEGAL_LITE_TOPIC)
	st, _ := pr.send(parent, long, "x")
	code(t, "send to a too long name", st, v2.Code_ILLEGAL_LITE_TOPIC)
}

// The quotas, with the codes the Java client turns into
// LiteTopicQuotaExceededException and LiteSubscriptionQuotaExceededException
// (exception/StatusChecker.java).
func TestLiteQuotas(t *testing.T) {
	begin(t)
	p := start(t, testutil.StartOptions{Args: []string{"--lite-topic-quota", "2", "--lite-subscription-quota", "2"}})
	parent, group := uniq("chat"), uniq("g")
	cli(t, p.GRPC, "topic", "create", parent, "--type", "LITE")
	cli(t, p.GRPC, "group", "create", group)
	pr := dial(t, p.GRPC, "producer")
	pr.mustSend(parent, "x", "1")
	pr.mustSend(parent, "y", "1")
	pr.mustSend(parent, "x", "2")
	st, _ := pr.send(parent, "z", "1")
	code(t, "third lite topic", st, v2.Code_LITE_TOPIC_QUOTA_EXCEEDED)

	c := dial(t, p.GRPC, "lite")
	if s := c.settings(liteConsumerSettings(v2.ClientType_LITE_PUSH_CONSUMER, group, parent)).GetSubscription(); s.GetLiteSubscriptionQuota() != 2 {
		t.Fatalf("settings reply quota %d, want 2", s.GetLiteSubscriptionQuota())
	}
	code(t, "two", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "a", "b"), v2.Code_OK)
	code(t, "third", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "c"), v2.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED)
	code(t, "full set of three", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "a", "b", "c"), v2.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED)
}

// A lite push consumer (LitePushConsumerImpl extends PushConsumerImpl):
// QueryAssignment of the bound topic (PushConsumerImpl.queryAssignment),
// receives with auto_renew on the assigned queue, a consume that returns
// SUSPEND (ConsumerImpl.wrapChangeInvisibleDuration: lite topic and
// suspend=true), and acks; an idle lite topic expires and the server
// tells the consumer with NotifyUnsubscribeLiteCommand on its Telemetry
// stream (ClientSessionImpl.onNext → LiteSubscriptionManager.
// onNotifyUnsubscribeLiteCommand).
func TestLitePushConsumerSuspendAndExpiry(t *testing.T) {
	begin(t)
	p := start(t, testutil.StartOptions{Args: []string{"--lite-expiry-interval", "1s"}})
	parent, group := uniq("chat"), uniq("g")
	cli(t, p.GRPC, "topic", "create", parent, "--type", "LITE", "--lite-ttl", "3s")
	cli(t, p.GRPC, "group", "create", group)
	pr := dial(t, p.GRPC, "producer")

	c := dial(t, p.GRPC, "lite-push")
	c.queryRoute(parent)
	reply := c.settings(liteConsumerSettings(v2.ClientType_LITE_PUSH_CONSUMER, group, parent))
	if !reply.GetSubscription().GetFifo() {
		t.Fatal("a lite push consumer must be told fifo (in order per lite topic)")
	}
	c.heartbeat(group, v2.ClientType_LITE_PUSH_CONSUMER)
	code(t, "startUp COMPLETE_ADD", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil), v2.Code_OK)
	ar, err := c.c.QueryAssignment(c.ctx(10*time.Second), &v2.QueryAssignmentRequest{Topic: res(parent), Group: res(group)})
	if err != nil {
		t.Fatal(err)
	}
	code(t, "QueryAssignment", ar.GetStatus(), v2.Code_OK)
	if len(ar.GetAssignments()) == 0 {
		t.Fatal("no assignment")
	}
	mq := ar.GetAssignments()[0].GetMessageQueue()
	code(t, "subscribeLite", c.sync(v2.LiteSubscriptionAction_PARTIAL_ADD, group, parent, nil, "session-1"), v2.Code_OK)
	pr.mustSend(parent, "session-1", "s1")

	var first *v2.Message
	for deadline := time.Now().Add(20 * time.Second); first == nil && time.Now().Before(deadline); {
		if _, ms := c.receive(group, mq, 32, 0, 2*time.Second); len(ms) > 0 {
			first = ms[0]
		}
	}
	if first == nil || string(first.GetBody()) != "s1" {
		t.Fatalf("push receive: %v", first)
	}
	// ConsumeResult.SUSPEND: the run goes out again after the duration,
	// and the attempt is not counted.
	sp := first.GetSystemProperties()
	lt := sp.GetLiteTopic()
	susp := true
	cr, err := c.c.ChangeInvisibleDuration(c.ctx(10*time.Second), &v2.ChangeInvisibleDurationRequest{Group: res(group), Topic: res(parent),
		ReceiptHandle: sp.GetReceiptHandle(), InvisibleDuration: durationpb.New(time.Second), MessageId: sp.GetMessageId(), LiteTopic: &lt, Suspend: &susp})
	if err != nil {
		t.Fatal(err)
	}
	code(t, "ChangeInvisibleDuration suspend", cr.GetStatus(), v2.Code_OK)
	var again *v2.Message
	for deadline := time.Now().Add(20 * time.Second); again == nil && time.Now().Before(deadline); {
		if _, ms := c.receive(group, mq, 32, 0, 2*time.Second); len(ms) > 0 {
			again = ms[0]
		}
	}
	if again == nil || string(again.GetBody()) != "s1" || again.GetSystemProperties().GetDeliveryAttempt() != 1 {
		t.Fatalf("after SUSPEND: %v", again.GetSystemProperties())
	}
	code(t, "ack", c.ack(group, parent, again), v2.Code_OK)

	// session-1 goes idle past the 3 s TTL: the consumer is told.
	cmds := make(chan *v2.TelemetryCommand, 4)
	go func() {
		for {
			cmd, err := c.tel.Recv()
			if err != nil {
				close(cmds)
				return
			}
			cmds <- cmd
		}
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case cmd, ok := <-cmds:
			if !ok {
				t.Fatal("telemetry stream ended before the unsubscription notice")
			}
			if n := cmd.GetNotifyUnsubscribeLiteCommand(); n != nil {
				if n.GetLiteTopic() != "session-1" {
					t.Fatalf("notice for %q", n.GetLiteTopic())
				}
				out := cli(t, p.GRPC, "topic", "lite", parent)
				contains(t, "topic lite after expiry", out, "0 lite topics")
				return
			}
		case <-timeout:
			t.Fatal("no NotifyUnsubscribeLiteCommand within 30 s of a 3 s TTL")
		}
	}
}
