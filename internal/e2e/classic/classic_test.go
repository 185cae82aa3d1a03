package classic

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestClassicProduceConsume: admin CreateTopic on the remoting port, then
// SendSync, SendAsync, SendOneWay, a batch and a compressed body; a
// clustering push consumer receives every message with its tag, keys,
// topic and the message id the producer saw.
func TestClassicProduceConsume(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("T")
	createTopic(t, p, topic, 4)
	pr := newProducer(t, p)
	ctx := ctxT(t, 60*time.Second)

	ids := map[string]string{} // body → msg id the producer saw
	r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte("sync")).WithTag("tagA").WithKeys([]string{"k1", "k2"}))
	if err != nil || r.Status != primitive.SendOK {
		t.Fatalf("SendSync: %v %v", r, err)
	}
	if len(r.OffsetMsgID) != 32 {
		t.Fatalf("offset msg id %q is not 32 hex characters", r.OffsetMsgID)
	}
	ids["sync"] = r.MsgID

	var wg sync.WaitGroup
	wg.Add(1)
	var asyncErr error
	err = pr.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
		defer wg.Done()
		if err == nil && r.Status != primitive.SendOK {
			err = fmt.Errorf("status %v", r.Status)
		}
		asyncErr = err
	}, primitive.NewMessage(topic, []byte("async")))
	if err != nil {
		t.Fatalf("SendAsync: %v", err)
	}
	wg.Wait()
	if asyncErr != nil {
		t.Fatalf("SendAsync callback: %v", asyncErr)
	}
	if err := pr.SendOneWay(ctx, primitive.NewMessage(topic, []byte("oneway"))); err != nil {
		t.Fatalf("SendOneWay: %v", err)
	}
	batch := []*primitive.Message{
		primitive.NewMessage(topic, []byte("b1")), primitive.NewMessage(topic, []byte("b2")), primitive.NewMessage(topic, []byte("b3")),
	}
	if r, err := pr.SendSync(ctx, batch...); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("batch SendSync: %v %v", r, err)
	}
	big := bytes.Repeat([]byte("compressible "), 500) // > 4 KiB: the client zlib-compresses it
	if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, big)); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("big SendSync: %v %v", r, err)
	}

	want := []string{"sync", "async", "oneway", "b1", "b2", "b3", string(big)}
	col := newCollector()
	newPushConsumer(t, p, uniq("CG"), topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 45*time.Second, "every message", func() bool {
		for _, w := range want {
			if len(col.seen[w]) == 0 {
				return false
			}
		}
		return true
	})
	m := col.seen["sync"][0]
	if m.Topic != topic || m.GetTags() != "tagA" || m.GetKeys() != "k1 k2" || m.MsgId != ids["sync"] {
		t.Fatalf("consumed %q: topic %q tags %q keys %q id %q; want %q tagA \"k1 k2\" %q", m.Body, m.Topic, m.GetTags(), m.GetKeys(), m.MsgId, topic, ids["sync"])
	}
	for _, b := range []string{"b1", "b2", "b3"} {
		if id := col.seen[b][0].MsgId; id == "" || strings.EqualFold(id, col.seen[b][0].OffsetMsgId) {
			t.Fatalf("batch message %s has no minted unique id (msgId %q)", b, id)
		}
	}
}

