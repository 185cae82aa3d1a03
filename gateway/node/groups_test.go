package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/storage/metastore"
)

// A member hands over the groups it leads beyond ⌈G/N⌉, highest first,
// to the members leading fewer than that, fewest first; nothing moves
// when it leads its share or less, or when no member leads fewer.
func TestPlanTransfer(t *testing.T) {
	voters := []uint64{1, 2, 3}
	for _, c := range []struct {
		leaders []uint64
		self    uint64
		groups  []int    // nil: no plan
		to      []uint64 //
		share   int
	}{
		{leaders: []uint64{1, 2, 3}, self: 1},
		{leaders: []uint64{1, 2, 3}, self: 3},
		{leaders: []uint64{1, 1, 1}, self: 1, groups: []int{2, 1, 0}, to: []uint64{2, 3}, share: 1},
		{leaders: []uint64{1, 1, 2}, self: 1, groups: []int{1, 0}, to: []uint64{3}, share: 1},
		{leaders: []uint64{1, 1, 2}, self: 2},
		{leaders: []uint64{2, 1, 1}, self: 1, groups: []int{2, 1}, to: []uint64{3}, share: 1},
		// Four groups over three members: a share of two.
		{leaders: []uint64{1, 1, 1, 2}, self: 1, groups: []int{2, 1, 0}, to: []uint64{3, 2}, share: 2},
		{leaders: []uint64{1, 1, 2, 2}, self: 1},
		// Two groups over three: one each at most.
		{leaders: []uint64{3, 3}, self: 3, groups: []int{1, 0}, to: []uint64{1, 2}, share: 1},
		// One group: nothing to spread.
		{leaders: []uint64{2}, self: 2},
	} {
		p := planTransfer(c.leaders, voters, c.self)
		if c.groups == nil {
			if p != nil {
				t.Fatalf("leaders %v, self %d: plan %+v, want none", c.leaders, c.self, p)
			}
			continue
		}
		if p == nil || !slices.Equal(p.groups, c.groups) || !slices.Equal(p.to, c.to) || p.share != c.share {
			t.Fatalf("leaders %v, self %d: plan %+v, want groups %v to %v share %d", c.leaders, c.self, p, c.groups, c.to, c.share)
		}
	}
	if got := leaderShare(3, 3); got != 1 {
		t.Fatalf("share of 3 groups over 3: %d", got)
	}
	if got := leaderShare(4, 3); got != 2 {
		t.Fatalf("share of 4 groups over 3: %d", got)
	}
}

