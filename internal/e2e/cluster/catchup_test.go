package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterMemberCatchesUpFromCopy: a member killed while the others
// went on far past what they keep of their raft logs comes back, copies
// a store from another member, restarts itself to install it, catches
// up, and ends with a commit log byte-identical to the others'; it then
// leads and serves every message.
func TestClusterMemberCatchesUpFromCopy(t *testing.T) {
	e2eutil.Begin(t)
	// The members share a peer token: the copy goes through it too.
	g := newGroup(t, "--raft-log-keep", "32", "--peer-token", "catch-up-peer-token")
	l := g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("catchup"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	send := func(from, to int) map[string]string {
		out := map[string]string{}
		for i := from; i < to; i++ {
			body := fmt.Sprintf("%s-%d", topic, i)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(body)})
			cancel()
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			out[rs[0].MessageID] = body
		}
		return out
	}
	acked := send(0, 20)
	var lag *member
	for _, m := range g.members {
		if m != l {
			lag = m
			break
		}
	}
	lag.proc.Kill9()
	for id, b := range send(20, 300) {
		acked[id] = b
	}
	g.start(lag)
	if _, ok := lag.proc.WaitLog(60*time.Second, func(m map[string]any) bool {
		return m["msg"] == "cluster: installed the copy of another member's store"
	}); !ok {
		t.Fatalf("member %d did not install a copy of the store", lag.id)
	}
	for id, b := range send(300, 320) {
		acked[id] = b
	}
	// Hand the leadership to the member that caught up, and read
	// everything through it.
	g.caughtUp(lag, 60*time.Second)
	if out, err := g.cli("cluster", "transfer-leader", "--peer", lag.peer, "--cluster-id", g.id, "--to", fmt.Sprint(lag.id)); err != nil {
		t.Fatalf("transfer-leader: %v\n%s", err, out)
	}
	if nl := g.leader(30 * time.Second); nl != lag {
		t.Fatalf("member %d leads, not %d", nl.id, lag.id)
	}
	c := e2eutil.StartSimpleConsumer(t, e2eutil.Config(lag.grpc, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 60*time.Second, false)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends missing when read through the member that caught up", n, len(acked))
	}
	g.stopAll()
	g.sameLogs()
}

// caughtUp waits until m answers its status and has applied what the
// leader had committed when asked.
func (g *group) caughtUp(m *member, timeout time.Duration) {
	g.t.Helper()
	l := g.leader(timeout)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		lo, lerr := g.cli("cluster", "status", "--peer", l.peer, "--cluster-id", g.id, "--json")
		mo, merr := g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", g.id, "--json")
		var ls, ms struct{ Commit, Applied uint64 }
		if lerr == nil && merr == nil && json.Unmarshal([]byte(lo), &ls) == nil && json.Unmarshal([]byte(mo), &ms) == nil &&
			ms.Applied >= ls.Commit && ls.Commit > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.t.Fatalf("member %d did not catch up within %v", m.id, timeout)
}
