package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// Membership changes. A member joins as a learner (it receives the log,
// or a copy of a store when the leader no longer keeps the entries it
// lacks, but does not vote), and is promoted to voter once its log has
// caught up with the leader's, so that adding a member never leaves the
// group waiting on a voter that cannot acknowledge yet. A member is
// removed in one change; the leader hands its leadership over before it
// is removed itself. Raft applies one change at a time; each call here
// proposes its change again until the configuration shows it (a
// proposal raft drops, while another change is pending, is proposed
// again).

// ErrRestartToHost: this member hosted the data group and was removed
// from it since it started; it hosts the group again only once
// restarted (the peer HostGroup call answers FAILED_PRECONDITION).
var ErrRestartToHost = errors.New("peer: this member was removed from the data group since it started: restart it before it hosts the group again")

// ErrRemoved: this member was removed from the group. Its raft loop
// stops, and it never rejoins under its id.
var ErrRemoved = errors.New("peer: this member was removed from the group")

// Membership is the group's configuration as this member applied it.
type Membership struct {
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners,omitempty"`
}

// Members is the group's configuration as this member applied it last.
func (n *Node) Members() Membership { return *n.members.Load() }

func (n *Node) setMembership(c tracker.Config) {
	m := &Membership{}
	for id := range c.Voters.IDs() {
		m.Voters = append(m.Voters, id)
	}
	for id := range c.Learners {
		m.Learners = append(m.Learners, id)
	}
	slices.Sort(m.Voters)
	slices.Sort(m.Learners)
	n.members.Store(m)
}

// includes reports whether member id is a voter or a learner.
func (m Membership) includes(id uint64) bool {
	return slices.Contains(m.Voters, id) || slices.Contains(m.Learners, id)
}

type role int

const (
	roleNone role = iota
	roleLearner
	roleVoter
)

// roleOf reads member id's role on the raft loop; only the leader
// answers (a *raftstore.NotLeaderError otherwise).
func (n *Node) roleOf(ctx context.Context, id uint64) (role, error) {
	var r role
	var err error
	if derr := n.do(ctx, func() {
		if n.rn.BasicStatus().RaftState != raft.StateLeader {
			err = n.notLeader()
			return
		}
		cfg := n.rn.Status().Config
		if _, ok := cfg.Voters.IDs()[id]; ok {
			r = roleVoter
		} else if _, ok := cfg.Learners[id]; ok {
			r = roleLearner
		}
	}); derr != nil {
		return r, derr
	}
	return r, err
}

// change proposes cc on the leader until member id has role want, or
// ctx ends; a proposal raft dropped (a leadership transfer under way) is
// made again after an election timeout.
func (n *Node) change(ctx context.Context, id uint64, want role, cc *raftpb.ConfChangeV2) error {
	retry := time.NewTicker(time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval)
	defer retry.Stop()
	poll := time.NewTicker(n.cfg.TickInterval / 2)
	defer poll.Stop()
	propose := true
	for {
		r, err := n.roleOf(ctx, id)
		if err != nil {
			return err
		}
		if r == want {
			return nil
		}
		if propose {
			var perr error
			if err := n.do(ctx, func() { perr = n.rn.ProposeConfChange(cc) }); err != nil {
				return err
			}
			// Raft drops proposals while it hands the leadership over (the
			// balance may be doing so): proposed again at the next retry,
			// unless this member no longer leads by then.
			if perr != nil && !errors.Is(perr, raft.ErrProposalDropped) {
				return fmt.Errorf("peer: propose a membership change: %w", perr)
			}
			propose = false
		}
		select {
		case <-poll.C:
		case <-retry.C:
			propose = true
		case <-n.done:
			return n.stoppedErr()
		case <-ctx.Done():
			return fmt.Errorf("peer: membership change of member %d not applied (another change may be under way): %w", id, ctx.Err())
		}
	}
}