// TestClassicClusteringSharesQueuesAndKeepsOffsets: two members of one
// group split the queues (each consumes a share, together everything);
// after both shut down, the committed offsets survive: a restarted member
// (consume-from-first) receives only what was produced since.
func TestClassicClusteringSharesQueuesAndKeepsOffsets(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 4)
	pr := newProducer(t, p)
	ctx := ctxT(t, 120*time.Second)

	col := newCollector()
	fn := func(who string) consumeFn {
		return func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			col.add(who, ms...)
			return consumer.ConsumeSuccess, nil
		}
	}
	a := newPushConsumer(t, p, group, topic, fn("a"))
	b := newPushConsumer(t, p, group, topic, fn("b"))
	const n = 40
	for i := range n {
		if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("m%d", i)))); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send %d: %v %v", i, r, err)
		}
	}
	col.wait(t, 60*time.Second, "every message by the two members", func() bool {
		if len(col.seen) < n {
			return false
		}
		byA, byB := 0, 0
		for _, who := range col.by {
			if who == "a" {
				byA++
			} else {
				byB++
			}
		}
		return byA > 0 && byB > 0
	})
	// The client commits a message's offset only after its listener
	// returned, and a shutdown racing that step drops the update and
	// redelivers (at-least-once, client side). Wait until the broker holds
	// every member's commit (the periodic UPDATE_CONSUMER_OFFSET), so what
	// follows tests only what the broker keeps across membership changes.
	waitCommitted(t, p, group, topic, 4, n, 30*time.Second)
	// Shutdown persists each member's offsets again (UPDATE_CONSUMER_OFFSET).
	_ = a.Shutdown()
	_ = b.Shutdown()

	for i := range 5 {
		if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("after%d", i)))); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send after %d: %v %v", i, r, err)
		}
	}
	col2 := newCollector()
	newPushConsumer(t, p, group, topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col2.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col2.wait(t, 60*time.Second, "the five new messages", func() bool {
		for i := range 5 {
			if len(col2.seen[fmt.Sprintf("after%d", i)]) == 0 {
				return false
			}
		}
		return true
	})
	col2.mu.Lock()
	defer col2.mu.Unlock()
	for body := range col2.seen {
		if !strings.HasPrefix(body, "after") {
			t.Fatalf("the restarted member got %q again: committed offsets were lost", body)
		}
	}
}

// TestClassicRetryThenDLQ: a message whose consumption keeps failing is
// sent back, redelivered from %RETRY%<group> with growing reconsume
// times under its own topic, and after maxReconsumeTimes lands in
// %DLQ%<group>, where another group reads it.
func TestClassicRetryThenDLQ(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 2)
	pr := newProducer(t, p)
	ctx := ctxT(t, 120*time.Second)
	if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte("poison")).WithKeys([]string{"pk"})); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", r, err)
	}
	col := newCollector()
	newPushConsumer(t, p, group, topic, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			cc.DelayLevelWhenNextConsume = 1 // 1 s instead of 10 s, 30 s, ...
		}
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(2))
	col.wait(t, 60*time.Second, "three deliveries", func() bool { return len(col.seen["poison"]) >= 3 })
	col.mu.Lock()
	for i, m := range col.seen["poison"][:3] {
		if m.Topic != topic || m.ReconsumeTimes != int32(i) || m.GetKeys() != "pk" {
			t.Errorf("delivery %d: topic %q reconsume %d keys %q; want %q %d pk", i, m.Topic, m.ReconsumeTimes, m.GetKeys(), topic, i)
		}
	}
	first := col.seen["poison"][0].MsgId
	col.mu.Unlock()

	dlq := newCollector()
	newPushConsumer(t, p, uniq("DLQREADER"), "%DLQ%"+group, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		dlq.add("d", ms...)
		return consumer.ConsumeSuccess, nil
	})
	dlq.wait(t, 60*time.Second, "the dead letter", func() bool { return len(dlq.seen["poison"]) > 0 })
	if m := dlq.seen["poison"][0]; m.MsgId != first || m.GetProperty("RETRY_TOPIC") != topic {
		t.Fatalf("dead letter id %q RETRY_TOPIC %q; want %q %q", m.MsgId, m.GetProperty("RETRY_TOPIC"), first, topic)
	}
	if n := col.count("poison"); n != 3 {
		t.Fatalf("the failing message was delivered %d times, want 3 (1 + maxReconsumeTimes)", n)
	}
}

type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit-me":
		return primitive.CommitMessageState
	case "rollback-me":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	return primitive.CommitMessageState
}

