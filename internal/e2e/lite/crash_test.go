package lite

import (
	"fmt"
	"testing"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

// kill -9 after acknowledgements were answered: on restart the lite topics
// are there with their messages, acknowledged messages do not come back,
// what was in flight does (once the client's periodic COMPLETE_ADD,
// LiteSubscriptionManager.syncAllLiteSubscription, brings its
// subscription back: subscriptions live in memory, as upstream keeps
// them), and new messages follow in order.
func TestLiteKill9(t *testing.T) {
	begin(t)
	for _, flush := range []string{"async", "sync"} {
		t.Run(flush, func(t *testing.T) { liteKill9(t, flush) })
	}
}

func liteKill9(t *testing.T, flush string) {
	dir := t.TempDir()
	opts := testutil.StartOptions{DataDir: dir, Args: []string{"--flush", flush}}
	p := start(t, opts)
	parent, group := uniq("chat"), uniq("g")
	cli(t, p.GRPC, "topic", "create", parent, "--type", "LITE", "--queues", "2")
	cli(t, p.GRPC, "group", "create", group)
	pr := dial(t, p.GRPC, "producer")
	pr.mustSend(parent, "a", "a1", "a2", "a3")
	pr.mustSend(parent, "b", "b1", "b2")

	c := dial(t, p.GRPC, "lite")
	mq := c.queryRoute(parent)[0]
	c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	code(t, "subscribe", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "a", "b"), v2.Code_OK)
	got := c.receiveAll(group, mq, 5, 20*time.Second)
	if len(got) != 5 {
		t.Fatalf("received %v", byLite(got))
	}
	for _, m := range got {
		if m.GetSystemProperties().GetLiteTopic() == "a" {
			code(t, "ack", c.ack(group, parent, m), v2.Code_OK)
		}
	}
	p.Kill9()
	p.Wait(10 * time.Second)

	p = start(t, opts)
	out := cli(t, p.GRPC, "topic", "lite", parent, "--json")
	contains(t, "topic lite after the crash", out, `"total": "2"`)
	pr = dial(t, p.GRPC, "producer")
	c = dial(t, p.GRPC, "lite") // a new client: the old one went with the process
	mq = c.queryRoute(parent)[0]
	c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	code(t, "COMPLETE_ADD after restart", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "a", "b"), v2.Code_OK)
	pr.mustSend(parent, "a", "a4")
	after := c.receiveAll(group, mq, 3, 20*time.Second)
	want := map[string][]string{"a": {"a4"}, "b": {"b1", "b2"}}
	if fmt.Sprint(byLite(after)) != fmt.Sprint(want) {
		t.Fatalf("after kill -9 and restart: %v, want %v", byLite(after), want)
	}
	for _, m := range after {
		if m.GetSystemProperties().GetLiteTopic() == "b" && m.GetSystemProperties().GetDeliveryAttempt() != 1 {
			// In-flight state is not kept across a crash: the run starts over.
			t.Fatalf("attempt %d", m.GetSystemProperties().GetDeliveryAttempt())
		}
	}
	if _, ms := c.receive(group, mq, 32, 30*time.Second, time.Second); len(ms) != 0 {
		t.Fatalf("more after the restart: %v", byLite(ms))
	}
}
