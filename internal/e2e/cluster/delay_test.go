package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterDelayFiresOnceAcrossFailover sends delayed messages (8 to
// 10 s), kills the leader with kill -9 before any is due, and restarts
// it. The next leader rebuilds the pending set from the replicated log
// and fires each message at its time: each is delivered exactly once,
// and none before it is due.
//
// Exactly once, not at least once: firing appends the message to its
// topic and the record that resolves the delayed one in one batch, one
// raft entry, so no crash can leave a fired message unresolved; and the
// kill here comes before anything is due, so the new leader is the only
// one that fires.
func TestClusterDelayFiresOnceAcrossFailover(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("delay"), e2eutil.Uniq("g")
	e2eutil.CLI(t, g.members[2].grpc, "topic", "create", topic, "--type", "DELAY", "--queues", "2")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	const n = 10
	base := time.Now().Add(8 * time.Second)
	due := map[string]time.Time{}
	for i := range n {
		at := base.Add(time.Duration(i) * 200 * time.Millisecond)
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("delayed-%d", i))}
		m.SetDelayTimestamp(at)
		due[sendOK(t, pr, m, 20*time.Second)] = at.Truncate(time.Millisecond)
	}
	l := g.leader(10 * time.Second)
	if time.Now().After(base.Add(-2 * time.Second)) {
		t.Fatalf("sending took until %v before the first due time: too late to kill the leader before it", time.Until(base))
	}
	l.proc.Kill9()
	g.start(l)
	t.Logf("leader %d killed and restarted %v before the first due time", l.id, time.Until(base))

	a := g.acker()
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string]int{}
	var late time.Duration
	// Receive until every message came and the last due time is 3 s past
	// (a second firing would show by then).
	until := base.Add(time.Duration(n-1)*200*time.Millisecond + 3*time.Second)
	deadline := base.Add(40 * time.Second)
	for len(got) < n || time.Now().Before(until) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delayed messages delivered within 40 s of the first due time", len(got), n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 32, 30*time.Second)
		now := time.Now()
		cancel()
		if err != nil {
			backoff(err)
			continue
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			at, ok := due[id]
			switch {
			case !ok:
				t.Fatalf("received %s (%q), never sent", id, mv.GetBody())
			case now.Before(at):
				t.Fatalf("%s delivered %v before it was due", id, at.Sub(now))
			case got[id] > 0:
				t.Fatalf("%s (%q) delivered twice", id, mv.GetBody())
			case mv.GetDeliveryAttempt() != 1:
				t.Fatalf("%s delivered as attempt %d, want 1", id, mv.GetDeliveryAttempt())
			}
			got[id]++
			late = max(late, now.Sub(at))
			a.mustAck(20*time.Second, cg, topic, mv)
		}
	}
	t.Logf("%d delayed messages delivered once each, at most %v after they were due", n, late)
}