// The data groups a cluster was created with are recorded on its first
// start and a restart with another number is refused, naming the one to
// use; a data directory of a cluster of one group (a raft log, no
// record) opens with one group only and is left as it was.
func TestCheckDataGroups(t *testing.T) {
	dir := t.TempDir()
	if err := checkDataGroups(dir, 3); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, dataGroupsFile)); err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("record %q, %v", b, err)
	}
	if err := checkDataGroups(dir, 3); err != nil {
		t.Fatalf("restart with the same number: %v", err)
	}
	for _, g := range []int{1, 2, 5} {
		err := checkDataGroups(dir, g)
		if err == nil || !strings.Contains(err.Error(), "--data-groups 3") {
			t.Fatalf("restart with %d groups: %v, want a refusal naming --data-groups 3", g, err)
		}
	}
	one := t.TempDir()
	if err := os.Mkdir(filepath.Join(one, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkDataGroups(one, 3); err == nil || !strings.Contains(err.Error(), "--data-groups 1") {
		t.Fatalf("a cluster of one group restarted with 3: %v", err)
	}
	if err := checkDataGroups(one, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(one, dataGroupsFile)); !os.IsNotExist(err) {
		t.Fatalf("a cluster of one group got a record: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, dataGroupsFile), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkDataGroups(dir, 3); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged record: %v", err)
	}
}

// openGroupsCluster opens three members of a cluster of groups data
// groups, in process, on loopback.
func openGroupsCluster(t *testing.T, groups int) []*Node {
	t.Helper()
	nodes, _ := openGroupsClusterConfigs(t, groups)
	return nodes
}

// openGroupsClusterConfigs is openGroupsCluster, with each member's
// configuration (to open it again: its peer address is one no other
// socket takes meanwhile); the members in the slice returned when the
// test ends (nil: none) are shut down then.
func openGroupsClusterConfigs(t *testing.T, groups int) ([]*Node, []Config) {
	t.Helper()
	return openReplicaSetCluster(t, 3, groups, 0)
}

// openReplicaSetCluster is openGroupsClusterConfigs with members members
// and --group-replicas replicas.
func openReplicaSetCluster(t *testing.T, members, groups, replicas int) ([]*Node, []Config) {
	t.Helper()
	var peers []string
	for i := 1; i <= members; i++ {
		peers = append(peers, fmt.Sprintf("%d=%s", i, testutil.StableAddr(t)))
	}
	nodes := make([]*Node, members)
	cfgs := make([]Config, members)
	var wg sync.WaitGroup
	errs := make([]error, members)
	for i := range nodes {
		cfg := testConfig(t)
		cfg.ClusterID, cfg.NodeID, cfg.Peers, cfg.PeerToken = "groups", i+1, strings.Join(peers, ","), "0123456789abcdef-groups"
		cfg.DataGroups, cfg.GroupReplicas, cfg.AutoCreate = groups, replicas, true
		cfgs[i] = cfg
		wg.Go(func() { nodes[i], errs[i] = Open(context.Background(), cfg, Options{Logger: quietLogger()}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i+1, err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n == nil {
				continue
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				n.Shutdown(ctx)
			})
		}
		wg.Wait()
	})
	return nodes, cfgs
}

// waitGroups polls cond every few milliseconds until it holds, failing
// the test after d.
func waitGroups(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spread reports whether every member agrees on each group's leader,
// each member leads one group, and each leader serves it.
func spread(nodes []*Node) bool {
	leads := map[uint64]int{}
	for g := range nodes[0].groups {
		l := nodes[0].groups[g].raft.Leader()
		if l == 0 {
			return false
		}
		for _, n := range nodes {
			if n.groups[g].raft.Leader() != l {
				return false
			}
		}
		if !nodes[l-1].groups[g].serving.Load() {
			return false
		}
		leads[l]++
	}
	return len(leads) == len(nodes)
}

// Three members of three data groups spread the leaderships one each,
// and every member's catalog takes a topic created through any member;
// once a member hands its leadership over (as before it stops), the
// others lead its group, and when it is back the leaderships spread
// again.
func TestGroupsClusterInProcess(t *testing.T) {
	nodes := openGroupsCluster(t, 3)
	waitGroups(t, 30*time.Second, "leaders spread one per member", func() bool { return spread(nodes) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createThroughEach(ctx, t, nodes, 6)
	// Deleted through one member, created again through the next with
	// other settings: the creation finds the name free, and the admin API
	// of the third lists the new settings at once.
	for i := range nodes {
		name := fmt.Sprintf("topic-%d", i)
		if err := nodes[i].catalog.DeleteTopic(ctx, name); err != nil {
			t.Fatalf("delete %s through member %d: %v", name, i+1, err)
		}
		next, third := nodes[(i+1)%len(nodes)], nodes[(i+2)%len(nodes)]
		if _, err := (groupsAdmin{n: next}).CreateTopic(ctx, model.Topic{Name: name, Queues: 3}); err != nil {
			t.Fatalf("create %s again through member %d: %v", name, (i+1)%len(nodes)+1, err)
		}
		ts, err := groupsAdmin{n: third}.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ts, func(tp model.Topic) bool { return tp.Name == name && tp.Queues == 3 }) {
			t.Fatalf("member %d lists %+v, without %s as created again (3 queues)", (i+2)%len(nodes)+1, ts, name)
		}
	}
	// Member 1 hands over what it leads; the group goes to another
	// member, and comes back to member 1 once the balance runs.
	var led *dataGroup
	for _, dg := range nodes[0].groups {
		if dg.raft.IsLeader() {
			led = dg
		}
	}
	if err := led.raft.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	waitGroups(t, 30*time.Second, "the leaders spread again", func() bool { return spread(nodes) })
}

// createThroughEach creates topic-<i> of queues queues through member i,
// each found through every member at once.
func createThroughEach(ctx context.Context, t *testing.T, nodes []*Node, queues int32) {
	t.Helper()
	for i, n := range nodes {
		name := fmt.Sprintf("topic-%d", i)
		if _, err := n.catalog.CreateTopic(ctx, model.Topic{Name: name, Queues: queues}); err != nil {
			t.Fatalf("create %s through member %d: %v", name, i+1, err)
		}
		for j, o := range nodes {
			if tp, err := o.catalog.GetTopic(ctx, name); err != nil || tp.Queues != queues {
				t.Fatalf("%s through member %d: %+v, %v", name, j+1, tp, err)
			}
		}
	}
}

// A catalog change whose outcome is unknown is proposed again at the
// next leader: group 0's leader takes the change just as both other
// members stop following it, so it can neither commit it nor keep
// leading, and the change's outcome is unknown; once they are back, the
// change is answered OK and every member sees it. A deletion proposed
// again may find that its first attempt did delete: that is its success.
func TestCatalogChangeProposedAgainAtTheNextLeader(t *testing.T) {
	t.Run("put", func(t *testing.T) {
		nodes := catalogChangeThroughFailover(t, nil, raftstore.MetaOp{Kind: raftstore.MetaPutTopic,
			Topic: &metastore.Topic{Name: "put-again", Type: metastore.TopicNormal, QueueCount: 4, Perm: metastore.PermReadWrite}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, n := range nodes {
			if tp, err := (groupsAdmin{n: n}).GetTopic(ctx, "put-again"); err != nil || tp.Queues != 4 {
				t.Fatalf("the topic through member %d: %+v, %v", i+1, tp, err)
			}
		}
	})
	t.Run("delete", func(t *testing.T) {
		nodes := catalogChangeThroughFailover(t, func(ctx context.Context, n *Node) error {
			_, err := n.catalog.CreateTopic(ctx, model.Topic{Name: "delete-again", Queues: 4})
			return err
		}, raftstore.MetaOp{Kind: raftstore.MetaDeleteTopic, Name: "delete-again"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, n := range nodes {
			if tp, err := (groupsAdmin{n: n}).GetTopic(ctx, "delete-again"); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
				t.Fatalf("the deleted topic through member %d: %+v, %v", i+1, tp, err)
			}
		}
	})
}

// catalogChangeThroughFailover opens a cluster of two data groups, runs
// before through group 0's leader, then proposes op there just as the
// other members' raft members of group 0 stop, and opens those members
// again once the leader has stepped down; it fails unless op is answered
// OK, and returns the members.
func catalogChangeThroughFailover(t *testing.T, before func(context.Context, *Node) error, op raftstore.MetaOp) []*Node {
	t.Helper()
	nodes, cfgs := openGroupsClusterConfigs(t, 2)
	lead := -1
	waitGroups(t, 30*time.Second, "a leader of group 0 every member knows", func() bool {
		l := nodes[0].groups[0].raft.Leader()
		for _, n := range nodes {
			if l == 0 || n.groups[0].raft.Leader() != l {
				return false
			}
		}
		lead = int(l) - 1
		return true
	})
	if before != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := before(ctx, nodes[lead]); err != nil {
			t.Fatal(err)
		}
	}
	// The others' raft members of group 0 stop at once: the leader
	// still leads for an election timeout, and takes the change.
	for i, n := range nodes {
		if i != lead {
			if err := n.groups[0].raft.Stop(); err != nil {
				t.Fatalf("stop member %d's raft member of group 0: %v", i+1, err)
			}
		}
	}
	if !nodes[lead].groups[0].raft.IsLeader() {
		t.Fatalf("member %d no longer leads group 0 right after the others stopped", lead+1)
	}
	done := make(chan error, 1)
	go func() {
		_, err := (&catalog{n: nodes[lead]}).ProposeMeta(context.Background(), op)
		done <- err
	}()
	waitGroups(t, 30*time.Second, "the leader alone steps down", func() bool { return !nodes[lead].groups[0].raft.IsLeader() })
	var wg sync.WaitGroup
	for i := range nodes {
		if i == lead {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			nodes[i].Shutdown(ctx)
		})
	}
	wg.Wait()
	for i := range nodes {
		if i == lead {
			continue
		}
		n, err := Open(context.Background(), cfgs[i], Options{Logger: quietLogger()})
		if err != nil {
			nodes[i] = nil
			t.Fatalf("open member %d again: %v", i+1, err)
		}
		nodes[i] = n
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a %s while group 0 lost its quorum and got it back: %v", op.Kind, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s is not answered 30 s after the members are back", op.Kind)
	}
	return nodes
}

// The leadership balance counts only the members voting in every data
// group: one joining or leaving (a voter of some groups only) is left
// out of the share and is handed nothing.
func TestIntersectVoters(t *testing.T) {
	for _, c := range []struct {
		sets [][]uint64
		want []uint64
	}{
		{nil, nil},
		{[][]uint64{{1, 2, 3}}, []uint64{1, 2, 3}},
		{[][]uint64{{1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3, 4}}, []uint64{1, 2, 3}},
		{[][]uint64{{1, 3, 4}, {1, 2, 3, 4}, {2, 3, 4}}, []uint64{3, 4}},
	} {
		if got := intersect(c.sets); !slices.Equal(got, c.want) {
			t.Errorf("intersect(%v) = %v, want %v", c.sets, got, c.want)
		}
	}
	// Member 4 votes in group 0 only: member 1, leading two of three
	// groups over three full voters, keeps them (its share is 1 only
	// once 4 counts) and hands nothing to 4.
	if p := planTransfer([]uint64{1, 1, 2}, intersect([][]uint64{{1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}}), 1); p == nil || slices.Contains(p.to, 4) {
		t.Fatalf("plan with member 4 half joined: %+v", p)
	}
}
