package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterClassicProducerAcrossFailover sends with the classic
// remoting client (rocketmq-client-go v2), its name server being a
// follower's --remoting-addr. The follower's relay greets the leader with
// the address the client dialled, so the routes the client gets name the
// follower, not the leader, and its sends go through the follower too.
// The leader is killed with kill -9: the relay closes the client's
// connection, the client dials the follower again, and the relay pipes
// that connection to the leader the others elect. Sends must be answered
// OK again within 15 s of the kill, where naming the dead leader would
// leave the client failing until its periodic route refresh (every 30 s
// in v2.1.2); and every send answered OK is received.
//
// 15 s: the election takes 1 to 2 s (10 ticks of 100 ms, randomised up
// to twice that), a connection waits up to --leader-wait (5 s) for the new
// leader to serve, and a send in flight may run into its 5 s timeout; on
// two busy cores that leaves room, and it is half the route refresh.
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
	if got := routedBroker(t, ns.remoting, topic); got != ns.remoting {
		t.Fatalf("the route through member %d names broker %s, want the member itself (%s)", ns.id, got, ns.remoting)
	}

	if l = g.leader(10 * time.Second); l == ns {
		t.Fatalf("member %d, the client's name server, leads: nothing left to relay to", ns.id)
	}
	killedAt := time.Now()
	l.proc.Kill9()
	// Sends resume once the others elected a leader and the follower's
	// relay pipes to it.
	const bound = 15 * time.Second
	var last error
	for {
		if last = send(); last == nil {
			break
		}
		if time.Since(killedAt) > bound {
			t.Fatalf("no classic send answered OK within %v of killing leader %d: %v", bound, l.id, last)
		}
		time.Sleep(200 * time.Millisecond) // a failed send may come back at once: pace the retries
	}
	t.Logf("classic sends answered OK again %v after leader %d was killed", time.Since(killedAt).Round(time.Millisecond), l.id)
	for range 10 {
		if err := send(); err != nil {
			t.Fatalf("send after the failover: %v", err)
		}
	}
	if got := routedBroker(t, ns.remoting, topic); got != ns.remoting {
		t.Fatalf("after the failover the route through member %d names broker %s, want %s", ns.id, got, ns.remoting)
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

// routedBroker asks the name server at addr for topic's route (classic
// GET_ROUTEINFO_BY_TOPIC) and returns the address of the broker it
// names first: the one whose queues consumers read (the other members
// follow as brokers producers may also send through).
func routedBroker(t *testing.T, addr, topic string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, codec.JSON)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	r, err := c.Invoke(ctx, &codec.Command{Code: 105, Ext: map[string]string{"topic": topic}}) // GET_ROUTEINFO_BY_TOPIC
	if err != nil {
		t.Fatalf("route of %s at %s: %v", topic, addr, err)
	}
	var route struct {
		BrokerDatas []struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(r.Body, &route); r.Code != 0 || err != nil || len(route.BrokerDatas) == 0 {
		t.Fatalf("route of %s at %s: code %d %q, %s, %v", topic, addr, r.Code, r.Remark, r.Body, err)
	}
	return route.BrokerDatas[0].BrokerAddrs["0"]
}
