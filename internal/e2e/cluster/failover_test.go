package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// failoverBound is the longest a client may go without a successful send
// after a member fails (frozen or killed).
const failoverBound = 5 * time.Second

// okTimes records when each send of one sender was answered OK.
type okTimes struct {
	mu  sync.Mutex
	at  []time.Time
	ids map[string]string // message id → body
}

func (o *okTimes) add(id, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.at = append(o.at, time.Now())
	if o.ids == nil {
		o.ids = map[string]string{}
	}
	o.ids[id] = body
}

func (o *okTimes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.at)
}

// longestGap is the longest interval from `from` to end with no send
// answered OK: between from and the first OK after it, between
// consecutive OKs, and between the last OK and end.
func (o *okTimes) longestGap(from, end time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, worst := from, time.Duration(0)
	for _, at := range o.at {
		if at.Before(from) {
			continue
		}
		worst = max(worst, at.Sub(prev))
		prev = at
	}
	return max(worst, end.Sub(prev))
}

// goSenders runs one sync-sending loop per producer until stopped, each
// pausing pause between sends.
type goSenders struct {
	times  []*okTimes
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startGoSenders(prs []rmq.Producer, topic string, pause time.Duration) *goSenders {
	ctx, cancel := context.WithCancel(context.Background())
	s := &goSenders{cancel: cancel}
	for p, pr := range prs {
		ok := &okTimes{}
		s.times = append(s.times, ok)
		s.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("%s-%d-%d", topic, p, i)
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				rs, err := pr.Send(sctx, &rmq.Message{Topic: topic, Body: []byte(body)})
				scancel()
				if err == nil {
					ok.add(rs[0].MessageID, body)
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	return s
}

// waitEach waits until every sender has n more OKs than it had.
func (s *goSenders) waitEach(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	base := make([]int, len(s.times))
	for i, o := range s.times {
		base[i] = o.count()
	}
	deadline := time.Now().Add(timeout)
	for i, o := range s.times {
		for o.count() < base[i]+n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: sender %d had %d sends answered OK within %v, waited for %d", what, i, o.count()-base[i], timeout, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (s *goSenders) stop() map[string]string {
	s.cancel()
	s.wg.Wait()
	all := map[string]string{}
	for _, o := range s.times {
		for id, b := range o.ids {
			all[id] = b
		}
	}
	return all
}

// TestClusterFrozenLeaderGoProducers freezes the leader (SIGSTOP) for 10 s
// under load from 8 official Go producers given every member's address
// (a;b;c) and one given the leader's address only, then resumes it
// (SIGCONT). Routes name the followers, whose relays close what they
// piped to the silent leader and pipe anew to the one the others elect:
// from the freeze, no producer goes longer than failoverBound without a
// send answered OK. A raw v2 sender connected straight to the leader's
// port meanwhile sees only OK, the replication codes or transport errors
// from it after it resumes, never INTERNAL_SERVER_ERROR. Every send
// answered OK is received afterwards.
func TestClusterFrozenLeaderGoProducers(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("frozen"), e2eutil.Uniq("g")
	var prs []rmq.Producer
	for range 8 {
		prs = append(prs, e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic)))
	}
	// Given the leader alone: its sends still go where the route says.
	prs = append(prs, e2eutil.StartProducer(t, e2eutil.Config(l.grpc, ""), rmq.WithTopics(topic)))
	s := startGoSenders(prs, topic, 20*time.Millisecond)
	defer s.stop()
	s.waitEach(t, 5, 60*time.Second, "before the freeze")

	// A raw sender on the leader's own port, to see the codes it answers.
	a := g.acker()
	li := slices.Index(g.members, l)
	rawCtx, rawStop := context.WithCancel(context.Background())
	var rawWG sync.WaitGroup
	var rawMu sync.Mutex
	rawCodes := map[string]int{}
	rawWG.Go(func() {
		for i := 0; rawCtx.Err() == nil; i++ {
			ctx, cancel := context.WithTimeout(rawCtx, 2*time.Second)
			_, st, err := a.sendOnce(ctx, li, topic, fmt.Sprintf("raw-%d", i))
			cancel()
			key := "transport error"
			if err == nil {
				key = st.GetCode().String()
			}
			rawMu.Lock()
			rawCodes[key]++
			rawMu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})

	frozenAt := time.Now()
	l.proc.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { _ = l.proc.Cmd.Process.Signal(syscall.SIGCONT) })
	time.Sleep(10 * time.Second) // the freeze itself: nothing to await
	l.proc.Signal(syscall.SIGCONT)
	s.waitEach(t, 20, 60*time.Second, "after the leader resumed")
	end := time.Now()
	rawStop()
	rawWG.Wait()

	var gaps []string
	for i, o := range s.times {
		gap := o.longestGap(frozenAt, end)
		who := "a;b;c"
		if i == len(s.times)-1 {
			who = "leader only"
		}
		gaps = append(gaps, fmt.Sprintf("%d (%s): %v", i, who, gap.Round(time.Millisecond)))
		if gap > failoverBound {
			t.Errorf("producer %d (%s) had no send answered OK for %v after the leader (member %d) was frozen; the bound is %v",
				i, who, gap.Round(time.Millisecond), l.id, failoverBound)
		}
	}
	t.Logf("leader %d frozen 10 s; longest interval without an OK send, per producer: %s", l.id, strings.Join(gaps, ", "))
	t.Logf("raw sender on the frozen leader's port: %v", rawCodes)
	if n := rawCodes[pb.Code_INTERNAL_SERVER_ERROR.String()]; n > 0 {
		t.Errorf("the deposed leader answered INTERNAL_SERVER_ERROR %d times: %v", n, rawCodes)
	}

	acked := s.stop()
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 120*time.Second, true)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends are missing after the freeze", n, len(acked))
	}
}

