package cluster

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// The kill-rounds test's settings (environment; `make kill-rounds` sets
// them).
const (
	// envKillRounds is the number of kill -9 rounds (default 3: the CI
	// run).
	envKillRounds = "MQGATE_KILL_ROUNDS"
	// envKillSeed replays a run's choices of victims and kill points (not
	// its timing).
	envKillSeed = "MQGATE_KILL_SEED"
)

// rebalanceBound is how soon after a killed member is back the data
// groups' leaderships must be spread again.
const rebalanceBound = 30 * time.Second

// TestClusterReplicaSetsKillRounds: five members, six groups (group 0
// the catalog, five data groups of three replicas), sync flush. Under
// ordered sends of the official Go client (one sender per message group
// of a FIFO topic of ten queues, two queues per data group, each send
// after the previous one was answered OK), delayed messages due a few
// seconds after they are sent, and a FIFO and a plain consumer group
// receiving and acknowledging all the while, a member chosen at random is
// killed with kill -9 at a random point and restarted, round after round
// (MQGATE_KILL_ROUNDS, default 3; `make kill-rounds` runs 20). Asserted:
//   - each data group the killed member led answers a send OK again
//     within failoverBound of the kill, measured at the client;
//   - the data groups' leaderships are spread again (one each) within
//     rebalanceBound of the member's restart;
//   - every send answered OK is delivered, each message group's in send
//     order (consecutive copies of one message allowed: a send whose
//     answer was lost is stored again when sent again);
//   - nothing acknowledged (the ack answered OK) is delivered again;
//   - each delayed message is delivered, never before it is due;
//   - after a clean stop, each data group's replicas hold the same
//     commit log.
func TestClusterReplicaSetsKillRounds(t *testing.T) {
	e2eutil.Begin(t)
	rounds := envInt(t, envKillRounds, 3)
	seed := uint64(envInt(t, envKillSeed, int(rand.Uint64()%1_000_000_000)))
	t.Logf("%d kill rounds (replay: %s=%d)", rounds, envKillSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	const groups, members, replicas, queues = 6, 5, 3, 10
	g := newGroupOf(t, members, "--data-groups", strconv.Itoa(groups), "--group-replicas", strconv.Itoa(replicas),
		"--remoting-addr", "", "--flush", "sync")
	leaders := g.balancedData(groups, 90*time.Second)
	fifo, fcg := e2eutil.Uniq("kr"), e2eutil.Uniq("krf")
	delayed, dcg := e2eutil.Uniq("krd"), e2eutil.Uniq("krdc")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", fifo, "--type", "FIFO", "--queues", strconv.Itoa(queues))
	e2eutil.CLI(t, g.members[1].grpc, "group", "create", fcg, "--fifo")
	e2eutil.CLI(t, g.members[2].grpc, "topic", "create", delayed, "--type", "DELAY", "--queues", strconv.Itoa(queues))

	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(fifo, delayed))
	a := g.acker()
	ord := startOrdered(pr, fifo, queues, func(q int32) int { return placeOnData(fifo, q, groups) }, groups)
	defer ord.stop()
	dl := startDelayed(pr, delayed)
	defer dl.stop()
	fc := startChecked(t, g, a, fcg, fifo, true)
	defer fc.stop()
	dc := startChecked(t, g, a, dcg, delayed, false)
	defer dc.stop()
	ord.waitEach(t, 20, 60*time.Second, "before the first kill")

	var worst time.Duration
	var kills []string
	for round := range rounds {
		// A random point: after each data group's sends went on a while,
		// and up to 2 s more.
		ord.waitEach(t, 10, 60*time.Second, fmt.Sprintf("round %d: before the kill", round))
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second))))
		victim := g.members[rng.IntN(members)]
		led := ledBy(leaders, victim.id)
		victim.proc.Kill9()
		killed := time.Now()
		kills = append(kills, fmt.Sprintf("member %d at %s", victim.id, killed.Format("15:04:05.000")))
		gaps := ord.failover(t, killed, 60*time.Second)
		var slow []string
		for _, gid := range led {
			if gid == 0 {
				continue
			}
			worst = max(worst, gaps[gid])
			if gaps[gid] > failoverBound {
				slow = append(slow, fmt.Sprintf("group %d: %v", gid, gaps[gid].Round(time.Millisecond)))
			}
		}
		t.Logf("round %d: killed member %d, leader of groups %v; first OK after the kill, by data group: %v", round, victim.id, led, roundAll(gaps[1:]))
		if len(slow) > 0 {
			t.Errorf("round %d: data groups led by member %d answered no send OK within %v of its kill: %s", round, victim.id, failoverBound, strings.Join(slow, ", "))
		}
		g.start(victim)
		back := time.Now()
		leaders = g.balancedData(groups, rebalanceBound)
		t.Logf("round %d: member %d back; leaders spread %v after its start: %v", round, victim.id, time.Since(back).Round(time.Millisecond), leaders)
		if t.Failed() {
			break
		}
	}
	t.Logf("longest failover of a group whose leader was killed: %v", worst.Round(time.Millisecond))

	sent := ord.stop()
	due := dl.stop()
	t.Logf("kills: %s", strings.Join(kills, ", "))
	fc.await(t, func() bool { return fc.hasAll(sent) }, 90*time.Second, "the ordered sends")
	dc.await(t, func() bool { return dc.hasBodies(due) }, 90*time.Second, "the delayed messages")
	fc.stop()
	dc.stop()
	fc.checkOrder(t, sent)
	dc.checkDue(t, due)
	t.Logf("ordered: %d sends answered OK (%d only when sent again), %d deliveries, %d acknowledged; delayed: %d sent, %d deliveries",
		ord.total(), ord.resentCount(), fc.deliveries(), fc.ackedCount(), len(due), dc.deliveries())

	g.stopAll()
	g.sameDataLogs(createdSets(groups, members, replicas))
}

