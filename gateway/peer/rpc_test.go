package peer

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// testCtx is a test's context for peer calls: 20 s, carrying testToken
// (the peer token of a test group that sets none of its own).
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return WithToken(ctx, testToken)
}

// follower is a running member other than l.
func (c *testCluster) follower(l *member) *member {
	for _, m := range c.members {
		if m != l && m.node != nil {
			return m
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// waitClosed waits for ch to close.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Every member learns every other's client addresses over Info; an
// answer is kept until ForgetMemberInfo, then asked for again.
func TestMemberInfo(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)
	for _, m := range c.members {
		for id := range c.members {
			got, err := m.node.MemberInfo(ctx, id)
			if err != nil {
				t.Fatalf("member %d asking for %d: %v", m.id, id, err)
			}
			if got != testInfo(id) {
				t.Fatalf("member %d's info of %d: %+v, want %+v", m.id, id, got, testInfo(id))
			}
		}
	}
	if _, err := l.node.MemberInfo(ctx, 99); err == nil {
		t.Fatal("info of a member not in the group answered")
	}
	f := c.follower(l)
	c.kill(f.id)
	if got, err := l.node.MemberInfo(ctx, f.id); err != nil || got != testInfo(f.id) {
		t.Fatalf("kept info of a stopped member: %+v, %v", got, err)
	}
	l.node.ForgetMemberInfo(f.id)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if got, err := l.node.MemberInfo(short, f.id); err == nil {
		t.Fatalf("info of a stopped member after ForgetMemberInfo: %+v", got)
	}
	c.restart(f.id)
	c.waitFor("the restarted member to answer", func() bool {
		got, err := l.node.MemberInfo(ctx, f.id)
		return err == nil && got == testInfo(f.id)
	})
}

// Info's answer carries the member's client addresses, RemotingGreeting
// and format; an answer without them (a member that sets none) reads as
// false and 0.
func TestMemberInfoOnTheWire(t *testing.T) {
	in := MemberInfo{GRPC: "h:8081", HTTP: "h:8080", Remoting: "h:9876", RemotingGreeting: true, Format: 2}
	b, err := proto.Marshal(in.toProto())
	if err != nil {
		t.Fatal(err)
	}
	var p clusterv1.MemberInfo
	if err := proto.Unmarshal(b, &p); err != nil || memberInfoOf(&p) != in {
		t.Fatalf("round trip: %+v, %v", memberInfoOf(&p), err)
	}
	bare, err := proto.Marshal(MemberInfo{Remoting: "h:9876"}.toProto())
	if err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if err := proto.Unmarshal(bare, &p); err != nil || memberInfoOf(&p).RemotingGreeting || memberInfoOf(&p).Format != 0 {
		t.Fatalf("an answer without the greeting: %+v, %v", memberInfoOf(&p), err)
	}
}

// The unary methods refuse a caller naming another cluster, or none.
func TestRPCOtherClusterRefused(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)
	conn, err := grpc.NewClient(c.addrs[l.id], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, md := range []metadata.MD{metadata.Pairs(mdToken, testToken, mdClusterID, "another-cluster"), metadata.Pairs(mdToken, testToken)} {
		octx := metadata.NewOutgoingContext(ctx, md)
		_, err := clusterv1.NewPeerServiceClient(conn).Info(octx, &clusterv1.InfoRequest{})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Info with metadata %v: %v, want PermissionDenied", md, err)
		}
	}
	if _, err := callInfo(ctx, conn, c.id); err != nil {
		t.Fatalf("Info of this cluster: %v", err)
	}
	if _, err := DialStatus(ctx, c.addrs[l.id], "another-cluster"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Status of another cluster: %v, want PermissionDenied", err)
	}
	f := c.follower(l)
	if err := DialTransfer(ctx, c.addrs[l.id], "another-cluster", f.id); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("TransferLeadership of another cluster: %v, want PermissionDenied", err)
	}
	if c.leader() != l {
		t.Fatal("a refused transfer moved the leadership")
	}
}

