package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/peer"
)

// Groups are spread over the members in id order, group 0 on every
// member: each member holds about as many replicas as the others.
func TestReplicaSets(t *testing.T) {
	sets := replicaSets([]uint64{5, 1, 4, 2, 3}, 6, 3)
	want := [][]uint64{{1, 2, 3, 4, 5}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	for g := range want {
		if !slices.Equal(sets[g], want[g]) {
			t.Fatalf("group %d on %v, want %v (all: %v)", g, sets[g], want[g], sets)
		}
	}
	per := map[uint64]int{}
	for _, s := range sets[1:] {
		for _, id := range s {
			per[id]++
		}
	}
	for id, c := range per {
		if c != 3 {
			t.Fatalf("member %d holds %d data groups, want 3: %v", id, c, per)
		}
	}
}

// The replica sets are recorded on the first start and read back after;
// a restart with another --group-replicas is refused, and so is a
// cluster of every member hosting every group asked to change to replica
// sets.
func TestGroupVotersRecorded(t *testing.T) {
	dir := t.TempDir()
	peers := map[uint64]string{1: "a:1", 2: "b:1", 3: "c:1", 4: "d:1", 5: "e:1"}
	first, err := groupVoters(dir, peers, 6, 3, nil)
	if err != nil || len(first) != 6 {
		t.Fatalf("first start: %v, %v", first, err)
	}
	again, err := groupVoters(dir, map[uint64]string{1: "a:1"}, 6, 3, nil)
	if err != nil || !slices.EqualFunc(first, again, slices.Equal) {
		t.Fatalf("restart: %v, %v; want %v", again, err, first)
	}
	if _, err := groupVoters(dir, peers, 6, 5, nil); err == nil {
		t.Fatal("a restart with another --group-replicas was taken")
	}
	if sets, err := groupVoters(t.TempDir(), peers, 6, 5, nil); err != nil || sets != nil {
		t.Fatalf("replicas on every member: %v, %v; want every member hosting every group", sets, err)
	}
	old := t.TempDir()
	if err := os.Mkdir(filepath.Join(old, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := groupVoters(old, peers, 6, 3, nil); err == nil {
		t.Fatal("a cluster created with every member hosting every group took replica sets")
	}
}

// Five members, six data groups of three replicas: a member holds the
// replicas of its groups only, knows every group's leader (those it does
// not host from the members that do), the data groups' leaderships spread
// (one each), and the catalog works through every member, a
// deletion reaching the groups its member does not host.
func TestReplicaSetsInProcess(t *testing.T) {
	nodes, cfgs := openReplicaSetCluster(t, 5, 6, 3)
	for i, n := range nodes {
		hosted := 0
		for _, dg := range n.groups {
			_, err := os.Stat(filepath.Join(groupDir(cfgs[i].DataDir, dg.id), "replica"))
			if dg.hosted() != (err == nil) || dg.hosted() != (dg.id == 0 || slices.Contains(dg.voters, uint64(i+1))) {
				t.Fatalf("member %d, group %d: hosted %v, replica directory: %v, voters %v", i+1, dg.id, dg.hosted(), err, dg.voters)
			}
			if dg.hosted() {
				hosted++
			}
		}
		if hosted != 4 {
			t.Fatalf("member %d hosts %d groups, want 4 (group 0 and three data groups)", i+1, hosted)
		}
	}
	waitGroups(t, 60*time.Second, "every member knows the same leader of every group, and none leads more than one data group", func() bool {
		leads := map[uint64]int{}
		for g := range nodes[0].groups {
			l := nodes[0].groups[g].leader()
			if l == 0 || !nodes[l-1].groups[g].serving.Load() {
				return false
			}
			for _, n := range nodes {
				if n.groups[g].leader() != l {
					return false
				}
			}
			if g > 0 {
				leads[l]++
			}
		}
		for _, c := range leads {
			if c > 1 {
				return false
			}
		}
		return true
	})
	if l := nodes[0].layout(); l.First != 1 || l.Groups != 6 {
		t.Fatalf("layout %+v: the queues must be spread over groups 1 to 5, group 0 keeping the catalog", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createThroughEach(ctx, t, nodes, 10)
	for i, n := range nodes {
		name := fmt.Sprintf("topic-%d", (i+1)%len(nodes))
		if err := n.catalog.DeleteTopic(ctx, name); err != nil {
			t.Fatalf("delete %s through member %d: %v", name, i+1, err)
		}
		if _, err := nodes[(i+2)%len(nodes)].catalog.CreateTopic(ctx, model.Topic{Name: name, Queues: 3}); err != nil {
			t.Fatalf("create %s again: %v", name, err)
		}
	}
	st, err := (clusterView{n: nodes[0]}).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 6 || len(st.Members) != 5 {
		t.Fatalf("status: %d groups, %d members", len(st.Groups), len(st.Members))
	}
	for _, g := range st.Groups[1:] {
		if len(g.Replicas) != 3 || g.Leader == 0 {
			t.Fatalf("group %s: leader %d, replicas %+v", g.Name, g.Leader, g.Replicas)
		}
	}
	// A member is added (it takes replicas) once it answers.
	peers, err := peer.ParsePeers(cfgs[0].Peers)
	if err != nil {
		t.Fatal(err)
	}
	pctx := peer.WithToken(ctx, cfgs[0].PeerToken)
	if err := peer.DialAddMember(pctx, peers[1], cfgs[0].ClusterID, 9, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no member answers at 127.0.0.1:1") {
		t.Fatalf("add-node in a cluster of replica sets: %v", err)
	}
	if _, err := nodes[0].groups[0].raft.GroupLeaders(ctx, 2); err != nil {
		t.Fatalf("group leaders of member 2: %v", err)
	}
	// Group 1 is on members 1, 2 and 3: its replica moves from member 1
	// to member 4, which opens it while it runs; member 1 stops hosting
	// it, and the group goes on taking catalog changes.
	if err := peer.DialMoveReplica(pctx, peers[2], cfgs[0].ClusterID, 1, 1, 4); err != nil {
		t.Fatalf("move group 1's replica from member 1 to member 4: %v", err)
	}
	waitGroups(t, 30*time.Second, "member 4 hosts group 1, member 1 no longer does, and every member knows its voters", func() bool {
		if !nodes[3].groups[1].hosted() || nodes[0].groups[1].hosted() {
			return false
		}
		for _, n := range nodes {
			if !slices.Equal(n.groups[1].votersNow(), []uint64{2, 3, 4}) || n.groups[1].leader() == 0 {
				return false
			}
		}
		return true
	})
	if err := peer.DialMoveReplica(pctx, peers[2], cfgs[0].ClusterID, 1, 4, 1); err == nil || !strings.Contains(err.Error(), "restart it") {
		t.Fatalf("moving group 1's replica back to member 1, which gave it up since it started: %v", err)
	}
	if _, err := nodes[3].catalog.CreateTopic(ctx, model.Topic{Name: "after-the-move", Queues: 5}); err != nil {
		t.Fatalf("create a topic after the move: %v", err)
	}
	if err := nodes[0].catalog.DeleteTopic(ctx, "after-the-move"); err != nil {
		t.Fatalf("delete it through member 1, which no longer hosts group 1: %v", err)
	}
}

// With replica sets a group's leadership goes only to one of its voters:
// a member over the share whose groups' voters all lead their share
// makes room through a chain. Member 3 leads two data groups, member 5
// none and is a voter of neither: member 1 first hands its group shared
// with 5 to 5, then member 3 hands one of its own to member 1.
func TestPlanChain(t *testing.T) {
	voters := [][]uint64{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	members := []uint64{1, 2, 3, 4, 5}
	leaders := []uint64{3, 3, 4, 1, 2}
	for _, self := range []uint64{2, 3, 4, 5} {
		if p := planChain(leaders, voters, members, self); p != nil {
			t.Fatalf("member %d plans %+v; only member 1 moves first", self, p)
		}
	}
	p := planChain(leaders, voters, members, 1)
	if p == nil || !slices.Equal(p.groups, []int{3}) || !slices.Equal(p.to, []uint64{5}) {
		t.Fatalf("member 1 plans %+v, want group 3 (index of data group 4) to member 5", p)
	}
	leaders[3] = 5
	p = planChain(leaders, voters, members, 3)
	if p == nil || !slices.Equal(p.groups, []int{0}) || !slices.Equal(p.to, []uint64{1}) {
		t.Fatalf("then member 3 plans %+v, want group 0 to member 1", p)
	}
	leaders[0] = 1
	for _, self := range members {
		if p := planChain(leaders, voters, members, self); p != nil {
			t.Fatalf("balanced (%v), member %d still plans %+v", leaders, self, p)
		}
	}
}

// A member replacing another hosts the groups the other votes in (and
// group 0), in its place, as the running members answer them; it records
// them, and a restart reads the record without asking again. A
// replacement of a member that votes in no data group is refused.
func TestGroupVotersOfReplacement(t *testing.T) {
	cluster := [][]uint64{{1, 2, 3, 4, 5}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	asked := 0
	learn := func() ([][]uint64, error) {
		asked++
		return slices.Clone(cluster), nil
	}
	dir := t.TempDir()
	peers := map[uint64]string{1: "a:1", 6: "f:1"}
	got, err := groupVoters(dir, peers, 6, 3, &replacement{self: 6, old: 4, learn: learn})
	want := [][]uint64{{1, 2, 3, 5, 6}, {1, 2, 3}, {2, 3, 6}, {3, 5, 6}, {1, 5, 6}, {1, 2, 5}}
	if err != nil || !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("replacing member 4: %v, %v; want %v", got, err, want)
	}
	again, err := groupVoters(dir, peers, 6, 3, &replacement{self: 6, old: 4, learn: learn})
	if err != nil || !slices.EqualFunc(again, want, slices.Equal) || asked != 1 {
		t.Fatalf("restart: %v, %v (asked %d times); want %v, asked once", again, err, asked, want)
	}
	// Part of the way: member 6 already in place of 4 in group 2.
	cluster[2] = []uint64{2, 3, 4, 6}
	if got, err := groupVoters(t.TempDir(), peers, 6, 3, &replacement{self: 6, old: 4, learn: learn}); err != nil || !slices.Equal(got[2], []uint64{2, 3, 6}) {
		t.Fatalf("resumed replacement: %v, %v", got, err)
	}
	cluster[2] = []uint64{2, 3, 4}
	if _, err := groupVoters(t.TempDir(), peers, 6, 3, &replacement{self: 6, old: 9, learn: learn}); err == nil {
		t.Fatal("the replacement of a member in no data group was taken")
	}
	if _, err := groupVoters(t.TempDir(), peers, 5, 3, &replacement{self: 6, old: 4, learn: learn}); err == nil {
		t.Fatal("a replacement with another number of data groups was taken")
	}
}