// envInt reads an integer setting, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", name, s)
	}
	return n
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// orderedPause is how long each ordered sender waits between sends: ten
// senders then send about 200 messages a second, which one consumer
// acknowledging each message keeps up with.
const orderedPause = 40 * time.Millisecond

// orderedLoad sends, for each queue of a FIFO topic, numbered messages
// of one message group ("<group>/<n>"), each after the previous one was
// answered OK (and orderedPause); a send that fails is sent again until
// it is answered OK.
type orderedLoad struct {
	mgs     []string
	groupOf []int // data group of each message group's queue
	quit    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	sent   []int         // sends answered OK, by message group
	okAt   [][]time.Time // when sends were answered OK, by data group
	resent int           // sends answered OK only when sent again
	err    error         // a send not answered OK within a minute
}

func startOrdered(pr rmq.Producer, topic string, queues int32, place func(q int32) int, groups int) *orderedLoad {
	l := &orderedLoad{mgs: messageGroupsByQueue(int(queues)), quit: make(chan struct{}), sent: make([]int, queues), okAt: make([][]time.Time, groups)}
	for q := range queues {
		l.groupOf = append(l.groupOf, place(q))
	}
	for i, mg := range l.mgs {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.quit:
					return
				default:
				}
				m := &rmq.Message{Topic: topic, Body: fmt.Appendf(nil, "%s/%d", mg, n)}
				m.SetMessageGroup(mg)
				_, attempts, err := sendRetry(pr, m, time.Minute)
				l.mu.Lock()
				if err != nil {
					l.err = cmpErr(l.err, fmt.Errorf("%s/%d: not answered OK within a minute: %w", mg, n, err))
					l.mu.Unlock()
					return
				}
				l.sent[i]++
				l.okAt[l.groupOf[i]] = append(l.okAt[l.groupOf[i]], time.Now())
				if attempts > 1 {
					l.resent++
				}
				l.mu.Unlock()
				select {
				case <-l.quit:
					return
				case <-time.After(orderedPause):
				}
			}
		})
	}
	return l
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// waitEach waits until every message group has n more sends answered OK
// than when called.
func (l *orderedLoad) waitEach(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	l.mu.Lock()
	from := slices.Clone(l.sent)
	l.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		least, err := n, l.err
		for i := range from {
			least = min(least, l.sent[i]-from[i])
		}
		l.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if least >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: a message group had %d sends answered OK within %v, waited for %d", what, least, timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failover waits until every data group has a send answered OK after
// killed, and returns, by data group, how long after killed the first
// one was.
func (l *orderedLoad) failover(t *testing.T, killed time.Time, timeout time.Duration) []time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		gaps := make([]time.Duration, len(l.okAt))
		all := true
		for gid, ts := range l.okAt {
			if len(ts) == 0 {
				continue // no queue in it (group 0)
			}
			i, _ := slices.BinarySearchFunc(ts, killed, func(a, b time.Time) int { return a.Compare(b) })
			if i == len(ts) {
				all = false
				continue
			}
			gaps[gid] = ts[i].Sub(killed)
		}
		err := l.err
		l.mu.Unlock()
		if err != nil {
			t.Fatalf("after the kill: %v", err)
		}
		if all {
			return gaps
		}
		if time.Now().After(deadline) {
			t.Fatalf("some data group had no send answered OK within %v of the kill (first OK after it, by group: %v)", timeout, gaps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the senders once their current message is answered OK, and
// returns the sends answered OK by message group.
func (l *orderedLoad) stop() map[string]int {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for i, mg := range l.mgs {
		out[mg] = l.sent[i]
	}
	return out
}

func (l *orderedLoad) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.sent {
		n += s
	}
	return n
}

func (l *orderedLoad) resentCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resent
}

// delayedLoad sends a delayed message every 300 ms, each due 1 to 4 s
// after it is sent, again until answered OK.
type delayedLoad struct {
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex
	due  map[string]time.Time // by body, of the sends answered OK
}

func startDelayed(pr rmq.Producer, topic string) *delayedLoad {
	l := &delayedLoad{quit: make(chan struct{}), done: make(chan struct{}), due: map[string]time.Time{}}
	go func() {
		defer close(l.done)
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.quit:
				return
			case <-t.C:
			}
			body := fmt.Sprintf("delayed/%d", n)
			at := time.Now().Add(time.Second + time.Duration(n%4)*time.Second).Truncate(time.Millisecond)
			m := &rmq.Message{Topic: topic, Body: []byte(body)}
			m.SetDelayTimestamp(at)
			if _, _, err := sendRetry(pr, m, time.Minute); err == nil {
				l.mu.Lock()
				l.due[body] = at
				l.mu.Unlock()
			}
		}
	}()
	return l
}

