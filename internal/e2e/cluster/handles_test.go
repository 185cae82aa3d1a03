package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterReceiptHandlesAcrossFailover receives messages with a long
// invisible duration, kills the leader with kill -9, and acknowledges
// half of them with the handles the dead leader issued: every ack is
// accepted (OK) once the new leader serves. When the invisible duration
// has passed, exactly the unacknowledged half comes back, each as
// delivery attempt 2 and not before its invisible time ended, and no
// acknowledged message ever does.
func TestClusterReceiptHandlesAcrossFailover(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("rh"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	a := g.acker()

	const n = 20
	sent := map[string]int{}
	for i := range n {
		sent[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("rh-%d", i))}, 20*time.Second)] = i
	}

	// The invisible duration covers the failover and the acks after it.
	const invisible = 20 * time.Second
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	views := map[string]*rmq.MessageView{}
	visibleAt := map[string]time.Time{} // the earliest a redelivery may come
	deadline := time.Now().Add(20 * time.Second)
	for len(views) < n && time.Now().Before(deadline) {
		asked := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 32, invisible)
		cancel()
		if err != nil {
			backoff(err)
			continue
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			if _, ok := sent[id]; !ok {
				t.Fatalf("received %s (%q), never sent", id, mv.GetBody())
			}
			if views[id] != nil {
				t.Fatalf("%s delivered again (attempt %d) while invisible", id, mv.GetDeliveryAttempt())
			}
			views[id], visibleAt[id] = mv, asked.Add(invisible)
		}
	}
	if len(views) < n {
		t.Fatalf("received %d of %d messages", len(views), n)
	}
	firstVisible := time.Now().Add(invisible)
	for _, at := range visibleAt {
		if at.Before(firstVisible) {
			firstVisible = at
		}
	}

	l := g.leader(10 * time.Second)
	killedAt := time.Now()
	l.proc.Kill9()

	// Ack the even half with the dead leader's handles, before any of
	// them becomes visible again.
	acked, unacked := map[string]bool{}, map[string]bool{}
	tries := 0
	for id, mv := range views {
		if sent[id]%2 == 1 {
			unacked[id] = true
			continue
		}
		k, err := a.ack(firstVisible.Add(-time.Second), cg, topic, mv.GetReceiptHandle())
		if err != nil {
			t.Fatalf("ack of %s after killing leader %d: not accepted %v after the kill: %v", id, l.id, time.Since(killedAt), err)
		}
		tries += k
		acked[id] = true
	}
	t.Logf("leader %d killed; %d acks accepted %v after the kill (%d attempt rounds in all)", l.id, len(acked), time.Since(killedAt), tries)

	// The unacked half comes back once its invisible time ends; wait for
	// all of it, then ask once more: an acknowledged message that were to
	// come back would be visible by then too (all were received together).
	again := map[string]bool{}
	deadline = firstVisible.Add(30 * time.Second)
	for extra := false; ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 32, invisible)
		cancel()
		if err != nil {
			backoff(err)
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			switch {
			case acked[id]:
				t.Fatalf("acknowledged message %s (%q) delivered again (attempt %d)", id, mv.GetBody(), mv.GetDeliveryAttempt())
			case !unacked[id]:
				t.Fatalf("received %s (%q), not one of the unacknowledged", id, mv.GetBody())
			case again[id]:
				t.Fatalf("%s delivered a third time (attempt %d)", id, mv.GetDeliveryAttempt())
			case mv.GetDeliveryAttempt() != 2:
				t.Fatalf("%s redelivered as attempt %d, want 2", id, mv.GetDeliveryAttempt())
			case time.Now().Before(visibleAt[id]):
				t.Fatalf("%s redelivered %v before its invisible duration ended", id, visibleAt[id].Sub(time.Now()))
			}
			again[id] = true
			a.mustAck(10*time.Second, cg, topic, mv)
		}
		if extra && len(mvs) == 0 && err != nil && e2eutil.IsNoMessage(err) {
			break
		}
		if len(again) == len(unacked) {
			extra = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d unacknowledged messages came back within 30 s of their invisible time's end", len(again), len(unacked))
		}
	}
}
