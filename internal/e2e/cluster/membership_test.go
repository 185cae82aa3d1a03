package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// join starts member id as a new member (--join) on fresh addresses;
// its --peers names itself and the running members; args are flags of
// its own.
func (g *group) join(id int, args ...string) *member {
	g.t.Helper()
	m := &member{id: id, dir: g.t.TempDir(), grpc: testutil.StableAddr(g.t), http: testutil.StableAddr(g.t),
		remoting: testutil.StableAddr(g.t), peer: testutil.StableAddr(g.t), joined: true, args: args}
	var peers []string
	for _, o := range g.members {
		peers = append(peers, fmt.Sprintf("%d=%s", o.id, o.peer))
	}
	m.peers = strings.Join(append(peers, fmt.Sprintf("%d=%s", id, m.peer)), ",")
	g.start(m)
	g.members = append(g.members, m)
	return m
}

// addNode runs `mqgate cluster add-node` for m through member via.
func (g *group) addNode(via, m *member) {
	g.t.Helper()
	out, err := g.cli("cluster", "add-node", "--peer", via.peer, "--cluster-id", g.id, "--node-id", fmt.Sprint(m.id),
		"--node-peer", m.peer, "--timeout", "120s")
	if err != nil {
		g.t.Fatalf("add-node %d: %v\n%s", m.id, err, out)
	}
}

// removeNode runs `mqgate cluster remove-node` for m through member via,
// waits until m's process exits as a removed member would, and leaves m
// out of the group.
func (g *group) removeNode(via, m *member) {
	g.t.Helper()
	out, err := g.cli("cluster", "remove-node", "--peer", via.peer, "--cluster-id", g.id, "--node-id", fmt.Sprint(m.id), "--timeout", "60s")
	if err != nil {
		g.t.Fatalf("remove-node %d: %v\n%s", m.id, err, out)
	}
	if code := m.proc.Wait(60 * time.Second); code != 0 {
		g.t.Fatalf("removed member %d: exit status %d (want 0, stopping on its own)\n%s", m.id, code, m.proc.Log())
	}
	if !m.proc.HasLine("this member was removed from its cluster") {
		g.t.Fatalf("removed member %d stopped without saying why:\n%s", m.id, m.proc.Log())
	}
	g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == m })
}

// awaitVoters waits until `mqgate cluster status --json` of m names
// want as the voters (m applies a change after the leader does).
func (g *group) awaitVoters(m *member, want []int) {
	g.t.Helper()
	var last []int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", g.id, "--json")
		var st struct{ Voters []int }
		if err == nil && json.Unmarshal([]byte(out), &st) == nil {
			if last = st.Voters; slices.Equal(last, want) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.t.Fatalf("member %d names the voters %v, want %v", m.id, last, want)
}

// TestClusterMembershipUnderLoad changes the group's members while the
// official client sends: a fourth member joins (the others keep so few
// raft entries that it catches up from a copy of a store) and is
// promoted; the leader is removed (it hands its leadership over first,
// and its process stops); member 2 is replaced by member 5. No send
// answered OK is lost, and the members that remain end byte-identical.
func TestClusterMembershipUnderLoad(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t, "--raft-log-keep", "32", "--flush", "sync")
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("members"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	load := startLoad(pr, topic, 4)
	defer load.stop()
	load.waitFor(t, 200, 60*time.Second, "before any change")

	m4 := g.join(4)
	g.addNode(g.members[0], m4)
	if !m4.proc.HasLine("installed the copy of another member's store") {
		t.Errorf("member 4 caught up without a copy of a store; the test meant to cover that path")
	}
	g.awaitVoters(m4, []int{1, 2, 3, 4})
	load.waitFor(t, load.count()+100, 60*time.Second, "after adding member 4")

	l := g.leader(30 * time.Second)
	g.removeNode(m4, l)
	load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after removing the leader %d", l.id))

	// Replace member 2 (or 3, when 2 was the leader removed) by member 5.
	old := g.byID(2)
	if old == nil {
		old = g.byID(3)
	}
	m5 := g.join(5)
	g.addNode(m4, m5)
	g.removeNode(g.leader(30*time.Second), old)
	load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after replacing member %d", old.id))
	want := []int{}
	for _, m := range g.members {
		want = append(want, m.id)
	}
	slices.Sort(want)
	g.awaitVoters(m5, want)
	acked := load.stop()
	t.Logf("%d sends answered OK across the changes", len(acked))

	c := e2eutil.StartSimpleConsumer(t, e2eutil.Config(m5.grpc, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 120*time.Second, false)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends missing after the membership changes", n, len(acked))
	}
	g.stopAll()
	g.sameLogs()
}
