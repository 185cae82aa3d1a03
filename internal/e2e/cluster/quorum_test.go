package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterQuorumLoss kills both followers with kill -9, leaving the
// leader alone: no send may be answered OK while a majority is missing.
// One send goes straight to the lone leader over the v2 API (it must
// answer an error status, HA_NOT_AVAILABLE or SLAVE_PERSISTENCE_TIMEOUT
// as it steps down, or close the call), others through the official
// client (it must fail). One follower is restarted: sends are answered
// OK again, and every send ever answered OK is received.
//
// A send refused without a majority may still be stored: its entry can
// be in the lone leader's raft log, which is longer than the restarted
// follower's, so that member leads again and commits it. The test
// reports how many of them were received and asserts nothing about it.
func TestClusterQuorumLoss(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("quorum"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	// One attempt per send while the majority is missing: the client
	// retries blocking dials otherwise, well past the send's context.
	once := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic), rmq.WithMaxAttempts(1))
	a := g.acker()

	acked := map[string]string{}
	seq := 0
	next := func() string { seq++; return fmt.Sprintf("%s-%d", topic, seq) }
	for range 10 {
		body := next()
		acked[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(body)}, 20*time.Second)] = body
	}

	l := g.leader(10 * time.Second)
	followers := g.others(l)
	for _, m := range followers {
		m.proc.Kill9()
	}
	// Nothing can commit now.
	failed := map[string]bool{}
	body := next()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, st, err := a.sendOnce(ctx, l.id-1, topic, body)
	cancel()
	switch {
	case err == nil && st.GetCode() == pb.Code_OK:
		t.Fatalf("send %q straight to the lone leader %d answered OK", body, l.id)
	case err == nil:
		t.Logf("without a majority: the lone leader answered %v: %s", st.GetCode(), st.GetMessage())
	default:
		t.Logf("without a majority: the call to the lone leader failed: %v", err)
	}
	failed[body] = true
	{
		body := next()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		began := time.Now()
		_, err := once.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(body)})
		cancel()
		if err == nil {
			t.Fatalf("send %q answered OK with only member %d of 3 running", body, l.id)
		}
		failed[body] = true
		t.Logf("without a majority: client send failed after %v: %v", time.Since(began).Round(time.Millisecond), err)
	}

	back := followers[0]
	g.start(back)
	g.leader(30 * time.Second)
	// The client may take a few attempts to find the serving leader;
	// then sends keep being answered OK.
	body = next()
	acked[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(body)}, 30*time.Second)] = body
	for range 20 {
		body := next()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(body)})
		cancel()
		if err != nil {
			t.Fatalf("send %q with members %d and %d running: %v", body, l.id, back.id, err)
		}
		acked[rs[0].MessageID] = body
	}

	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]string{}
	drain(t, c, a, cg, topic, 30*time.Second, got, func() bool { return missing(acked, got) == 0 })
	if n := missing(acked, got); n > 0 {
		t.Fatalf("%d of %d sends answered OK are missing", n, len(acked))
	}
	stored := 0
	for _, bodies := range got {
		if failed[bodies[0]] {
			stored++
		}
	}
	t.Logf("%d sends answered OK, all received; %d of the %d sends refused without a majority were received too", len(acked), stored, len(failed))
}

// missing counts the acknowledged sends (id → body) not in got, or
// received with another body.
func missing(acked map[string]string, got map[string][]string) int {
	n := 0
	for id, body := range acked {
		if b := got[id]; len(b) == 0 || b[0] != body {
			n++
		}
	}
	return n
}
