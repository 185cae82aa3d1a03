package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
	"github.com/mqgate/mqgate/storage/metastore"
)

// groupsCluster is a group of in-process members, each hosting the same
// raft groups (StartGroups).
type groupsCluster struct {
	t       *testing.T
	id      string
	groups  int
	ticks   int // Config.ElectionTicks
	addrs   map[uint64]string
	members map[uint64]*groupsMember
	// voters, when set, are the members each group is on (the others do
	// not host it); replicas is then Config.GroupReplicas.
	voters   [][]uint64
	replicas int
}

type groupsMember struct {
	id    uint64
	dir   string
	reps  []*raftstore.Replica
	nodes []*Node
}

func newGroupsCluster(t *testing.T, members, groups int) *groupsCluster {
	t.Helper()
	return newGroupsClusterTicks(t, members, groups, 10)
}

// newGroupsClusterTicks is newGroupsCluster with members whose election
// timeout is ticks ticks of 20 ms.
func newGroupsClusterTicks(t *testing.T, members, groups, ticks int) *groupsCluster {
	t.Helper()
	return newGroupsClusterOn(t, members, groups, ticks, nil)
}

// newGroupsClusterOn is newGroupsClusterTicks with each group on the
// members voters names (nil: every member).
func newGroupsClusterOn(t *testing.T, members, groups, ticks int, voters [][]uint64) *groupsCluster {
	t.Helper()
	c := &groupsCluster{t: t, id: "groups-" + t.Name(), groups: groups, ticks: ticks, addrs: map[uint64]string{}, members: map[uint64]*groupsMember{},
		voters: voters}
	if voters != nil {
		c.replicas = len(voters[len(voters)-1])
	}
	lis := map[uint64]net.Listener{}
	for i := range members {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := uint64(i + 1)
		lis[id], c.addrs[id] = l, l.Addr().String()
	}
	root := t.TempDir()
	for id, l := range lis {
		c.start(id, filepath.Join(root, fmt.Sprint(id)), l, false, groups)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	return c
}

// start starts member id hosting groups groups (bootstrapping them with
// c's members, or waiting to be added to them: join).
func (c *groupsCluster) start(id uint64, dir string, l net.Listener, join bool, groups int) *groupsMember {
	c.t.Helper()
	m, err := c.tryStart(id, dir, l, join, groups)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// tryStart is start, answering StartGroups' error.
func (c *groupsCluster) tryStart(id uint64, dir string, l net.Listener, join bool, groups int) (*groupsMember, error) {
	c.t.Helper()
	m := &groupsMember{id: id, dir: dir}
	var gs []Group
	for g := range groups {
		var voters []uint64
		if c.voters != nil {
			if voters = c.voters[g]; !slices.Contains(voters, id) {
				m.reps = append(m.reps, nil)
				gs = append(gs, Group{})
				continue
			}
		}
		gdir := filepath.Join(dir, fmt.Sprint(g))
		rep, err := raftstore.OpenReplica(filepath.Join(gdir, "replica"), raftstore.Options{
			Store: storeOpts(), StoreHost: "cluster:8081", CommitTimeout: 3 * time.Second, PersistEvery: 8, Logger: quiet})
		if err != nil {
			c.t.Fatal(err)
		}
		m.reps = append(m.reps, rep)
		gs = append(gs, Group{WALDir: filepath.Join(gdir, "wal"), App: rep, Voters: voters})
	}
	nodes, err := StartGroups(Config{ClusterID: c.id, NodeID: id, Peers: maps.Clone(c.addrs), Listener: l, Join: join,
		TickInterval: 20 * time.Millisecond, ElectionTicks: c.ticks, Info: testInfo(id), Token: testToken, Logger: quiet,
		GroupReplicas: c.replicas}, gs)
	if err != nil {
		for _, r := range m.reps {
			if r != nil {
				r.Close(context.Background())
			}
		}
		return nil, err
	}
	for g, n := range nodes {
		if n != nil {
			m.reps[g].Attach(n)
		}
	}
	m.nodes = nodes
	c.members[id] = m
	return m, nil
}

func (c *groupsCluster) stop(m *groupsMember) {
	if m.nodes == nil {
		return
	}
	for g, n := range m.nodes {
		if n == nil {
			continue
		}
		if err := n.Stop(); err != nil {
			c.t.Errorf("stop member %d group %d: %v", m.id, g, err)
		}
		if err := m.reps[g].Close(context.Background()); err != nil {
			c.t.Errorf("close member %d group %d: %v", m.id, g, err)
		}
	}
	m.nodes = nil
}

// leader waits for a leader of group g that all members agree on.
func (c *groupsCluster) leader(g int) *groupsMember {
	c.t.Helper()
	var l *groupsMember
	deadline := time.Now().Add(20 * time.Second)
	for {
		l = nil
		agreed := true
		for _, m := range c.members {
			if m.nodes[g].IsLeader() {
				l = m
			}
		}
		for _, m := range c.members {
			if l == nil || m.nodes[g].Leader() != l.id {
				agreed = false
			}
		}
		if agreed {
			return l
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader of group %d", g)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The groups a member hosts share its transport and keep their logs
// apart: each group's appends reach that group's replicas on every
// member, and no other group's; each group reports its own status; the
// leadership of one group moves without touching another's.
func TestGroupsShareTransportKeepLogsApart(t *testing.T) {
	const groups = 3
	c := newGroupsCluster(t, 3, groups)
	want := make([]map[string]bool, groups)
	for g := range groups {
		l := c.leader(g)
		ids := appendN(t, &member{id: l.id, rep: l.reps[g]}, 100*g, 100*g+24)
		want[g] = map[string]bool{}
		for _, id := range ids {
			want[g][id] = true
		}
	}
	for g := range groups {
		var top uint64
		for _, m := range c.members {
			top = max(top, m.reps[g].Applied())
		}
		for _, m := range c.members {
			if err := m.reps[g].WaitApplied(testCtx(t), top); err != nil {
				t.Fatal(err)
			}
			got := contents(t, &member{id: m.id, rep: m.reps[g]})
			if !maps.Equal(got, want[g]) {
				t.Fatalf("member %d, group %d holds %d messages, want the %d appended to that group", m.id, g, len(got), len(want[g]))
			}
		}
	}
	ctx := testCtx(t)
	for g := range groups {
		for _, m := range c.members {
			st, err := m.nodes[0].MemberStatus(ctx, (m.id%3)+1)
			if err != nil || st.Group != 0 {
				t.Fatalf("group 0's status of member %d through member %d: %+v, %v", (m.id%3)+1, m.id, st, err)
			}
			st, err = m.nodes[g].MemberStatus(ctx, (m.id%3)+1)
			if err != nil || st.Group != uint64(g) {
				t.Fatalf("group %d's status of member %d: group %d, %v", g, (m.id%3)+1, st.Group, err)
			}
		}
	}
	l0, l1 := c.leader(0), c.leader(1)
	to := l1.id%3 + 1
	st0, err := l0.nodes[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.nodes[1].TransferLeadership(ctx, to); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(1); got.id != to {
		t.Fatalf("group 1 led by %d after the transfer to %d", got.id, to)
	}
	after, err := c.leader(0).nodes[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Leader != st0.Leader || after.Term != st0.Term {
		t.Fatalf("group 0 went from leader %d term %d to %d term %d with group 1's transfer", st0.Leader, st0.Term, after.Leader, after.Term)
	}
	info, err := callInfo(ctx, c.members[1].nodes[0].tr.conn(2), c.id)
	if err != nil || info.GetDataGroups() != groups {
		t.Fatalf("info of member 2: %d groups, %v", info.GetDataGroups(), err)
	}
}

// A change proposed through a member that does not lead reaches the
// leader, is applied there and then here; a read index asked through a
// follower covers it; a change of a kind others may not propose is
// refused.
func TestProposeAtLeader(t *testing.T) {
	c := newGroupsCluster(t, 3, 2)
	ctx := testCtx(t)
	l := c.leader(0)
	var f *groupsMember
	for _, m := range c.members {
		if m != l {
			f = m
		}
	}
	for _, through := range []*groupsMember{f, l} {
		name := fmt.Sprintf("topic-via-%d", through.id)
		change, err := raftstore.EncodeChange(raftstore.MetaOp{Kind: raftstore.MetaPutTopic, Topic: &metastore.Topic{Name: name, QueueCount: 4}})
		if err != nil {
			t.Fatal(err)
		}
		idx, err := through.nodes[0].ProposeAtLeader(ctx, change)
		if err != nil {
			t.Fatalf("propose through member %d: %v", through.id, err)
		}
		if err := through.reps[0].WaitApplied(ctx, idx); err != nil {
			t.Fatal(err)
		}
		if tp, ok := through.reps[0].Store().Meta().Topic(name); !ok || tp.QueueCount != 4 {
			t.Fatalf("member %d after the change at %d: topic %+v, %v", through.id, idx, tp, ok)
		}
		if _, ok := through.reps[1].Store().Meta().Topic(name); ok {
			t.Fatalf("the change of group 0 reached group 1")
		}
		ri, err := f.nodes[0].LeaderReadIndex(ctx)
		if err != nil || ri < idx {
			t.Fatalf("read index through member %d: %d, %v; the change was applied at %d", f.id, ri, err, idx)
		}
	}
	change, err := raftstore.EncodeChange(raftstore.MetaOp{Kind: raftstore.MetaBarrier})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes[0].ProposeAtLeader(ctx, change); !errors.Is(err, raftstore.ErrRefused) {
		t.Fatalf("a barrier proposed through a follower: %v, want ErrRefused", err)
	}
	if _, err := f.nodes[0].ProposeAtLeader(ctx, []byte(`{"kind":"put-topic"}`)); !errors.Is(err, raftstore.ErrRefused) {
		t.Fatalf("a topic change without its topic: %v, want ErrRefused", err)
	}
}

// A change proposed through a follower while the leader it knows is
// down (its connection failed: a call would not even be sent) waits for
// the next leader instead of failing: a topic created during a failover
// of the catalog's group is created once the group has a leader again.
func TestProposeAtLeaderWaitsOutADeadLeader(t *testing.T) {
	c := newGroupsClusterTicks(t, 3, 1, 100) // 2 s before the others elect
	ctx := testCtx(t)
	l := c.leader(0)
	var f *groupsMember
	for _, m := range c.members {
		if m != l {
			f = m
		}
	}
	c.stop(l)
	delete(c.members, l.id)
	conn := f.nodes[0].tr.conn(l.id)
	for conn.GetState() == connectivity.Ready {
		if !conn.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatal("the connection to the stopped leader stayed ready")
		}
	}
	if lead := f.nodes[0].Leader(); lead != l.id {
		t.Fatalf("member %d knows leader %d already; the test needs it to know the stopped one, %d", f.id, lead, l.id)
	}
	change, err := raftstore.EncodeChange(raftstore.MetaOp{Kind: raftstore.MetaPutTopic, Topic: &metastore.Topic{Name: "during-failover", QueueCount: 4}})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := f.nodes[0].ProposeAtLeader(ctx, change)
	if err != nil {
		t.Fatalf("propose through member %d while the leader it knows is down: %v", f.id, err)
	}
	if lead := f.nodes[0].Leader(); lead == l.id || lead == 0 {
		t.Fatalf("the change was applied at %d with leader %d", idx, lead)
	}
	if err := f.reps[0].WaitApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.reps[0].Store().Meta().Topic("during-failover"); !ok {
		t.Fatalf("member %d after the change at %d: no topic", f.id, idx)
	}
}

// join starts member id, hosting groups groups, waiting to be added.
func (c *groupsCluster) join(id uint64, groups int) *groupsMember {
	return c.newMember(id, groups, true)
}

// newMember starts member id on a new address, hosting groups groups,
// waiting to be added (join) or bootstrapping its groups with every
// address c knows (a member wrongly started without Config.Join).
func (c *groupsCluster) newMember(id uint64, groups int, join bool) *groupsMember {
	c.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	c.addrs[id] = l.Addr().String()
	return c.start(id, filepath.Join(c.t.TempDir(), fmt.Sprint(id)), l, join, groups)
}

// converged waits until every member's replica of group g holds what
// the group's leader applied, and returns the leader's contents.
func (c *groupsCluster) converged(g int) map[string]bool {
	c.t.Helper()
	l := c.leader(g)
	top := l.reps[g].Applied()
	want := contents(c.t, &member{id: l.id, rep: l.reps[g]})
	for _, m := range c.members {
		if err := m.reps[g].WaitApplied(testCtx(c.t), top); err != nil {
			c.t.Fatalf("member %d, group %d: %v", m.id, g, err)
		}
		if got := contents(c.t, &member{id: m.id, rep: m.reps[g]}); !maps.Equal(got, want) {
			c.t.Fatalf("member %d, group %d holds %d messages, its leader %d", m.id, g, len(got), len(want))
		}
	}
	return want
}

// A member joins every group of a cluster of several (the first group
// first), catches up in each and votes; a member removed leaves every
// group (the first last) and stops; the groups go on without it. A
// member hosting another number of groups is refused before anything
// changes.
func TestGroupsMembershipChanges(t *testing.T) {
	const groups = 2
	c := newGroupsCluster(t, 3, groups)
	for g := range groups {
		l := c.leader(g)
		appendN(t, &member{id: l.id, rep: l.reps[g]}, 100*g, 100*g+20)
	}
	ctx := testCtx(t)

	c.join(5, 1)
	var bad *badRequestError
	if err := DialAddMember(ctx, c.addrs[1], c.id, 5, c.addrs[5]); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--data-groups 2") {
		t.Fatalf("adding a member hosting 1 group to a cluster of 2: %v, want InvalidArgument naming --data-groups 2 (%v)", err, errors.As(err, &bad))
	}
	c.stop(c.members[5])
	delete(c.members, 5)
	delete(c.addrs, 5)
	// Started without Join, it bootstrapped groups of its own: their logs
	// would clash with the cluster's.
	c.newMember(6, groups, false)
	if err := DialAddMember(ctx, c.addrs[1], c.id, 6, c.addrs[6]); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "of its own") {
		t.Fatalf("adding a member that bootstrapped its own groups: %v, want InvalidArgument naming that", err)
	}
	c.stop(c.members[6])
	delete(c.members, 6)
	delete(c.addrs, 6)
	for g := range groups {
		if v := c.leader(g).nodes[g].Members().Voters; len(v) != 3 {
			t.Fatalf("group %d's voters after a refused add: %v", g, v)
		}
	}

	c.join(4, groups)
	if err := DialAddMember(ctx, c.addrs[1], c.id, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
	for g := range groups {
		if v := c.leader(g).nodes[g].Members().Voters; !slices.Equal(v, []uint64{1, 2, 3, 4}) {
			t.Fatalf("group %d's voters after adding 4: %v", g, v)
		}
		l := c.leader(g)
		appendN(t, &member{id: l.id, rep: l.reps[g]}, 100*g+20, 100*g+40)
		if got := c.converged(g); len(got) != 40 {
			t.Fatalf("group %d holds %d messages, want 40", g, len(got))
		}
	}
	// Adding it again changes nothing.
	if err := DialAddMember(ctx, c.addrs[2], c.id, 4, c.addrs[4]); err != nil {
		t.Fatalf("adding 4 again: %v", err)
	}

	// The leader of group 1 is removed, asked through itself.
	gone := c.leader(1).id
	if err := DialRemoveMember(ctx, c.addrs[gone], c.id, gone); err != nil {
		t.Fatal(err)
	}
	m := c.members[gone]
	select {
	case <-m.nodes[0].Done():
	case <-ctx.Done():
		t.Fatalf("the removed member's group 0 did not stop")
	}
	if err := m.nodes[0].Err(); !errors.Is(err, ErrRemoved) {
		t.Fatalf("the removed member's group 0 stopped with %v, want ErrRemoved", err)
	}
	c.stop(m)
	delete(c.members, gone)
	var rest []uint64
	for id := range uint64(4) {
		if id+1 != gone {
			rest = append(rest, id+1)
		}
	}
	for g := range groups {
		l := c.leader(g)
		if v := l.nodes[g].Members().Voters; !slices.Equal(v, rest) {
			t.Fatalf("group %d's voters after removing %d: %v, want %v", g, gone, v, rest)
		}
		appendN(t, &member{id: l.id, rep: l.reps[g]}, 100*g+40, 100*g+60)
		if got := c.converged(g); len(got) != 60 {
			t.Fatalf("group %d holds %d messages, want 60", g, len(got))
		}
	}
	if err := DialAddMember(ctx, c.addrs[rest[0]], c.id, gone, c.addrs[gone]); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("adding the removed id again: %v, want InvalidArgument", err)
	}
}

// A member added right after a group's leader died, before the others
// noticed: the change waits for the next leader rather than fail on the
// dead one's address.
func TestGroupsAddMemberRightAfterTheLeaderDied(t *testing.T) {
	const groups = 2
	c := newGroupsCluster(t, 3, groups)
	c.leader(0)
	dead := c.leader(1)
	c.join(4, groups)
	c.stop(dead)
	delete(c.members, dead.id)
	entry := uint64(1)
	if entry == dead.id {
		entry = 2
	}
	if err := DialAddMember(testCtx(t), c.addrs[entry], c.id, 4, c.addrs[4]); err != nil {
		t.Fatalf("adding member 4 through member %d right after member %d (group 1's leader) died: %v", entry, dead.id, err)
	}
	for g := range groups {
		if v := c.leader(g).nodes[g].Members().Voters; !slices.Contains(v, 4) {
			t.Fatalf("group %d's voters after adding 4: %v", g, v)
		}
	}
}

// A member whose removal did not finish (removed from a data group, not
// from group 0) refuses to start, and says how to finish the removal.
func TestGroupsPartlyRemovedMemberSaysHowToFinish(t *testing.T) {
	const groups = 2
	c := newGroupsCluster(t, 3, groups)
	c.leader(0)
	l := c.leader(1)
	var gone *groupsMember
	for _, m := range c.members {
		if m != l {
			gone = m
			break
		}
	}
	ctx := testCtx(t)
	if err := l.nodes[1].RemoveMember(ctx, gone.id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gone.nodes[1].Done():
	case <-ctx.Done():
		t.Fatalf("member %d's group 1 did not stop once removed", gone.id)
	}
	c.stop(gone)
	delete(c.members, gone.id)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, err = c.tryStart(gone.id, gone.dir, lis, false, groups)
	if !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "remove-node") || !strings.Contains(err.Error(), "data group 1") {
		t.Fatalf("starting a member removed from group 1 only: %v, want ErrRemoved naming group 1 and remove-node", err)
	}
}

// A raft message for a group a member does not host ends the stream with
// an error naming the likely cause; a call for such a group is NotFound.
func TestRaftMessageOfUnhostedGroup(t *testing.T) {
	c := newGroupsCluster(t, 2, 1)
	c.leader(0)
	conn, err := grpc.NewClient(c.addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := testCtx(t)
	md := metadata.Pairs(mdToken, testToken, mdClusterID, c.id, mdFromNode, "2")
	s, err := clusterv1.NewPeerServiceClient(conn).Raft(metadata.NewOutgoingContext(ctx, md))
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&clusterv1.RaftRequest{Messages: []*clusterv1.RaftMessage{{Group: 1, Message: b}}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	_, err = s.CloseAndRecv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--data-groups") {
		t.Fatalf("a message for group 1 on a member hosting one group: %v, want InvalidArgument naming --data-groups", err)
	}
	md = metadata.Pairs(mdToken, testToken, mdClusterID, c.id)
	_, err = clusterv1.NewPeerServiceClient(conn).Status(metadata.NewOutgoingContext(ctx, md), &clusterv1.StatusRequest{Group: 1})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("status of group 1 on a member hosting one group: %v, want NotFound", err)
	}
}

// A member hosting some groups only: it starts no raft member of the
// others; it learns their leaders from a
// member hosting them (Info's leaders, with the term), asks their status
// there, and proposes to their leader by id. Membership changes are
// refused in such a cluster, through the commands and at the peer port.
func TestGroupsOnSomeMembers(t *testing.T) {
	c := newGroupsClusterOn(t, 3, 2, 10, [][]uint64{{1, 2, 3}, {1, 2}})
	if n := c.members[3].nodes[1]; n != nil {
		t.Fatalf("member 3 runs a raft member of group 1, which is on members 1 and 2 only")
	}
	ctx := testCtx(t)
	var lead GroupLeader
	deadline := time.Now().Add(20 * time.Second)
	for lead.Leader == 0 {
		if time.Now().After(deadline) {
			t.Fatal("member 3 learns no leader of group 1")
		}
		ls, err := c.members[3].nodes[0].GroupLeaders(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 2 {
			t.Fatalf("member 1 answers the leaders of %+v, it hosts groups 0 and 1", ls)
		}
		if ls[1].Group == 1 && ls[1].Term > 0 {
			lead = ls[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lead.Leader != 1 && lead.Leader != 2 {
		t.Fatalf("group 1 led by member %d, which does not host it", lead.Leader)
	}
	if !slices.Equal(lead.Voters, []uint64{1, 2}) {
		t.Fatalf("member 1 answers group 1's voters %v, want [1 2]", lead.Voters)
	}
	if since := c.members[1].nodes[1].LeaderlessSince(); !since.IsZero() && c.members[1].nodes[1].Leader() != 0 {
		t.Fatalf("member 1 knows group 1's leader and says it has known none since %v", since)
	}
	if ls, err := c.members[1].nodes[0].GroupLeaders(ctx, 3); err != nil || len(ls) != 1 || ls[0].Group != 0 {
		t.Fatalf("member 3, hosting group 0 only, answers %+v, %v", ls, err)
	}
	st, err := c.members[3].nodes[0].MemberGroupStatus(ctx, lead.Leader, 1)
	if err != nil || st.Group != 1 || st.Leader != lead.Leader || len(st.Voters) != 2 {
		t.Fatalf("status of group 1 at its leader, asked by member 3: %+v, %v", st, err)
	}
	change, err := raftstore.EncodeChange(raftstore.MetaOp{Kind: raftstore.MetaDeleteGroup, Name: "no-such-group"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.members[3].nodes[0].ProposeAtMember(ctx, lead.Leader, 1, change); err != nil && !errors.Is(err, raftstore.ErrRefused) {
		t.Fatalf("a change proposed by member 3 at group 1's leader: %v", err)
	}
	pctx := WithToken(ctx, testToken)
	if err := DialMoveReplica(pctx, c.addrs[1], c.id, 0, 1, 2); err == nil || !strings.Contains(err.Error(), "group 0 is on every member") {
		t.Fatalf("a move of group 0's replica: %v", err)
	}
	if err := DialReplaceMember(pctx, c.addrs[1], c.id, 1, 9, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "another member than the one replaced") {
		t.Fatalf("a replacement entering through the member replaced: %v", err)
	}
}
