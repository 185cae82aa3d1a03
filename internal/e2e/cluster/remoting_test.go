package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterClassicProducerAcrossFailover sends with the classic
// remoting client (rocketmq-client-go v2), its name server being a
// follower's --remoting-addr. The route it gets names the leader's
// remoting listener. The leader is killed with kill -9: sends fail until
// the client's periodic route refresh (every 30 s in v2.1.2) asks the
// follower again and learns the new leader; then sends are answered OK
// again, and every send answered OK is received.
func TestClusterClassicProducerAcrossFailover(t *testing.T) {
	e2eutil.Begin(t)
	rlog.SetLogLevel("fatal")
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	ns := g.others(l)[0]
	topic, cg := e2eutil.Uniq("classic"), e2eutil.Uniq("g")
	e2eutil.CLI(t, ns.grpc, "topic", "create", topic, "--queues", "2")

	pr, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns.remoting}),
		producer.WithGroupName(e2eutil.Uniq("PG")), producer.WithInstanceName(e2eutil.Uniq("prod")), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Start(); err != nil {
		t.Fatalf("producer start: %v", err)
	}
	t.Cleanup(func() { _ = pr.Shutdown() })

	acked := map[string]bool{}
	seq := 0
	send := func() error {
		body := fmt.Sprintf("%s-%d", topic, seq)
		seq++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			return err
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send status %v", res.Status)
		}
		acked[body] = true
		return nil
	}
	for range 10 {
		if err := send(); err != nil {
			t.Fatalf("send before the kill: %v", err)
		}
	}

	l = g.leader(10 * time.Second)
	killedAt := time.Now()
	l.proc.Kill9()
	// Sends resume once the client refreshed its route.
	var last error
	for {
		if last = send(); last == nil {
			break
		}
		if time.Since(killedAt) > 45*time.Second {
			t.Fatalf("no classic send answered OK within 45 s of killing leader %d: %v", l.id, last)
		}
		time.Sleep(200 * time.Millisecond) // a failed send may come back at once; the route refresh cannot be awaited
	}
	t.Logf("classic sends answered OK again %v after leader %d was killed", time.Since(killedAt).Round(time.Millisecond), l.id)
	for range 10 {
		if err := send(); err != nil {
			t.Fatalf("send after the client found the new leader: %v", err)
		}
	}

	a := g.acker()
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]string{}
	bodies := func() map[string]bool {
		out := map[string]bool{}
		for _, bs := range got {
			out[bs[0]] = true
		}
		return out
	}
	have := func() bool {
		b := bodies()
		for body := range acked {
			if !b[body] {
				return false
			}
		}
		return true
	}
	drain(t, c, a, cg, topic, 30*time.Second, got, have)
	if !have() {
		t.Fatalf("of %d classic sends answered OK, %d received", len(acked), len(bodies()))
	}
}
