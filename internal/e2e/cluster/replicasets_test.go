package cluster

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// replicaSet is the members data group gid (> 0) has replicas on, with
// five members, --group-replicas 3: three in id order from the gid-th,
// wrapping (docs/architecture.md, "Replica sets").
func replicaSet(gid, members, replicas int) []int {
	var out []int
	for i := range replicas {
		out = append(out, (gid-1+i)%members+1)
	}
	return out
}

// replicaSetsUnderLoad starts five members with six groups (five data
// groups of three replicas) and sync flush, waits for the leaderships to
// spread, creates a topic of ten queues and a consumer group name
// (prefix-based), and starts four paced senders of the official client;
// it returns once 100 sends were answered OK.
func replicaSetsUnderLoad(t *testing.T, prefix string) (g *group, leaders []int, topic, cg string, load *sendLoad) {
	t.Helper()
	g = newGroupOf(t, 5, "--data-groups", "6", "--group-replicas", "3", "--remoting-addr", "", "--flush", "sync")
	leaders = g.balancedData(6, 90*time.Second)
	topic, cg = e2eutil.Uniq(prefix), e2eutil.Uniq(prefix+"c")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "10")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	load = startPacedLoad(pr, topic, 4, 20*time.Millisecond)
	load.waitFor(t, 100, 60*time.Second, "before the changes")
	return g, leaders, topic, cg, load
}

// receivedAndSame stops the load and receives every send it had answered
// OK through consumer group cg, then stops the members and checks each
// data group's replicas (sets) hold the same commit log; it returns the
// sends answered OK.
func (g *group) receivedAndSame(load *sendLoad, topic, cg string, sets [][]int, what string) int {
	g.t.Helper()
	acked := load.stop()
	c := g.receiveAll(topic, cg, acked, what)
	_ = c.GracefulStop()
	g.stopAll()
	g.sameDataLogs(sets)
	return len(acked)
}

// dataVoters asks member via (`cluster status --group`) for the voters
// of each data group, failing the test unless each has replicas of them,
// and counts the replicas each member holds (every member of the group
// counted, those holding none too).
func (g *group) dataVoters(via *member, groups, replicas int) (sets [][]int, held map[int]int) {
	g.t.Helper()
	sets = make([][]int, groups)
	held = map[int]int{}
	for _, m := range g.members {
		held[m.id] = 0
	}
	for gid := 1; gid < groups; gid++ {
		st, err := g.groupStatus(via, gid)
		if err != nil || len(st.Voters) != replicas {
			g.t.Fatalf("data group %d: voters %v (%v), want %d", gid, st.Voters, err, replicas)
		}
		sets[gid] = st.Voters
		for _, id := range st.Voters {
			held[id]++
		}
	}
	return sets, held
}

// createdSets are the data groups' replica sets (by group, from 1) as a
// cluster of members, --group-replicas replicas, is created.
func createdSets(groups, members, replicas int) [][]int {
	sets := make([][]int, groups)
	for gid := 1; gid < groups; gid++ {
		sets[gid] = replicaSet(gid, members, replicas)
	}
	return sets
}

// sameDataLogs checks, the members stopped, that each data group's
// replicas (sets, by group, from 1) hold the same commit log.
func (g *group) sameDataLogs(sets [][]int) {
	g.t.Helper()
	for gid := 1; gid < len(sets); gid++ {
		var ms []*member
		for _, id := range sets[gid] {
			ms = append(ms, g.byID(id))
		}
		g.sameLogsOn(filepath.Join("groups", strconv.Itoa(gid), "replica"), ms)
	}
}

// placeOnData is the data group holding queue q of a (non-LITE) topic
// when group 0 keeps only the catalog (replica sets): 1 + (fnv32a(topic)
// + q) mod (groups - 1), the documented rule.
func placeOnData(topic string, q int32, groups int) int {
	return 1 + int((uint64(fnvHash(topic))+uint64(q))%uint64(groups-1))
}