// TestClassicTransaction: a classic transaction producer commits one
// half message, rolls one back and leaves one unknown; mqgate asks it
// (CHECK_TRANSACTION_STATE over its connection), it answers commit. The
// consumer sees the two committed messages only.
func TestClassicTransaction(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("TX")
	createTopic(t, p, topic, 2)
	l := &txListener{checked: map[string]int{}}
	tp, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer(ns(p)), producer.WithGroupName(uniq("TPG")),
		producer.WithInstanceName(uniq("txprod")))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown() })
	ctx := ctxT(t, 90*time.Second)
	for _, body := range []string{"commit-me", "rollback-me", "check-me"} {
		m := primitive.NewMessage(topic, []byte(body))
		// Ask for the first check after 1 s instead of 6 s.
		m.WithProperty("CHECK_IMMUNITY_TIME_IN_SECONDS", "1")
		r, err := tp.SendMessageInTransaction(ctx, m)
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("half %s: %v %v", body, r, err)
		}
	}
	col := newCollector()
	newPushConsumer(t, p, uniq("CG"), topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 60*time.Second, "the committed and the checked message", func() bool {
		return len(col.seen["commit-me"]) > 0 && len(col.seen["check-me"]) > 0
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checked["check-me"] == 0 || l.checked["commit-me"] != 0 || l.checked["rollback-me"] != 0 {
		t.Fatalf("checks %v: want only check-me asked", l.checked)
	}
	if col.count("rollback-me") != 0 {
		t.Fatal("the rolled-back message was delivered")
	}
}

// A new group with the client's default CONSUME_FROM_LAST_OFFSET still
// reads what was produced before it started on a young topic (trap 14),
// and an orderly consumer (LOCK_BATCH_MQ) gets one queue's messages in
// order.
func TestClassicDefaultStartAndOrderly(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("T")
	createTopic(t, p, topic, 1)
	pr := newProducer(t, p)
	ctx := ctxT(t, 60*time.Second)
	for i := range 10 {
		if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprint(i)))); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send %d: %v %v", i, r, err)
		}
	}
	var mu sync.Mutex
	var order []string
	col := newCollector()
	newPushConsumer(t, p, uniq("CG"), topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range ms {
			order = append(order, string(m.Body))
		}
		mu.Unlock()
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	}, consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset), consumer.WithConsumerOrder(true))
	col.wait(t, 45*time.Second, "the ten messages", func() bool { return len(col.seen) == 10 })
	mu.Lock()
	defer mu.Unlock()
	for i, b := range order[:10] {
		if b != fmt.Sprint(i) {
			t.Fatalf("orderly consumption out of order: %v", order)
		}
	}
}

// TestClassicSQL92Selector: a classic push consumer subscribed with an
// SQL92 selector (rocketmq-client-go filters only tags on its side, so the
// filtering seen here is mqgate's) consumes exactly the messages whose
// properties match, in a one-queue topic where a last matching message
// marks the end.
func TestClassicSQL92Selector(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("T")
	createTopic(t, p, topic, 1)
	pr := newProducer(t, p)
	ctx := ctxT(t, 60*time.Second)
	match := map[string]bool{}
	for i := 1; i <= 10; i++ {
		body := fmt.Sprintf("m%d", i)
		m := primitive.NewMessage(topic, []byte(body)).WithTag([]string{"x", "y"}[i%2])
		m.WithProperty("a", fmt.Sprint(i))
		if i%3 == 0 {
			m.WithProperty("vip", "yes")
		}
		if r, err := pr.SendSync(ctx, m); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: %v %v", body, r, err)
		}
		match[body] = (i > 4 && i%2 == 0) || i%3 == 0 // "a > 4 AND TAGS = 'x'" or vip
	}
	end := primitive.NewMessage(topic, []byte("end"))
	end.WithProperty("vip", "last")
	if r, err := pr.SendSync(ctx, end); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("SendSync end: %v %v", r, err)
	}
	match["end"] = true
	col := newCollector()
	sel := consumer.MessageSelector{Type: consumer.SQL92, Expression: "(a > 4 AND TAGS = 'x') OR vip IS NOT NULL"}
	newSelectingPushConsumer(t, p, uniq("CG"), topic, sel, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 45*time.Second, "the matching messages", func() bool {
		for body, ok := range match {
			if ok && len(col.seen[body]) == 0 {
				return false
			}
		}
		return true
	})
	col.mu.Lock()
	defer col.mu.Unlock()
	for body := range col.seen {
		if !match[body] {
			t.Errorf("consumed %q, which the selector does not match", body)
		}
	}
}
