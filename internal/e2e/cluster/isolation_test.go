package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestLeaderIsolation cuts the leader off from both other members (all
// four raft links to and from it; clients still reach every member)
// under a send load:
//
//   - sends made straight to the isolated leader over the v2 API never
//     answer OK while it is cut off: it cannot reach a majority, so it
//     answers an error status or the call fails;
//   - it steps down (check-quorum), and the other two elect a leader
//     among themselves: sends through them are answered OK again within
//     the failover bound;
//   - once the links are restored the old leader follows the new one,
//     its raft log is cut back where it holds entries only it stored
//     (those of the sends it could not commit), and it catches up;
//   - every send answered OK is received, and after a clean stop the
//     members' commit logs are byte-identical.
func TestLeaderIsolation(t *testing.T) {
	e2eutil.Begin(t)
	const failoverBound = 10 * time.Second
	g := newProxiedGroup(t)
	l := g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("isolate"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	a := g.acker()

	var (
		mu    sync.Mutex
		acked = map[string]string{} // id → body, sends answered OK to the acker
	)
	// The acker's connection to the leader is up, and the leader serves.
	{
		body := topic + "-direct-0"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, st, err := a.sendOnce(ctx, l.id-1, topic, body)
		cancel()
		if err != nil || st.GetCode() != pb.Code_OK {
			t.Fatalf("send straight to the leader %d before the isolation: %v %v", l.id, st, err)
		}
		acked[id] = body
	}
	load := startPacedLoad(pr, topic, 4, 20*time.Millisecond)
	defer load.stop()
	load.waitFor(t, 100, 30*time.Second, "before the isolation")
	if nl := g.leader(10 * time.Second); nl != l {
		t.Fatalf("member %d leads, not %d, before the isolation", nl.id, l.id)
	}
	conflictsBefore := strings.Count(l.proc.Log(), "raft: found conflict at index")
	others := g.others(l)

	isolatedAt := time.Now()
	g.isolate(l)
	t.Logf("isolated member %d (leader) at %d sends answered OK", l.id, load.count())

	// (a) Straight to the isolated leader, one send after another, none
	// may answer OK. The probes end (their calls cancelled) before the
	// links are restored, so an OK can only have been answered while it
	// was cut off.
	probeCtx, stopProbes := context.WithCancel(context.Background())
	var (
		probeWG  sync.WaitGroup
		outcomes = map[string]int{}
		okWhile  []string // bodies answered OK by the isolated member
		probes   int      // answered (or failed) before the probes were stopped
	)
	probeWG.Add(1)
	go func() {
		defer probeWG.Done()
		for i := 1; probeCtx.Err() == nil; i++ {
			body := fmt.Sprintf("%s-isolated-%d", topic, i)
			ctx, cancel := context.WithTimeout(probeCtx, 2500*time.Millisecond)
			_, st, err := a.sendOnce(ctx, l.id-1, topic, body)
			cancel()
			var outcome string
			switch {
			case err != nil && probeCtx.Err() != nil:
				return // cancelled: not an answer
			case err != nil:
				outcome = "call failed: " + shortErr(err)
			default:
				outcome = st.GetCode().String()
			}
			mu.Lock()
			probes++
			outcomes[outcome]++
			if err == nil && st.GetCode() == pb.Code_OK {
				okWhile = append(okWhile, body)
			}
			mu.Unlock()
			select {
			case <-probeCtx.Done():
			case <-time.After(50 * time.Millisecond): // a refused call may come back at once
			}
		}
	}()

	// (b) The other two elect a leader, and sends through either of them
	// are answered OK within the bound.
	var resumedAfter time.Duration
	for i := 0; ; i++ {
		if time.Since(isolatedAt) > failoverBound {
			t.Fatalf("no send through members %d and %d answered OK within %v of the isolation of member %d",
				others[0].id, others[1].id, failoverBound, l.id)
		}
		m := others[i%2]
		body := fmt.Sprintf("%s-majority-%d", topic, i)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		id, st, err := a.sendOnce(ctx, m.id-1, topic, body)
		cancel()
		if err == nil && st.GetCode() == pb.Code_OK {
			resumedAfter = time.Since(isolatedAt)
			mu.Lock()
			acked[id] = body
			mu.Unlock()
			break
		}
		time.Sleep(50 * time.Millisecond) // a refused call may come back at once
	}
	if resumedAfter > failoverBound {
		t.Errorf("a send through the majority answered OK %v after the isolation; the bound is %v", resumedAfter, failoverBound)
	}
	nl := g.leaderAmong(others, failoverBound)
	steppedDown := g.waitStatus(l, failoverBound, "step down", func(st memberStatus) bool { return st.State != "StateLeader" })
	t.Logf("member %d leads the majority; a send through it answered OK %v after the isolation (bound %v); "+
		"member %d no longer leads (%s, term %d)", nl.id, resumedAfter.Round(time.Millisecond), failoverBound,
		l.id, steppedDown.State, steppedDown.Term)
	// The load goes on through the majority too (the client may first
	// spend its retries on the isolated member), and the isolated member
	// is asked again once it no longer leads.
	load.waitFor(t, load.count()+20, 30*time.Second, "while the leader is isolated")
	if !waitFor(15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return probes >= 2 }) {
		t.Errorf("sends straight to the isolated member %d: %d answered within 15 s, want 2", l.id, probes)
	}
	stopProbes()
	probeWG.Wait()
	mu.Lock()
	t.Logf("sends straight to the isolated member %d over %v: %v", l.id, time.Since(isolatedAt).Round(time.Millisecond), outcomes)
	if len(okWhile) > 0 {
		t.Errorf("the isolated member %d answered OK to %d sends: %q", l.id, len(okWhile), okWhile)
	}
	if len(outcomes) == 0 {
		t.Error("no send to the isolated member was answered")
	}
	mu.Unlock()

	// (c) Restore the links: the old leader follows the new one, gives up
	// the entries only it stored, and catches up.
	healedAt := time.Now()
	g.heal(l)
	st := g.waitStatus(l, 30*time.Second, "follow the new leader", func(st memberStatus) bool {
		return st.State == "StateFollower" && st.Leader == uint64(nl.id)
	})
	g.caughtUp(l, 30*time.Second)
	rejoined := time.Since(healedAt)
	if !waitFor(30*time.Second, func() bool {
		return strings.Count(l.proc.Log(), "raft: found conflict at index") > conflictsBefore
	}) {
		t.Errorf("member %d did not cut back its raft log after rejoining (no conflicting entry found)", l.id)
	}
	t.Logf("links restored: member %d follows member %d in term %d and caught up %v later", l.id, nl.id, st.Term,
		rejoined.Round(time.Millisecond))
	if cur := g.leader(10 * time.Second); cur != nl {
		t.Errorf("member %d leads after the links were restored, not %d", cur.id, nl.id)
	}
	load.waitFor(t, load.count()+50, 30*time.Second, "after the links were restored")
	for id, body := range load.stop() {
		acked[id] = body
	}
	load.mu.Lock()
	var pause time.Duration
	prev := isolatedAt
	for _, at := range load.okAt {
		if at.After(isolatedAt) {
			pause, prev = max(pause, at.Sub(prev)), at
		}
	}
	load.mu.Unlock()
	t.Logf("the client load's longest pause between sends answered OK, from the isolation on: %v", pause.Round(time.Millisecond))

	// (d) Every send answered OK is received. Nothing is acknowledged:
	// each message is received once, invisible for longer than the test.
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]string{}
	waitFor(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 32, 2*time.Minute)
		cancel()
		for _, mv := range mvs {
			got[mv.GetMessageId()] = append(got[mv.GetMessageId()], string(mv.GetBody()))
		}
		if err != nil {
			backoff(err)
		}
		return missing(acked, got) == 0
	})
	if n := missing(acked, got); n > 0 {
		t.Fatalf("%d of %d sends answered OK are missing after member %d was isolated", n, len(acked), l.id)
	}
	t.Logf("%d sends answered OK, all received", len(acked))
	g.stopAll()
	g.sameLogs()
}