// TestClusterMemberDiesClassicAndGo kills a follower with kill -9 and
// leaves it down, under sends from official Go producers (a;b;c) and from
// a classic rocketmq-client-go v2 producer (WithRetry(2)) whose route
// names that member as its broker. The Go producers' endpoint lists the
// followers, and their channel moves to the one left; the classic route
// names the other follower as a broker too, so the classic producer's
// retries and next sends go there: neither waits for a route refresh
// (which could not even succeed for the classic producer: its name
// server is the member that died). Each must have a send answered OK
// within failoverBound of the kill, and keep sending.
func TestClusterMemberDiesClassicAndGo(t *testing.T) {
	e2eutil.Begin(t)
	rlog.SetLogLevel("fatal")
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	victim := g.others(l)[0]
	topic := e2eutil.Uniq("dies")
	e2eutil.CLI(t, l.grpc, "topic", "create", topic, "--queues", "4")

	var prs []rmq.Producer
	for range 2 {
		prs = append(prs, e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic)))
	}
	s := startGoSenders(prs, topic, 20*time.Millisecond)
	defer s.stop()

	// The victim alone as name server: the route names it as the broker
	// (with every member listed, the route names whichever the client
	// asked last), and no route refresh can help after it dies.
	cp, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{victim.remoting}), producer.WithGroupName(e2eutil.Uniq("PG")),
		producer.WithInstanceName(e2eutil.Uniq("prod")), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Start(); err != nil {
		t.Fatalf("classic producer start: %v", err)
	}
	t.Cleanup(func() { _ = cp.Shutdown() })
	classic := &okTimes{}
	var failed atomic.Int64
	cctx, cstop := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Go(func() {
		for i := 0; cctx.Err() == nil; i++ {
			body := fmt.Sprintf("%s-classic-%d", topic, i)
			ctx, cancel := context.WithTimeout(cctx, 5*time.Second)
			res, err := cp.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			cancel()
			if err == nil && res.Status == primitive.SendOK {
				classic.add(res.MsgID, body)
			} else {
				failed.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { cstop(); cwg.Wait() }()
	s.waitEach(t, 5, 60*time.Second, "before the kill")
	for deadline := time.Now().Add(60 * time.Second); classic.count() < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the classic producer had %d sends answered OK before the kill", classic.count())
		}
	}
	if got := routedBroker(t, victim.remoting, topic); got != victim.remoting {
		t.Fatalf("the route through member %d names broker %s, want the member itself (%s)", victim.id, got, victim.remoting)
	}

	killedAt := time.Now()
	failedBefore := failed.Load()
	victim.proc.Kill9()
	s.waitEach(t, 20, 60*time.Second, "after the kill")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n := len(afterTimes(classic, killedAt)); n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the classic producer had %d sends answered OK within 60 s of the kill", len(afterTimes(classic, killedAt)))
		}
	}
	end := time.Now()
	for i, o := range s.times {
		gap := o.longestGap(killedAt, end)
		t.Logf("Go producer %d: longest interval without an OK send after member %d was killed: %v", i, victim.id, gap.Round(time.Millisecond))
		if gap > failoverBound {
			t.Errorf("Go producer %d had no send answered OK for %v after member %d was killed; the bound is %v", i, gap.Round(time.Millisecond), victim.id, failoverBound)
		}
	}
	cstop()
	cwg.Wait()
	gap := classic.longestGap(killedAt, end)
	t.Logf("classic producer: longest interval without an OK send after member %d was killed: %v; %d sends failed after the kill",
		victim.id, gap.Round(time.Millisecond), failed.Load()-failedBefore)
	if gap > failoverBound {
		t.Errorf("the classic producer had no send answered OK for %v after its member %d was killed; the bound is %v", gap.Round(time.Millisecond), victim.id, failoverBound)
	}
}

// afterTimes are the OK times of o at or after from.
func afterTimes(o *okTimes, from time.Time) []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Time
	for _, at := range o.at {
		if !at.Before(from) {
			out = append(out, at)
		}
	}
	return out
}