// AddMember adds member id, reachable at peer address addr, to the
// group: as a learner first, promoted to voter once its log matches the
// leader's as of when it was added. It returns once id votes, at most
// until ctx ends (calling it again resumes where it stopped). Only the
// leader adds members (a *raftstore.NotLeaderError otherwise). The new
// member must be started with Config.Join.
func (n *Node) AddMember(ctx context.Context, id uint64, addr string) error {
	if id == 0 || addr == "" {
		return badRequest("peer: add member: id %d and address %q: both are required", id, addr)
	}
	if n.book.isRemoved(id) {
		return badRequest("peer: member %d was removed from the group, and ids are never reused: add the replacement under a new id", id)
	}
	r, err := n.roleOf(ctx, id)
	if err != nil {
		return err
	}
	if r != roleNone {
		if known := n.book.addr(id); known != "" && known != addr && n.cfg.Peers[id] == "" {
			return badRequest("peer: member %d is already in the group, at %s", id, known)
		}
	}
	if r == roleVoter {
		return nil
	}
	pctx, err := json.Marshal(changeContext{Peer: addr})
	if err != nil {
		return err
	}
	add := func(t raftpb.ConfChangeType) *raftpb.ConfChangeV2 {
		return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}}, Context: pctx}
	}
	if r == roleNone {
		if err := n.probeNew(ctx, id, addr); err != nil {
			return err
		}
		if err := n.change(ctx, id, roleLearner, add(raftpb.ConfChangeType_ConfChangeAddLearnerNode)); err != nil {
			return err
		}
		n.logger.Info("peer: added a learner", "member", id, "addr", addr)
	}
	if err := n.awaitCaughtUp(ctx, id); err != nil {
		return err
	}
	if err := n.change(ctx, id, roleVoter, add(raftpb.ConfChangeType_ConfChangeAddNode)); err != nil {
		return err
	}
	n.logger.Info("peer: promoted a learner to voter", "member", id)
	return nil
}

// probeNew asks the member at addr, before it is added, who it is: it
// must answer under this group's cluster id (and peer token) as member
// id, host as many groups as this member, and neither know a leader of
// this group nor hold a configuration of it (a member started with
// Config.Join that no one has added to it). A wrong address, or a member of another cluster, is refused
// before the group's configuration changes. A member that joins the
// groups after the first (already in the first group) may be restarting
// to install a copy of a store: while it does not answer, it is asked
// again, up to joinerRestart.
func (n *Node) probeNew(ctx context.Context, id uint64, addr string) error {
	wait := n.group != 0 && n.tr.member().Members().includes(id)
	deadline := time.Now().Add(joinerRestart)
	for {
		again, err := n.probeOnce(ctx, id, addr)
		if !again || !wait || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(probeRetry):
		case <-ctx.Done():
			return err
		}
	}
}

const (
	// probeTimeout bounds one of probeNew's calls.
	probeTimeout = 5 * time.Second
	// joinerRestart bounds how long probeNew waits for a joining member
	// that does not answer; probeRetry is how often it asks meanwhile.
	joinerRestart = time.Minute
	probeRetry    = 200 * time.Millisecond
)