// memberStatus is the part of `mqgate cluster status --json` the tests
// read.
type memberStatus struct {
	Leader  uint64 `json:"leader"`
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	State   string `json:"state"`
	Voters  []int  `json:"voters"`
	// FirstIndex is the oldest entry the member's raft log holds.
	FirstIndex uint64 `json:"first_index"`
}

// status asks m for its raft status, at its own peer listener.
func (g *group) status(m *member) (memberStatus, error) { return g.groupStatus(m, 0) }

// groupStatus is status for data group grp.
func (g *group) groupStatus(m *member, grp int) (memberStatus, error) {
	out, err := g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", g.id, "--group", strconv.Itoa(grp), "--json")
	if err != nil {
		return memberStatus{}, fmt.Errorf("member %d: %w: %s", m.id, err, out)
	}
	var st memberStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return memberStatus{}, fmt.Errorf("member %d: %w: %s", m.id, err, out)
	}
	return st, nil
}

// waitStatus waits until m's status satisfies ok, and returns it.
func (g *group) waitStatus(m *member, timeout time.Duration, what string, ok func(memberStatus) bool) memberStatus {
	g.t.Helper()
	var (
		st   memberStatus
		last error
	)
	if !waitFor(timeout, func() bool {
		st, last = g.status(m)
		return last == nil && ok(st)
	}) {
		g.t.Fatalf("member %d did not %s within %v: last status %+v, %v", m.id, what, timeout, st, last)
	}
	return st
}

// leaderAmong waits until every member of ms names the same leader, one
// of ms, which says it leads, and returns it.
func (g *group) leaderAmong(ms []*member, timeout time.Duration) *member {
	g.t.Helper()
	var lead *member
	if !waitFor(timeout, func() bool {
		lead = nil
		for _, m := range ms {
			st, err := g.status(m)
			if err != nil || st.Leader == 0 || (lead != nil && uint64(lead.id) != st.Leader) {
				return false
			}
			lead = g.members[st.Leader-1]
		}
		if !slices.Contains(ms, lead) {
			return false
		}
		st, err := g.status(lead)
		return err == nil && st.State == "StateLeader"
	}) {
		g.t.Fatalf("members %v agreed on no leader among them within %v", ids(ms), timeout)
	}
	return lead
}

func ids(ms []*member) []int {
	var out []int
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}

// waitFor polls cond every 100 ms until it holds (true) or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// shortErr is err's message without the addresses and ids that make
// every failure unique (for counting outcomes).
func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "desc = "); i >= 0 {
		code := s[:i]
		desc := s[i+len("desc = "):]
		if j := strings.IndexAny(desc, ":("); j > 0 {
			desc = desc[:j]
		}
		return strings.TrimSpace(code + desc)
	}
	return s
}