// TestClusterReplicaSets: five members, six groups: group 0, the
// catalog, on all five, and five data groups of three replicas each
// (--group-replicas 3). A member stores only the groups it has replicas
// of; the
// data groups' leaderships spread (one each); every member's route
// names each queue at its group's leader, whichever member is asked;
// under sync sends of the official client, the member leading the most
// groups is killed with kill -9 and restarted twice; then, under steady
// load, the members pass on next to no request (the sends reach the
// owners); every send answered OK is received.
func TestClusterReplicaSets(t *testing.T) {
	e2eutil.Begin(t)
	const groups, members, replicas = 6, 5, 3
	g := newGroupOf(t, members, "--data-groups", strconv.Itoa(groups), "--group-replicas", strconv.Itoa(replicas),
		"--remoting-addr", "", "--flush", "sync")
	leaders := g.balancedData(groups, 90*time.Second)
	t.Logf("leaders by data group: %v", leaders)
	for gid, l := range leaders {
		if gid > 0 && !slices.Contains(replicaSet(gid, members, replicas), l) {
			t.Fatalf("data group %d is led by member %d, which holds none of its replicas %v", gid, l, replicaSet(gid, members, replicas))
		}
	}
	for _, m := range g.members {
		for gid := 1; gid < groups; gid++ {
			_, err := os.Stat(filepath.Join(m.dir, "groups", strconv.Itoa(gid), "replica"))
			if want := slices.Contains(replicaSet(gid, members, replicas), m.id); want != (err == nil) {
				t.Fatalf("member %d: data group %d's replica directory: %v, want it there %v", m.id, gid, err, want)
			}
		}
	}

	topic, cg := e2eutil.Uniq("rs"), e2eutil.Uniq("rsc")
	const queues = 10
	e2eutil.CLI(t, g.members[3].grpc, "topic", "create", topic, "--queues", strconv.Itoa(queues))
	a := g.acker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range g.members {
		mqs, err := a.route(ctx, i, topic, "JAVA")
		if err != nil || len(mqs) != queues {
			t.Fatalf("route through member %d: %d queues, %v", i+1, len(mqs), err)
		}
		for _, mq := range mqs {
			want := g.byID(leaders[placeOnData(topic, mq.GetId(), groups)])
			addrs := mq.GetBroker().GetEndpoints().GetAddresses()
			if len(addrs) != 1 || net.JoinHostPort(addrs[0].GetHost(), strconv.Itoa(int(addrs[0].GetPort()))) != want.grpc {
				t.Fatalf("route through member %d: queue %d at %v, want member %d at %s", i+1, mq.GetId(), addrs, want.id, want.grpc)
			}
		}
	}

	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	load := startLoad(pr, topic, 4)
	defer load.stop()
	for round := range 2 {
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("round %d: before the kill", round))
		victim := g.byID(mostLeading(leaders))
		victim.proc.Kill9()
		t.Logf("round %d: killed member %d, leader of data groups %v", round, victim.id, ledBy(leaders, victim.id))
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("round %d: after killing member %d", round, victim.id))
		g.start(victim)
		leaders = g.balancedData(groups, 90*time.Second)
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("round %d: after member %d came back", round, victim.id))
	}
	// Under steady load the sends reach the leaders of their groups: the
	// members pass on next to none (a client's channel steered late may
	// have a send forwarded once).
	fwd0, sent0 := g.forwarded(), load.count()
	load.waitFor(t, sent0+300, 60*time.Second, "steady")
	fwd, sent := g.forwarded()-fwd0, load.count()-sent0
	t.Logf("steady load: %d sends, %d requests passed on by the members", sent, fwd)
	if fwd*100 > sent {
		t.Fatalf("under steady load the members passed on %d requests for %d sends: the routes do not name the owners", fwd, sent)
	}
	acked := load.stop()
	g.receiveAll(topic, cg, acked, "leader kills")
	perGroup := make([]int, groups)
	for q := range int32(queues) {
		end, err := a.queueEnd(ctx, int(q)%members, topic, q)
		if err != nil {
			t.Fatalf("end of queue %d: %v", q, err)
		}
		perGroup[placeOnData(topic, q, groups)] += int(end)
	}
	for gid, n := range perGroup[1:] {
		if n == 0 {
			t.Fatalf("no message landed in data group %d (per group: %v)", gid+1, perGroup)
		}
	}
	t.Logf("%d sends answered OK, all received; per data group: %v", len(acked), perGroup)
}