func (l *delayedLoad) stop() map[string]time.Time {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.due)
}

// delivery is one message handed to a checked consumer.
type delivery struct {
	body   string
	copyID string // message id, queue and offset: one stored copy
	at     time.Time
}

// checkedConsumer receives from one topic through a consumer group of
// the official client, acknowledging each message through the members
// (acker: it must know whether the ack was answered OK), and records what
// it got; it fails the test when a copy whose ack was answered OK is
// delivered again.
type checkedConsumer struct {
	t     *testing.T
	c     rmq.SimpleConsumer
	quit  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	got   []delivery
	acked map[string]time.Time // copies whose ack was answered OK, and when
	again []string             // acknowledged copies delivered again
}

func startChecked(t *testing.T, g *group, a *acker, cg, topic string, fifo bool) *checkedConsumer {
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	k := &checkedConsumer{t: t, c: c, quit: make(chan struct{}), done: make(chan struct{}), acked: map[string]time.Time{}}
	go func() {
		defer close(k.done)
		for {
			select {
			case <-k.quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			mvs, err := c.Receive(ctx, 16, receiveInvisible)
			cancel()
			if err != nil {
				backoff(err)
				continue
			}
			for _, mv := range mvs {
				// A send the client retried may be stored twice under one
				// message id, in two queues (it moves to the next queue).
				q, ok := handleQueue(mv.GetReceiptHandle())
				if !ok {
					q = -1
				}
				id := fmt.Sprintf("%s@%d:%d", mv.GetMessageId(), q, mv.GetOffset())
				now := time.Now()
				k.mu.Lock()
				k.got = append(k.got, delivery{body: string(mv.GetBody()), copyID: id, at: now})
				if at, ok := k.acked[id]; ok {
					k.again = append(k.again, fmt.Sprintf("%s (%q), attempt %d at %s, its ack answered OK at %s", id, mv.GetBody(), mv.GetDeliveryAttempt(),
						now.Format("15:04:05.000"), at.Format("15:04:05.000")))
				}
				k.mu.Unlock()
				if ackAnyMember(a, 20*time.Second, cg, topic, mv.GetReceiptHandle()) == nil {
					k.mu.Lock()
					k.acked[id] = time.Now()
					k.mu.Unlock()
				}
			}
		}
	}()
	return k
}

// ackAnyMember acknowledges handle through each member in turn until one
// answers OK or d passes (acker.ack without reading which members run:
// a member being restarted just refuses).
func ackAnyMember(a *acker, d time.Duration, cg, topic, handle string) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		for i := range a.conns {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			last = a.ackOnce(ctx, i, cg, topic, handle)
			cancel()
			if last == nil || time.Now().After(deadline) {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *checkedConsumer) stop() {
	select {
	case <-k.quit:
	default:
		close(k.quit)
	}
	<-k.done
}

func (k *checkedConsumer) deliveries() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.got)
}

