package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// awaitGroupVoters waits until `mqgate cluster status --group G --json`
// of m names want as group G's voters, for each of groups.
func (g *group) awaitGroupVoters(m *member, groups int, want []int) {
	g.t.Helper()
	for gid := range groups {
		var last []int
		deadline := time.Now().Add(30 * time.Second)
		for {
			if st, err := g.groupStatus(m, gid); err == nil {
				if last = st.Voters; slices.Equal(last, want) {
					break
				}
			}
			if time.Now().After(deadline) {
				g.t.Fatalf("member %d names the voters %v of data group %d, want %v", m.id, last, gid, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// awaitCompacted waits until some data group's raft log is compacted
// past its first entry on every member (`cluster status --json`'s
// first_index), so that a member joining it catches up from a copy of a
// store whichever member leads it.
func (g *group) awaitCompacted(groups int, within time.Duration) {
	g.t.Helper()
	deadline := time.Now().Add(within)
	var seen []string
	for {
		seen = seen[:0]
		for gid := range groups {
			compacted := true
			for _, m := range g.members {
				st, err := g.groupStatus(m, gid)
				if err != nil || st.FirstIndex <= 1 {
					seen = append(seen, fmt.Sprintf("group %d member %d: first index %d (%v)", gid, m.id, st.FirstIndex, err))
					compacted = false
					break
				}
			}
			if compacted {
				return
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("no data group's raft log was compacted on every member within %s: %s", within, strings.Join(seen, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterDataGroupsMembershipUnderLoad changes the members of a
// cluster of four data groups while the official client sends: a fourth
// member joins every group (the others keep so few raft entries that it
// catches up from copies of their stores) and is handed the leadership
// of its share of the groups; then a member leading a group is removed
// from every group (its leaderships move first, and its process stops).
// No send answered OK is lost, and every group's commit logs agree on
// the members that remain.
func TestClusterDataGroupsMembershipUnderLoad(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 4
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "", "--flush", "sync", "--raft-log-keep", "32")
	g.balanced(groups, 60*time.Second)
	topic, cg := e2eutil.Uniq("dgmembers"), e2eutil.Uniq("dgm")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "8")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	// Paced, so that the messages to read back stay few enough for the
	// consumer to drain within its deadline: once some groups are empty,
	// each receive routed to one long-polls for 5 s.
	load := startPacedLoad(pr, topic, 4, 100*time.Millisecond)
	defer load.stop()
	load.waitFor(t, 200, 60*time.Second, "before any change")
	g.awaitCompacted(groups, 60*time.Second)

	m4 := g.join(4)
	g.addNode(g.members[1], m4)
	if !m4.proc.HasLine("installed the copy of another member's store") {
		t.Errorf("member 4 caught up without a copy of a store; the test meant to cover that path")
	}
	g.awaitGroupVoters(m4, groups, []int{1, 2, 3, 4})
	leaders := g.balanced(groups, 60*time.Second)
	if !slices.Contains(leaders, m4.id) {
		t.Fatalf("member 4 leads none of the groups after joining (leaders %v)", leaders)
	}
	t.Logf("member 4 joined; leaders by group %v", leaders)
	load.waitFor(t, load.count()+100, 60*time.Second, "after adding member 4")

	// A member other than 4 that leads a group leaves, asked through
	// itself.
	var gone *member
	for _, id := range leaders {
		if id != m4.id {
			gone = g.byID(id)
			break
		}
	}
	g.removeNode(gone, gone)
	var rest []int
	for _, m := range g.members {
		rest = append(rest, m.id)
	}
	slices.Sort(rest)
	g.awaitGroupVoters(m4, groups, rest)
	leaders = g.balanced(groups, 60*time.Second)
	t.Logf("member %d removed; leaders by group %v", gone.id, leaders)
	load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after removing member %d", gone.id))
	acked := load.stop()

	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 180*time.Second, true)
	if n := missingOf(acked, got); n > 0 {
		shown := 0
		for id, body := range acked {
			if _, ok := got[id]; ok || shown == 3 {
				continue
			}
			shown++
			out, err := g.run("message", "show", id, "--topic", topic, "--server", g.members[0].grpc, "--json")
			t.Logf("missing %s (%s): %v\n%s", id, body, err, out)
		}
		out, err := g.run("group", "describe", cg, "--server", g.members[0].grpc, "--json")
		t.Logf("the consumer group: %v\n%s", err, out)
		t.Fatalf("%d of %d acknowledged sends missing after the membership changes", n, len(acked))
	}
	t.Logf("%d sends answered OK across the changes, all received", len(acked))
	g.stopAll()
	g.sameLogs()
	for gid := 1; gid < groups; gid++ {
		g.sameLogsOf(fmt.Sprintf("groups/%d/replica", gid))
	}
}

// TestClusterDataGroupsReplaceDeadMember replaces a member that died
// (kill -9, its disk taken for lost) in a cluster of three data groups
// under load: a new member joins every group through a survivor, the
// dead one is removed from every group, and the leaderships spread over
// the three members that remain. No send answered OK is lost.
func TestClusterDataGroupsReplaceDeadMember(t *testing.T) {
	e2eutil.Begin(t)
	const groups = 3
	g := newGroup(t, "--data-groups", strconv.Itoa(groups), "--remoting-addr", "", "--flush", "sync")
	leaders := g.balanced(groups, 60*time.Second)
	topic, cg := e2eutil.Uniq("dgreplace"), e2eutil.Uniq("dgr")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "6")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	load := startPacedLoad(pr, topic, 4, 50*time.Millisecond)
	defer load.stop()
	load.waitFor(t, 100, 60*time.Second, "before the kill")

	dead := g.byID(leaders[1])
	dead.proc.Kill9()
	t.Logf("killed member %d, which led data group 1", dead.id)
	load.waitFor(t, load.count()+100, 60*time.Second, "after the kill")
	var live *member
	for _, m := range g.members {
		if m != dead {
			live = m
			break
		}
	}
	m4 := g.join(4)
	g.addNode(live, m4)
	out, err := g.cli("cluster", "remove-node", "--peer", live.peer, "--cluster-id", g.id, "--node-id", strconv.Itoa(dead.id), "--timeout", "60s")
	if err != nil {
		t.Fatalf("remove-node %d (dead): %v\n%s", dead.id, err, out)
	}
	g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == dead })
	var rest []int
	for _, m := range g.members {
		rest = append(rest, m.id)
	}
	slices.Sort(rest)
	g.awaitGroupVoters(live, groups, rest)
	leaders = g.balanced(groups, 60*time.Second)
	if !slices.Contains(leaders, m4.id) {
		t.Fatalf("member 4 leads none of the groups after replacing member %d (leaders %v)", dead.id, leaders)
	}
	t.Logf("member %d replaced by member 4; leaders by group %v", dead.id, leaders)
	load.waitFor(t, load.count()+100, 60*time.Second, "after the replacement")
	acked := load.stop()

	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 120*time.Second, true)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends missing after replacing a dead member", n, len(acked))
	}
	t.Logf("%d sends answered OK, all received", len(acked))
	g.stopAll()
	g.sameLogs()
	for gid := 1; gid < groups; gid++ {
		g.sameLogsOf(fmt.Sprintf("groups/%d/replica", gid))
	}
}