// TestClusterReplicaSetsPartition: five members, six groups of which
// five data groups of three replicas; the member leading the most groups
// is cut off from every other member (its raft links; clients still
// reach it) under sync sends of the official client. Its groups elect
// leaders among their other replicas and sends go on; once the links are
// back it follows, the leaderships spread again, every send answered OK
// is received, and after a clean stop each group's replicas hold the
// same commit log.
func TestClusterReplicaSetsPartition(t *testing.T) {
	e2eutil.Begin(t)
	const groups, members, replicas = 6, 5, 3
	g := newProxiedGroupOf(t, members, "--data-groups", strconv.Itoa(groups), "--group-replicas", strconv.Itoa(replicas),
		"--remoting-addr", "", "--flush", "sync")
	leaders := g.balancedData(groups, 90*time.Second)
	topic, cg := e2eutil.Uniq("rsp"), e2eutil.Uniq("rspc")
	e2eutil.CLI(t, g.members[0].grpc, "topic", "create", topic, "--queues", "10")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	load := startLoad(pr, topic, 4)
	defer load.stop()
	load.waitFor(t, load.count()+100, 60*time.Second, "before the partition")

	x := g.byID(mostLeading(leaders))
	g.isolate(x)
	t.Logf("member %d, leader of data groups %v, cut off", x.id, ledBy(leaders, x.id))
	// Sends through the member cut off are answered at once (retry
	// elsewhere) once it has known no leader for two election timeouts,
	// not held for --leader-wait: the load goes on at its pace.
	load.waitFor(t, load.count()+200, 30*time.Second, fmt.Sprintf("while member %d is cut off", x.id))
	g.heal(x)
	leaders = g.balancedData(groups, 90*time.Second)
	load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after member %d is back", x.id))
	n := g.receivedAndSame(load, topic, cg, createdSets(groups, members, replicas), "the partition")
	t.Logf("%d sends answered OK, all received; leaders after: %v", n, leaders)
}

