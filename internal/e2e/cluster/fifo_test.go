package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterFIFOAcrossFailover sends ordered messages in three message
// groups of a FIFO topic, one goroutine per group, each send after the
// previous one was answered OK (a send that fails is sent again, as an
// application does, until it is answered OK); the leader is killed with
// kill -9 midway and the sends go on. A FIFO consumer group then
// consumes everything. Asserted, per message group: the deliveries, with
// consecutive repeats of one message collapsed, are exactly the sends in
// send order (every send is there, once it is answered OK, in order, and
// nothing else). A consecutive repeat is allowed: a send whose answer was
// lost in the failover was stored and then sent again, so it is in the
// queue twice, one right after the other.
func TestClusterFIFOAcrossFailover(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("fifo"), e2eutil.Uniq("fg")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--type", "FIFO", "--queues", "2")
	e2eutil.CLI(t, g.members[1].grpc, "group", "create", cg, "--fifo")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	const perGroup = 40
	mgs := []string{"mg-a", "mg-b", "mg-c"}
	var (
		mu      sync.Mutex
		okCount = map[string]int{} // sends answered OK, per message group
		resent  int                // sends answered OK only after a failed attempt
		errs    []error
	)
	var wg sync.WaitGroup
	for _, mg := range mgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGroup {
				m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("%s/%d", mg, i))}
				m.SetMessageGroup(mg)
				_, attempts, err := sendRetry(pr, m, 40*time.Second)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s/%d: %w", mg, i, err))
					mu.Unlock()
					return
				}
				okCount[mg]++
				if attempts > 1 {
					resent++
				}
				mu.Unlock()
			}
		}()
	}
	// Kill the leader once every group is well under way.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		least := perGroup
		for _, mg := range mgs {
			least = min(least, okCount[mg])
		}
		failed := len(errs) > 0
		mu.Unlock()
		if least >= perGroup/3 || failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sends too slow: %d per group within 30 s", least)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l := g.leader(10 * time.Second)
	l.proc.Kill9()
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("sends not answered OK after the leader (member %d) was killed: %v", l.id, errs)
	}
	t.Logf("leader %d killed midway; %d sends answered OK only when sent again", l.id, resent)

	// Consume: each group's deliveries, in delivery order.
	a := g.acker()
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]int{}
	done := func() bool {
		for _, mg := range mgs {
			if s := got[mg]; len(s) == 0 || s[len(s)-1] != perGroup-1 {
				return false
			}
		}
		return true
	}
	deadline = time.Now().Add(40 * time.Second)
	// Once each group's last message came, ask once more: a repeat of a
	// last message would be delivered then.
	for extra := false; ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 32, 20*time.Second)
		cancel()
		if err != nil {
			backoff(err)
		}
		for _, mv := range mvs {
			mg, seq, ok := strings.Cut(string(mv.GetBody()), "/")
			n, cerr := strconv.Atoi(seq)
			if !ok || cerr != nil || !slices.Contains(mgs, mg) || mv.GetMessageGroup() == nil || *mv.GetMessageGroup() != mg {
				t.Fatalf("unexpected message %q (message group %v)", mv.GetBody(), mv.GetMessageGroup())
			}
			got[mg] = append(got[mg], n)
			a.mustAck(20*time.Second, cg, topic, mv)
		}
		if extra && len(mvs) == 0 && e2eutil.IsNoMessage(err) {
			break
		}
		extra = extra || done()
		if time.Now().After(deadline) {
			t.Fatalf("not every message group consumed to its end within 40 s: %v", got)
		}
	}
	repeats := 0
	for _, mg := range mgs {
		seq := slices.Compact(slices.Clone(got[mg]))
		repeats += len(got[mg]) - len(seq)
		for i, n := range seq {
			if n != i {
				t.Fatalf("message group %s delivered out of order or with a gap: %v (consecutive repeats collapsed)", mg, seq)
			}
		}
		if len(seq) != perGroup {
			t.Fatalf("message group %s: %d distinct deliveries, want %d: %v", mg, len(seq), perGroup, seq)
		}
	}
	t.Logf("%d consecutive repeats delivered", repeats)
}
