package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterTLSThroughProxies: three members with mutual TLS (each its
// own certificate of one CA, no host names in them) and a peer token,
// each dialling the others through proxies of its own (the addresses a
// member dials are not the others' own), serve a send load; a member
// killed while the others go far past what they keep of their raft logs
// catches up from a copy of a store sent over TLS; the leader killed,
// the others elect one; every send answered OK is received, and the
// commit logs end byte-identical. The cluster commands need the
// certificate: without it the members refuse them.
func TestClusterTLSThroughProxies(t *testing.T) {
	e2eutil.Begin(t)
	g := planGroup(t, []string{"--raft-log-keep", "32", "--peer-token", "peer-token-over-tls"})
	g.withTLS()
	g.proxy()
	g.startNew()
	l := g.leader(30 * time.Second)
	if !strings.Contains(l.proc.Log(), `"peer_tls":true`) {
		t.Fatalf("member %d does not say it runs with peer TLS:\n%s", l.id, l.proc.Log())
	}
	if out, err := e2eutil.CLIResultArgs(t, "cluster", "status", "--peer", l.peer, "--cluster-id", g.id,
		"--peer-token", g.token, "--timeout", "3s"); err == nil || !strings.Contains(out, "--peer-tls-cert") {
		t.Fatalf("status without a certificate: %v\n%s", err, out)
	}

	topic, cg := e2eutil.Uniq("tls"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	acked := map[string]string{}
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			body := fmt.Sprintf("%s-%d", topic, i)
			var err error
			for attempt := 0; attempt < 3; attempt++ { // the client retries across a failover
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var rs []*rmq.SendReceipt
				rs, err = pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(body)})
				cancel()
				if err == nil {
					acked[rs[0].MessageID] = body
					break
				}
			}
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	send(0, 20)
	lag := g.others(l)[0]
	lag.proc.Kill9()
	send(20, 300)
	g.start(lag)
	if _, ok := lag.proc.WaitLog(60*time.Second, func(m map[string]any) bool {
		return m["msg"] == "cluster: installed the copy of another member's store"
	}); !ok {
		t.Fatalf("member %d did not install a copy of the store", lag.id)
	}
	send(300, 320)
	g.caughtUp(lag, 60*time.Second)

	l = g.leader(30 * time.Second)
	l.proc.Kill9()
	send(320, 340)
	if nl := g.leader(30 * time.Second); nl == l {
		t.Fatalf("member %d, killed, still leads", l.id)
	}
	g.start(l)
	send(340, 360)
	g.caughtUp(l, 60*time.Second)

	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 60*time.Second, false)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends missing", n, len(acked))
	}
	g.stopAll()
	g.sameLogs()
}