// Changes fires when the leader is lost and another elected, and when
// the leadership is transferred.
func TestChanges(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)

	// Transfer: the old leader stops leading, the new one starts.
	to := c.follower(l)
	lch, toch := l.node.Changes(), to.node.Changes()
	if isClosed(lch) || isClosed(toch) {
		t.Fatal("Changes closed with nothing changed")
	}
	if err := l.node.TransferLeadership(ctx, to.id); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, lch, "the old leader's Changes at the transfer")
	waitClosed(t, toch, "the new leader's Changes at the transfer")
	waitLeading(t, to.node, true)
	waitLeading(t, l.node, false)

	// Election: the leader is killed; the others see it go and a new
	// one elected.
	var chs []<-chan struct{}
	var rest []*member
	for _, m := range c.members {
		if m != to {
			chs = append(chs, m.node.Changes())
			rest = append(rest, m)
		}
	}
	c.kill(to.id)
	for i, ch := range chs {
		waitClosed(t, ch, "a member's Changes when the leader stopped")
		// Follow the changes until the member knows a new leader.
		n := rest[i].node
		for {
			ch := n.Changes()
			if lead := n.Leader(); lead != 0 && lead != to.id {
				break
			}
			waitClosed(t, ch, "a member's Changes until a new leader is elected")
		}
	}
	nl := c.leader()
	if nl.id == to.id {
		t.Fatal("the stopped member still leads")
	}
}

// waitLeading follows n's Changes until IsLeader is want.
func waitLeading(t *testing.T, n *Node, want bool) {
	t.Helper()
	for {
		ch := n.Changes()
		if n.IsLeader() == want {
			return
		}
		waitClosed(t, ch, "a change of leading state")
	}
}

// Handoff hands the leadership to a caught-up member; appends then
// succeed on it. On a member that does not lead it does nothing.
func TestHandoff(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)
	acked := appendN(t, l, 0, 50)
	f := c.follower(l)
	if err := f.node.Handoff(ctx); err != nil {
		t.Fatalf("handoff on a follower: %v", err)
	}
	if !l.node.IsLeader() {
		t.Fatal("a follower's handoff moved the leadership")
	}
	if err := l.node.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if l.node.IsLeader() {
		t.Fatal("still leading after Handoff")
	}
	nl := c.leader()
	if nl == l {
		t.Fatal("the member that handed off leads again")
	}
	acked = append(acked, appendN(t, nl, 50, 80)...)
	c.converged(nl.rep.Applied())
	have := contents(t, nl)
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("new leader lacks %s", id)
		}
	}
	if len(have) != len(acked) {
		t.Fatalf("new leader holds %d messages, %d acknowledged", len(have), len(acked))
	}
}

// With every other member stopped, Handoff cannot hand over and says
// so within about an election timeout (or the leader steps down for
// want of a quorum first), rather than waiting for its context.
func TestHandoffNoOneReachable(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	for _, m := range c.members {
		if m != l {
			c.kill(m.id)
		}
	}
	err := l.node.Handoff(testCtx(t))
	switch {
	case err == nil && l.node.IsLeader():
		t.Fatal("Handoff answered OK while still leading")
	case err != nil && !strings.Contains(err.Error(), "no other voter is reachable"):
		t.Fatalf("Handoff with no one to hand to: %v", err)
	}
}

// Status and TransferLeadership over the peer port, as the cluster
// command uses them, including a transfer sent to a member that does
// not lead.
func TestDialStatusAndTransfer(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)
	appendN(t, l, 0, 10)
	for _, m := range c.members {
		st, err := DialStatus(ctx, c.addrs[m.id], c.id)
		if err != nil {
			t.Fatalf("status of %d: %v", m.id, err)
		}
		if st.ID != m.id || st.Leader != l.id || st.Term == 0 || !maps.Equal(st.Peers, c.addrs) {
			t.Fatalf("status of %d: %+v", m.id, st)
		}
		// The raft loop's work comes over the wire too: every member has
		// written and applied the entries.
		if w := st.Work; w.Rounds == 0 || w.LogSyncs == 0 || w.EntriesWritten == 0 || w.EntriesApplied == 0 || w.MessagesReceived == 0 || w.MessagesSent == 0 ||
			m == l && w.Proposals == 0 {
			t.Fatalf("status of %d: work %+v", m.id, w)
		}
		if m == l {
			if st.State != "StateLeader" || len(st.Progress) != 3 || st.Progress[l.id].Match < st.Commit || st.Commit == 0 {
				t.Fatalf("leader's status: %+v", st)
			}
		} else if st.State != "StateFollower" || st.Progress != nil {
			t.Fatalf("follower's status: %+v", st)
		}
	}

	// To the leader.
	to := c.follower(l)
	if err := DialTransfer(ctx, c.addrs[l.id], c.id, to.id); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(); got != to {
		t.Fatalf("member %d leads after the transfer to %d", got.id, to.id)
	}
	// To a follower (l, which led before): it names the leader, and the
	// request goes there.
	if err := DialTransfer(ctx, c.addrs[l.id], c.id, l.id); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(); got != l {
		t.Fatalf("member %d leads after the transfer to %d", got.id, l.id)
	}
	// A follower answers FailedPrecondition naming the leader.
	err := invoke(ctx, c.addrs[to.id], c.id, func(pc clusterv1.PeerServiceClient, ctx context.Context) error {
		_, err := pc.TransferLeadership(ctx, &clusterv1.TransferLeadershipRequest{To: to.id})
		return err
	}, "transfer")
	if status.Code(err) != codes.FailedPrecondition || !containsLeader(err, l.id) {
		t.Fatalf("transfer sent to a follower: %v, want FailedPrecondition naming %d", err, l.id)
	}
	if err := DialTransfer(ctx, c.addrs[l.id], c.id, 99); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("transfer to no member: %v, want InvalidArgument", err)
	}
}