func (k *checkedConsumer) ackedCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.acked)
}

// await waits until ok holds of what the consumer got, failing the test
// after timeout; it fails the test at once when an acknowledged copy was
// delivered again.
func (k *checkedConsumer) await(t *testing.T, ok func() bool, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not all of %s delivered within %v after the sends stopped (%d deliveries)", what, timeout, k.deliveries())
		}
		time.Sleep(50 * time.Millisecond)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.again) > 0 {
		t.Fatalf("%d acknowledged copies delivered again: %v", len(k.again), k.again)
	}
}

// bySeq is, by message group, the numbers of the ordered messages
// delivered, in delivery order.
func (k *checkedConsumer) bySeq() map[string][]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]int{}
	for _, d := range k.got {
		mg, seq, _ := strings.Cut(d.body, "/")
		n, err := strconv.Atoi(seq)
		if err != nil {
			n = -1
		}
		out[mg] = append(out[mg], n)
	}
	return out
}

// hasAll reports whether each message group's last send answered OK was
// delivered.
func (k *checkedConsumer) hasAll(sent map[string]int) bool {
	got := k.bySeq()
	for mg, n := range sent {
		if n > 0 && !slices.Contains(got[mg], n-1) {
			return false
		}
	}
	return true
}

// checkOrder: each message group's deliveries, consecutive copies of one
// message collapsed, are its sends answered OK in send order, and
// nothing else.
func (k *checkedConsumer) checkOrder(t *testing.T, sent map[string]int) {
	t.Helper()
	got := k.bySeq()
	for mg, n := range sent {
		seq := slices.Compact(slices.Clone(got[mg]))
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(seq, want) {
			t.Errorf("message group %s: deliveries (consecutive copies collapsed) %v, want 0..%d in order", mg, seq, n-1)
		}
		delete(got, mg)
	}
	for mg, seq := range got {
		t.Errorf("delivered %v of message group %q, never sent", seq, mg)
	}
}

// hasBodies reports whether each body in due was delivered.
func (k *checkedConsumer) hasBodies(due map[string]time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range k.got {
		seen[d.body] = true
	}
	for b := range due {
		if !seen[b] {
			return false
		}
	}
	return true
}

// checkDue: no delayed message was delivered before it was due.
func (k *checkedConsumer) checkDue(t *testing.T, due map[string]time.Time) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, d := range k.got {
		at, ok := due[d.body]
		if !ok {
			continue // sent, never answered OK
		}
		if d.at.Before(at) {
			t.Errorf("%s (%s) delivered %v before it was due", d.copyID, d.body, at.Sub(d.at))
		}
	}
}
