package cluster

import (
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterKill9AllUnderSyncSends kills all three members with kill -9
// at once under a sync send load and restarts them: every send answered
// OK is received afterwards (an OK means the entry was in a majority's
// fsynced raft logs), the same senders are answered OK again, and after
// a clean stop the members' commit logs are byte-identical.
func TestClusterKill9AllUnderSyncSends(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t, "--flush", "sync")
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("all"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	load := startLoad(pr, topic, 4)
	defer load.stop()
	load.waitFor(t, 200, 30*time.Second, "before the kill")
	g.killAll()
	before := load.count()
	g.startAll()
	g.leader(30 * time.Second)
	// The same senders go on: sends are answered OK again.
	load.waitFor(t, before+50, 30*time.Second, "after the restart")
	acked := load.stop()

	a := g.acker()
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]string{}
	drain(t, c, a, cg, topic, 60*time.Second, got, func() bool { return missing(acked, got) == 0 })
	if n := missing(acked, got); n > 0 {
		t.Fatalf("%d of %d sends answered OK are missing after all members were killed", n, len(acked))
	}
	t.Logf("%d sends answered OK before all members were killed, %d in all; all received", before, len(acked))
	g.stopAll()
	g.sameLogs()
}