func containsLeader(err error, id uint64) bool {
	return strings.Contains(err.Error(), fmt.Sprintf("the leader is %d", id))
}

// Handoff while appends keep coming: the leadership moves, every append
// answered OK is on the new leader, and appends succeed there.
func TestHandoffUnderLoad(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	ctx := testCtx(t)
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				m := testMsg(g*100_000 + i)
				if _, err := l.rep.Append(ctx, m); err != nil {
					return // the leadership moved
				}
				mu.Lock()
				acked = append(acked, m.UniqKey())
				mu.Unlock()
			}
		})
	}
	c.waitFor("appends under way", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 40
	})
	if err := l.node.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	nl := c.leader()
	if nl == l {
		t.Fatal("the member that handed off leads again")
	}
	acked = append(acked, appendN(t, nl, 900_000, 900_010)...)
	c.converged(nl.rep.Applied())
	have := contents(t, nl)
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("message %s answered OK is missing on the new leader", id)
		}
	}
}

// With a peer token, the members talk to each other and a call without
// the token, or with another, is refused.
func TestPeerToken(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{persist: 8, timeout: 3 * time.Second, token: "s3cret"})
	l := c.leader()
	appendN(t, l, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := DialStatus(ctx, c.addrs[l.id], c.id); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("status without the token: %v", err)
	}
	if _, err := DialStatus(WithToken(ctx, "other"), c.addrs[l.id], c.id); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("status with another token: %v", err)
	}
	st, err := DialStatus(WithToken(ctx, "s3cret"), c.addrs[l.id], c.id)
	if err != nil || st.Leader != l.id {
		t.Fatalf("status with the token: %+v, %v", st, err)
	}
}

// MemberStatus asks any member's own status through the member's peer
// transport (with its token); Status says when each other member was
// last heard from; StartTransfer hands the leadership over without
// waiting, and only on the leader.
func TestMemberStatusContactAndStartTransfer(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{persist: 8, timeout: 3 * time.Second, token: "s3cret"})
	l := c.leader()
	appendN(t, l, 0, 10)
	ctx := testCtx(t)
	before := time.Now()
	for _, m := range c.members {
		st, err := l.node.MemberStatus(ctx, m.id)
		if err != nil {
			t.Fatalf("status of %d asked by the leader: %v", m.id, err)
		}
		if st.ID != m.id || st.Leader != l.id || st.Applied == 0 || st.Commit < st.Applied {
			t.Fatalf("status of %d: %+v", m.id, st)
		}
	}
	if _, err := l.node.MemberStatus(ctx, 99); err == nil {
		t.Fatal("status of no member answered")
	}
	// The leader hears from both followers at every heartbeat.
	f := c.follower(l)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := l.node.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh := 0
		for _, m := range c.members {
			if m != l && st.LastContact[m.id].After(before) {
				fresh++
			}
		}
		if _, self := st.LastContact[l.id]; self {
			t.Fatalf("the leader records contact with itself: %+v", st.LastContact)
		}
		if fresh == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no contact with both followers recorded: %+v", st.LastContact)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.node.StartTransfer(ctx, f.id); err == nil {
		t.Fatal("a follower started a transfer")
	}
	if err := l.node.StartTransfer(ctx, 99); err == nil {
		t.Fatal("a transfer to no member started")
	}
	if err := l.node.StartTransfer(ctx, f.id); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the member transferred to to lead", func() bool { return f.node.IsLeader() && l.node.Leader() == f.id })
}