// probeOnce is one probe of probeNew; again reports that the member did
// not answer.
func (n *Node) probeOnce(ctx context.Context, id uint64, addr string) (again bool, err error) {
	conn, err := dial(WithTLS(ctx, n.cfg.TLS), addr)
	if err != nil {
		return false, badRequest("peer: add member %d: %v", id, err)
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	pctx = WithToken(pctx, n.cfg.Token)
	a, err := callInfo(pctx, conn, n.cfg.ClusterID)
	switch {
	case status.Code(err) == codes.PermissionDenied:
		return false, badRequest("peer: add member %d: the member at %s belongs to another cluster: %v", id, addr, status.Convert(err).Message())
	case status.Code(err) == codes.Unauthenticated:
		return false, badRequest("peer: add member %d: the member at %s has another peer token", id, addr)
	case err != nil:
		return true, badRequest("peer: add member %d: no member answers at %s (start it with --join first): %v", id, addr, err)
	case a.GetId() != id:
		return false, badRequest("peer: add member %d: the member at %s is member %d", id, addr, a.GetId())
	case int(max(a.GetDataGroups(), 1)) != n.groups:
		return false, badRequest("peer: add member %d: the member at %s hosts %d data groups, the cluster %d: start it with --data-groups %d",
			id, addr, max(a.GetDataGroups(), 1), n.groups, n.groups)
	}
	st, err := clusterv1.NewPeerServiceClient(conn).Status(outgoing(pctx, n.cfg.ClusterID), &clusterv1.StatusRequest{Group: n.group})
	if err != nil {
		return true, badRequest("peer: add member %d: the member at %s does not answer for data group %d: %v", id, addr, n.group, err)
	}
	switch {
	case st.GetLeader() != 0:
		return false, badRequest("peer: add member %d: the member at %s already follows leader %d%s; start it on an empty data directory with --join",
			id, addr, st.GetLeader(), n.groupSuffix())
	case len(st.GetVoters()) > 0:
		// Started without --join: it bootstrapped a group of its own,
		// whose log would clash with this group's.
		return false, badRequest("peer: add member %d: the member at %s started a group of its own (voters %v)%s; start it on an empty data directory with --join",
			id, addr, st.GetVoters(), n.groupSuffix())
	}
	return false, nil
}

// groupSuffix names the node's group in a message, when the member hosts
// several.
func (n *Node) groupSuffix() string {
	if n.groups > 1 {
		return fmt.Sprintf(" in data group %d", n.group)
	}
	return ""
}

// awaitCaughtUp waits until the leader replicates to member id and its
// log reaches the leader's last index as of the call.
func (n *Node) awaitCaughtUp(ctx context.Context, id uint64) error {
	var target uint64
	if err := n.do(ctx, func() { target, _ = n.ms.LastIndex() }); err != nil {
		return err
	}
	t := time.NewTicker(n.cfg.TickInterval / 2)
	defer t.Stop()
	for {
		var match uint64
		var state string
		var err error
		if derr := n.do(ctx, func() {
			if n.rn.BasicStatus().RaftState != raft.StateLeader {
				err = n.notLeader()
				return
			}
			pr := n.rn.Status().Progress[id]
			if pr.Match >= target && pr.State == tracker.StateReplicate {
				match = pr.Match
			}
			state = pr.State.String()
		}); derr != nil {
			return derr
		}
		if err != nil {
			return err
		}
		if match > 0 {
			return nil
		}
		select {
		case <-t.C:
		case <-n.done:
			return n.stoppedErr()
		case <-ctx.Done():
			return fmt.Errorf("peer: member %d has not caught up to index %d (its log: %s): %w", id, target, state, ctx.Err())
		}
	}
}

// RemoveMember removes member id from the group, at most until ctx
// ends. Only the leader removes members (a *raftstore.NotLeaderError
// otherwise); asked to remove itself, it hands the leadership to another
// voter first and answers a *raftstore.NotLeaderError naming that one,
// where the caller asks again. Removing a member that is not in the
// group does nothing; the last voter cannot be removed.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	r, err := n.roleOf(ctx, id)
	if err != nil {
		return err
	}
	if r == roleNone {
		return nil
	}
	if r == roleVoter && len(n.Members().Voters) <= 1 {
		return badRequest("peer: member %d is the group's last voter", id)
	}
	if id == n.cfg.NodeID {
		if err := n.Handoff(ctx); err != nil {
			return err
		}
		return n.notLeader()
	}
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(id)}}}
	if err := n.change(ctx, id, roleNone, cc); err != nil {
		return err
	}
	n.logger.Info("peer: removed a member", "member", id)
	return nil
}

// removedByPeers is called when another member refused this one's
// messages because it was removed from the group: the raft loop stops.
func (n *Node) removedByPeers(by uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.do(ctx, func() {
			n.logger.Warn("peer: another member says this one was removed from the group", "by", by)
			// Recorded, so that the member refuses to start again.
			if err := n.bookSaved(n.book.markRemoved(n.cfg.NodeID), "this member's removal"); err != nil {
				n.halt = fmt.Errorf("%w (recording it failed: %w)", ErrRemoved, err)
				return
			}
			n.halt = ErrRemoved
		})
	}()
}

// removed reports whether this member was removed from the group: its
// raft loop stopped for that.
func (n *Node) removed() bool { return errors.Is(n.Err(), ErrRemoved) }

// Removed is removed, for the member hosting the node: a member removed
// from a data group (not from the cluster) no longer hosts it.
func (n *Node) Removed() bool { return n.removed() }

// isRemoved reports whether member id was removed from the group.
func (n *Node) isRemoved(id uint64) bool { return n.book.isRemoved(id) }