// balancedData is balanced for a cluster whose group 0 holds no queue:
// besides, no member leads more than one of the data groups (five over
// five members).
func (g *group) balancedData(groups int, timeout time.Duration) []int {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ls := g.balanced(groups, time.Until(deadline))
		if spreadLeaders(ls[1:], len(g.members)) {
			return ls
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("the data groups' leaders did not spread one per member within %v (last seen %v)", timeout, ls)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// forwarded is the requests every member passed on to another, as
// their /metrics count them.
func (g *group) forwarded() int {
	g.t.Helper()
	n := 0
	for _, m := range g.members {
		v, ok := e2eutil.MetricValue(e2eutil.ScrapeMetrics(g.t, m.proc), "mqgate_cluster_forwarded_total", nil)
		if !ok {
			g.t.Fatalf("member %d's /metrics has no mqgate_cluster_forwarded_total", m.id)
		}
		n += int(v)
	}
	return n
}

// mostLeading is the member leading the most groups (the lowest id of
// those).
func mostLeading(leaders []int) int {
	count := map[int]int{}
	best := 0
	for _, l := range leaders {
		count[l]++
		if best == 0 || count[l] > count[best] || count[l] == count[best] && l < best {
			best = l
		}
	}
	return best
}

// ledBy lists the groups member id leads.
func ledBy(leaders []int, id int) []int {
	var out []int
	for gid, l := range leaders {
		if l == id {
			out = append(out, gid)
		}
	}
	return out
}

// TestClusterReplicaSetsReplaceMember: five members, six groups (five
// data groups of three replicas), sync sends of the official client. The
// member leading the most groups dies (kill -9) and its data directory is
// lost. A new member, 6, started with --join --replaces, hosts the dead
// member's data groups; `cluster add-node --replaces` puts it in the dead
// member's place in each of them and in group 0, and removes the dead
// one. Each group ends with three voters, member 6 where the dead member
// was; member 6 stores those groups only, leads its share, and restarts
// from what it recorded; the sends go on throughout, every one answered
// OK is received, and each group's new replicas hold the same commit log.
func TestClusterReplicaSetsReplaceMember(t *testing.T) {
	e2eutil.Begin(t)
	replaceMember(t, true)
}

// TestClusterReplicaSetsRetireMember is TestClusterReplicaSetsReplaceMember
// with the member replaced running all along (retired, say, for its
// machine): it hands over the leaderships it holds as it is removed from
// each group, and stops on its own (exit status 0) once out of group 0.
func TestClusterReplicaSetsRetireMember(t *testing.T) {
	e2eutil.Begin(t)
	replaceMember(t, false)
}

func replaceMember(t *testing.T, lost bool) {
	const groups, members, replicas = 6, 5, 3
	g, leaders, topic, cg, load := replicaSetsUnderLoad(t, "rsr")
	defer load.stop()

	dead := g.byID(mostLeading(leaders))
	if lost {
		dead.proc.Kill9()
		if err := os.RemoveAll(dead.dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("member %d, leader of groups %v, killed and its data directory removed", dead.id, ledBy(leaders, dead.id))
		load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after member %d died", dead.id))
	}

	m6 := g.join(6, "--replaces", strconv.Itoa(dead.id))
	g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == dead })
	live := g.members[0]
	out, err := g.cli("cluster", "add-node", "--peer", live.peer, "--cluster-id", g.id, "--node-id", "6", "--node-peer", m6.peer,
		"--replaces", strconv.Itoa(dead.id), "--timeout", "120s")
	if err != nil {
		t.Fatalf("add-node 6 --replaces %d: %v\n%s", dead.id, err, out)
	}
	t.Logf("add-node: %s", strings.TrimSpace(out))
	if !lost {
		if code := dead.proc.Wait(60 * time.Second); code != 0 || !dead.proc.HasLine("this member was removed from its cluster") {
			t.Fatalf("member %d, replaced: exit status %d, want 0 and the log saying it was removed\n%s", dead.id, code, dead.proc.Log())
		}
	}
	sets := make([][]int, groups)
	for gid := 1; gid < groups; gid++ {
		for _, id := range replicaSet(gid, members, replicas) {
			if id == dead.id {
				id = m6.id
			}
			sets[gid] = append(sets[gid], id)
		}
		slices.Sort(sets[gid])
		st, err := g.groupStatus(live, gid)
		if err != nil || !slices.Equal(st.Voters, sets[gid]) {
			t.Fatalf("data group %d: voters %v (%v), want %v", gid, st.Voters, err, sets[gid])
		}
		_, err = os.Stat(filepath.Join(m6.dir, "groups", strconv.Itoa(gid), "replica"))
		if want := slices.Contains(sets[gid], m6.id); want != (err == nil) {
			t.Fatalf("member 6: data group %d's replica directory: %v, want it there %v", gid, err, want)
		}
	}
	var rest []int
	for _, m := range g.members {
		rest = append(rest, m.id)
	}
	slices.Sort(rest)
	if st, err := g.groupStatus(live, 0); err != nil || !slices.Equal(st.Voters, rest) {
		t.Fatalf("group 0: voters %v (%v), want %v", st.Voters, err, rest)
	}
	leaders = g.balancedData(groups, 60*time.Second)
	if len(ledBy(leaders[1:], m6.id)) == 0 {
		t.Fatalf("member 6 leads no data group after replacing member %d (leaders %v)", dead.id, leaders)
	}
	load.waitFor(t, load.count()+100, 60*time.Second, "after the replacement")

	// Restarted, member 6 hosts the groups it recorded.
	m6.proc.Kill9()
	g.start(m6)
	leaders = g.balancedData(groups, 60*time.Second)
	load.waitFor(t, load.count()+100, 60*time.Second, "after member 6 restarted")
	n := g.receivedAndSame(load, topic, cg, sets, "the replacement")
	t.Logf("member %d replaced by member 6; leaders %v; %d sends answered OK, all received", dead.id, leaders, n)
}

// TestClusterReplicaSetsAddMember: five members, five data groups of
// three replicas (15 replicas, three each), sync sends of the official
// client. A sixth member started with --join takes replicas from the
// members holding the most: `cluster add-node` adds it to group 0 and to
// the data groups it chose, removing in each the voter holding the most.
// Afterwards every data group has three voters, the sixth two of them and
// every member two or three; a member that gave a replica stops hosting
// it at once and deletes it when it next starts; the data groups'
// leaderships spread one per member; the sends go on throughout, every one
// answered OK is received, and each group's replicas hold the same
// commit log.
func TestClusterReplicaSetsAddMember(t *testing.T) {
	e2eutil.Begin(t)
	const groups, members, replicas = 6, 5, 3
	g, _, topic, cg, load := replicaSetsUnderLoad(t, "rsa")
	defer load.stop()

	via := g.members[0]
	m6 := g.join(6)
	out, err := g.cli("cluster", "add-node", "--peer", via.peer, "--cluster-id", g.id, "--node-id", "6", "--node-peer", m6.peer, "--timeout", "120s")
	if err != nil {
		t.Fatalf("add-node 6: %v\n%s", err, out)
	}
	sets, held := g.dataVoters(via, groups, replicas)
	gave := map[int][]int{} // member: the data groups it gave up
	for gid := 1; gid < groups; gid++ {
		for _, id := range replicaSet(gid, members, replicas) {
			if !slices.Contains(sets[gid], id) {
				gave[id] = append(gave[id], gid)
			}
		}
		_, err = os.Stat(filepath.Join(m6.dir, "groups", strconv.Itoa(gid), "replica"))
		if want := slices.Contains(sets[gid], m6.id); want != (err == nil) {
			t.Fatalf("member 6: data group %d's replica directory: %v, want it there %v", gid, err, want)
		}
	}
	t.Logf("after add-node: data group voters %v; replicas held %v; given up %v", sets[1:], held, gave)
	for id := 1; id <= 6; id++ {
		if held[id] < 2 || held[id] > 3 || id == 6 && held[id] != 2 {
			t.Fatalf("member %d holds %d replicas (all: %v), want 2 or 3, and 2 for member 6", id, held[id], held)
		}
	}
	load.waitFor(t, load.count()+100, 60*time.Second, "after the new member took its replicas")

	// A member that gave a replica deletes it when it next starts.
	for id, gids := range gave {
		m := g.byID(id)
		m.proc.Kill9()
		g.start(m)
		for _, gid := range gids {
			if _, err := os.Stat(filepath.Join(m.dir, "groups", strconv.Itoa(gid), "replica")); !os.IsNotExist(err) {
				t.Fatalf("member %d restarted: its replica of data group %d, given up: %v, want it deleted", id, gid, err)
			}
		}
		load.waitFor(t, load.count()+50, 60*time.Second, fmt.Sprintf("after member %d restarted", id))
	}
	leaders := g.dataLeadersSpread(groups, 60*time.Second)
	load.waitFor(t, load.count()+100, 60*time.Second, "at the end")
	n := g.receivedAndSame(load, topic, cg, sets, "the new member")
	t.Logf("leaders %v; %d sends answered OK, all received", leaders, n)
}

// dataLeadersSpread waits until the first member names a leader of every
// data group (group 0 left out) and no member leads more than
// ⌈(groups-1)/members⌉ of them, and returns the leaders by group.
func (g *group) dataLeadersSpread(groups int, timeout time.Duration) []int {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ls := g.groupLeaders(g.members[0], groups)
		if spreadLeaders(ls[1:], len(g.members)) {
			return ls
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("the data groups' leaders did not spread within %v (last seen %v)", timeout, ls)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterReplicaSetsMoveAndRemove: five members, five data groups of
// three replicas, sync sends of the official client throughout. A replica
// moves between two running members (`cluster move-replica`): member 2
// then holds four replicas and the other member two; `cluster rebalance`
// moves one back so that no member holds two more than another; then
// `cluster remove-node` removes a member leading a data group: each of
// its replicas moves first to the member holding the fewest among those
// not in the group, and it stops on its own (exit status 0). Every data
// group ends with three voters, the members that gave a replica delete
// it when they next start, the leaderships spread, every send answered
// OK is received, and each group's replicas hold the same commit log.
func TestClusterReplicaSetsMoveAndRemove(t *testing.T) {
	e2eutil.Begin(t)
	const groups, members, replicas = 6, 5, 3
	g, leaders, topic, cg, load := replicaSetsUnderLoad(t, "rsm")
	defer load.stop()

	voters := func(via *member) ([][]int, map[int]int) { return g.dataVoters(via, groups, replicas) }
	cli := func(args ...string) string {
		t.Helper()
		out, err := g.cli(append(args, "--cluster-id", g.id, "--timeout", "120s")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	// Group 4 is on members 4, 5 and 1; move member 4's replica to member 2.
	via := g.members[0]
	t.Log(cli("cluster", "move-replica", "--peer", via.peer, "--group", "4", "--from", "4", "--to", "2"))
	sets, held := voters(via)
	if !slices.Equal(sets[4], []int{1, 2, 5}) || held[2] != 4 || held[4] != 2 {
		t.Fatalf("after moving group 4's replica from member 4 to member 2: voters %v, held %v", sets[1:], held)
	}
	load.waitFor(t, load.count()+100, 60*time.Second, "after the move")
	out := cli("cluster", "rebalance", "--peer", via.peer)
	t.Logf("rebalance: %s", out)
	sets, held = voters(via)
	if counts := slices.Collect(maps.Values(held)); slices.Max(counts)-slices.Min(counts) > 1 {
		t.Fatalf("after rebalance: held %v (voters %v), want no member holding two more than another", held, sets[1:])
	}
	load.waitFor(t, load.count()+100, 60*time.Second, "after the rebalance")

	// Remove the member leading data group 3 (any data group's leader).
	leaders = g.dataLeadersSpread(groups, 60*time.Second)
	gone := g.byID(leaders[3])
	entry := g.members[0]
	if entry == gone {
		entry = g.members[1]
	}
	t.Log(cli("cluster", "remove-node", "--peer", entry.peer, "--node-id", strconv.Itoa(gone.id)))
	if code := gone.proc.Wait(60 * time.Second); code != 0 || !gone.proc.HasLine("this member was removed from its cluster") {
		t.Fatalf("member %d, removed: exit status %d, want 0 and the log saying it was removed\n%s", gone.id, code, gone.proc.Log())
	}
	g.members = slices.DeleteFunc(g.members, func(o *member) bool { return o == gone })
	sets, held = voters(entry)
	if _, ok := held[gone.id]; ok || slices.ContainsFunc(sets[1:], func(s []int) bool { return slices.Contains(s, gone.id) }) {
		t.Fatalf("member %d removed, and still a voter: %v", gone.id, sets[1:])
	}
	t.Logf("after removing member %d: voters %v, held %v", gone.id, sets[1:], held)
	load.waitFor(t, load.count()+100, 60*time.Second, fmt.Sprintf("after member %d was removed", gone.id))

	// Each member deletes the replicas it gave up when it next starts.
	for _, m := range g.members {
		m.proc.Kill9()
		g.start(m)
		for gid := 1; gid < groups; gid++ {
			_, err := os.Stat(filepath.Join(m.dir, "groups", strconv.Itoa(gid), "replica"))
			if want := slices.Contains(sets[gid], m.id); want != (err == nil) {
				t.Fatalf("member %d restarted: data group %d's replica directory: %v, want it there %v", m.id, gid, err, want)
			}
		}
		load.waitFor(t, load.count()+30, 60*time.Second, fmt.Sprintf("after member %d restarted", m.id))
	}
	leaders = g.dataLeadersSpread(groups, 60*time.Second)
	n := g.receivedAndSame(load, topic, cg, sets, "the moves")
	t.Logf("leaders %v; %d sends answered OK, all received", leaders, n)
}
