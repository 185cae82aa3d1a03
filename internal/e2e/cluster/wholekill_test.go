package cluster

import (
	"context"
	"fmt"
	"sync"
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

	var (
		mu    sync.Mutex
		acked = map[string]string{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("%s-%d-%d", topic, p, i)
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				rs, err := pr.Send(sctx, &rmq.Message{Topic: topic, Body: []byte(body)})
				scancel()
				if err == nil {
					mu.Lock()
					acked[rs[0].MessageID] = body
					mu.Unlock()
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	deadline := time.Now().Add(30 * time.Second)
	for count() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d sends answered OK within 30 s", count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.killAll()
	before := count()
	g.startAll()
	g.leader(30 * time.Second)
	// The same senders go on: sends are answered OK again.
	deadline = time.Now().Add(30 * time.Second)
	for count() < before+50 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sends answered OK within 30 s of the restart, want 50", count()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()

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
