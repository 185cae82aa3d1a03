package peer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// Status is a member's view of the group (the Status method answers it
// as JSON).
type Status struct {
	ID uint64 `json:"id"`
	// Group is the raft group (0: a member's first).
	Group   uint64 `json:"group"`
	Leader  uint64 `json:"leader"`
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"` // as raft counts it (handed to the Applier)
	// FirstIndex is the oldest entry this member's raft log still holds
	// (older ones are compacted away): a member whose log ends before it
	// catches up from a copy of a store when this member leads.
	FirstIndex     uint64 `json:"first_index"`
	State          string `json:"state"`           // StateLeader, StateFollower, ...
	LeadTransferee uint64 `json:"lead_transferee"` // the member a transfer under way hands to
	// Peers is every member's peer address, as this member dials it.
	Peers map[uint64]string `json:"peers"`
	// Voters and Learners are the group's configuration as this member
	// applied it (a learner receives the log but does not vote).
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners,omitempty"`
	// Progress of each member's log, known on the leader only.
	Progress map[uint64]Progress `json:"progress,omitempty"`
	// LastContact is when this member last received a message from each
	// other member (absent: none since it started). A leader hears from
	// every follower at each heartbeat; a follower mostly from the
	// leader.
	LastContact map[uint64]time.Time `json:"last_contact,omitempty"`
	// Work is what the raft loop did since the member started.
	Work Work `json:"work"`
}

// Work counts what a member's raft loop did since it started: divided by
// the messages clients sent meanwhile, it is what replication costs per
// message (one fsync per round of the loop that wrote entries, one
// message per peer per round...).
type Work struct {
	// Rounds is the Ready rounds handled; LogWrites the raft log writes
	// among them, LogSyncs those fsynced.
	Rounds    uint64 `json:"rounds"`
	LogWrites uint64 `json:"log_writes"`
	LogSyncs  uint64 `json:"log_syncs"`
	// EntriesWritten is the entries written to the raft log,
	// EntriesApplied the committed entries handed to the state machine.
	EntriesWritten uint64 `json:"entries_written"`
	EntriesApplied uint64 `json:"entries_applied"`
	// Proposals is the proposals raft took (entries proposed by this
	// member as leader).
	Proposals uint64 `json:"proposals"`
	// MessagesSent and MessagesReceived are the raft messages handed to
	// the transport and taken from it.
	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
	// CommitsHeld is the leader's appends carrying only a newer commit
	// index that it held back, CommitsReplaced those never sent because a
	// later append to the same member carried the index.
	CommitsHeld     uint64 `json:"commits_held"`
	CommitsReplaced uint64 `json:"commits_replaced"`
}

// Progress is the leader's view of one member's log.
type Progress struct {
	Match        uint64 `json:"match"`
	Next         uint64 `json:"next"`
	State        string `json:"state"` // StateProbe, StateReplicate, StateSnapshot
	RecentActive bool   `json:"recent_active"`
}

func (st Status) toProto() *clusterv1.StatusResponse {
	p := &clusterv1.StatusResponse{Id: st.ID, Leader: st.Leader, Term: st.Term, Commit: st.Commit, Applied: st.Applied, FirstIndex: st.FirstIndex, State: st.State,
		LeadTransferee: st.LeadTransferee, Peers: st.Peers, Voters: st.Voters, Learners: st.Learners, Group: st.Group,
		Work: &clusterv1.RaftWork{Rounds: st.Work.Rounds, LogWrites: st.Work.LogWrites, LogSyncs: st.Work.LogSyncs,
			EntriesWritten: st.Work.EntriesWritten, EntriesApplied: st.Work.EntriesApplied, Proposals: st.Work.Proposals,
			MessagesSent: st.Work.MessagesSent, MessagesReceived: st.Work.MessagesReceived, CommitsHeld: st.Work.CommitsHeld, CommitsReplaced: st.Work.CommitsReplaced}}
	if len(st.LastContact) > 0 {
		p.LastContactUnixMs = make(map[uint64]int64, len(st.LastContact))
		for id, t := range st.LastContact {
			p.LastContactUnixMs[id] = t.UnixMilli()
		}
	}
	if st.Progress != nil {
		p.Progress = map[uint64]*clusterv1.Progress{}
		for id, pr := range st.Progress {
			p.Progress[id] = &clusterv1.Progress{Match: pr.Match, Next: pr.Next, State: pr.State, RecentActive: pr.RecentActive}
		}
	}
	return p
}

// statusOf is a Status answered by a member.
func statusOf(p *clusterv1.StatusResponse) Status {
	st := Status{ID: p.GetId(), Group: p.GetGroup(), Leader: p.GetLeader(), Term: p.GetTerm(), Commit: p.GetCommit(), Applied: p.GetApplied(), FirstIndex: p.GetFirstIndex(), State: p.GetState(),
		LeadTransferee: p.GetLeadTransferee(), Peers: p.GetPeers(), Voters: p.GetVoters(), Learners: p.GetLearners()}
	if w := p.GetWork(); w != nil {
		st.Work = Work{Rounds: w.GetRounds(), LogWrites: w.GetLogWrites(), LogSyncs: w.GetLogSyncs(), EntriesWritten: w.GetEntriesWritten(),
			EntriesApplied: w.GetEntriesApplied(), Proposals: w.GetProposals(), MessagesSent: w.GetMessagesSent(), MessagesReceived: w.GetMessagesReceived(),
			CommitsHeld: w.GetCommitsHeld(), CommitsReplaced: w.GetCommitsReplaced()}
	}
	if st.Peers == nil {
		st.Peers = map[uint64]string{}
	}
	if len(p.GetLastContactUnixMs()) > 0 {
		st.LastContact = make(map[uint64]time.Time, len(p.GetLastContactUnixMs()))
		for id, ms := range p.GetLastContactUnixMs() {
			st.LastContact[id] = time.UnixMilli(ms)
		}
	}
	if len(p.GetProgress()) > 0 {
		st.Progress = map[uint64]Progress{}
		for id, pr := range p.GetProgress() {
			st.Progress[id] = Progress{Match: pr.GetMatch(), Next: pr.GetNext(), State: pr.GetState(), RecentActive: pr.GetRecentActive()}
		}
	}
	return st
}

// do runs f on the raft loop and waits for it.
func (n *Node) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case n.calls <- func() { f(); close(done) }:
	case <-n.done:
		return n.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-n.done:
		return n.stoppedErr()
	}
}

// Status reports the member's raft state.
func (n *Node) Status(ctx context.Context) (Status, error) {
	var st Status
	err := n.do(ctx, func() {
		s := n.rn.Status()
		st = Status{ID: s.ID, Group: n.group, Leader: s.Lead, Term: s.HardState.GetTerm(), Commit: s.HardState.GetCommit(),
			Applied: s.Applied, State: s.RaftState.String(), LeadTransferee: s.LeadTransferee, Peers: map[uint64]string{}, Work: n.work}
		st.FirstIndex, _ = n.ms.FirstIndex() // never fails on the memory storage
		m := n.Members()
		st.Voters, st.Learners = m.Voters, m.Learners
		for _, id := range append(slices.Clone(m.Voters), m.Learners...) {
			st.Peers[id] = n.book.addr(id)
		}
		for id, at := range n.contact {
			if st.LastContact == nil {
				st.LastContact = map[uint64]time.Time{}
			}
			st.LastContact[id] = time.Unix(0, at)
		}
		if s.RaftState == raft.StateLeader {
			st.Progress = map[uint64]Progress{}
			for id, pr := range s.Progress {
				st.Progress[id] = Progress{Match: pr.Match, Next: pr.Next, State: pr.State.String(), RecentActive: pr.RecentActive}
			}
		}
	})
	return st, err
}

// MemberStatus is member id's own Status: this node's, or another
// member's asked over the peer transport (its Status method).
func (n *Node) MemberStatus(ctx context.Context, id uint64) (Status, error) {
	if id == n.cfg.NodeID {
		return n.Status(ctx)
	}
	return n.MemberGroupStatus(ctx, id, n.group)
}

// MemberGroupStatus is member id's Status of group g (which this member
// need not host).
func (n *Node) MemberGroupStatus(ctx context.Context, id, g uint64) (Status, error) {
	conn := n.tr.conn(id)
	if conn == nil {
		return Status{}, fmt.Errorf("peer: no member %d", id)
	}
	resp, err := clusterv1.NewPeerServiceClient(conn).Status(outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID), &clusterv1.StatusRequest{Group: g})
	if err != nil {
		return Status{}, fmt.Errorf("peer: status of member %d at %s: %w", id, n.book.addr(id), err)
	}
	st := statusOf(resp)
	if st.ID != id {
		return st, fmt.Errorf("peer: member %d's address %s answers as member %d", id, n.book.addr(id), st.ID)
	}
	return st, nil
}

// StartTransfer asks raft to hand the leadership to member to and
// returns at once, without waiting for to to lead (TransferLeadership
// waits): for callers whose connection goes when this member stops
// leading. Only the leader can transfer; another member gets a
// *raftstore.NotLeaderError.
func (n *Node) StartTransfer(ctx context.Context, to uint64) error {
	if !slices.Contains(n.Members().Voters, to) {
		return badRequest("peer: member %d is not a voter of the group", to)
	}
	var err error
	if derr := n.do(ctx, func() {
		if n.rn.BasicStatus().RaftState != raft.StateLeader {
			err = n.notLeader()
			return
		}
		n.rn.TransferLeader(to)
	}); derr != nil {
		return derr
	}
	return err
}

// TransferLeadership hands the leadership to member to and waits until
// to leads (as this member sees it), at most until ctx ends. Only the
// leader can transfer; another member gets a *raftstore.NotLeaderError.
// While the transfer runs the leader drops proposals: appends fail with
// raftstore.ErrLeadershipLost, nothing of them proposed.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	if err := n.StartTransfer(ctx, to); err != nil || to == n.cfg.NodeID {
		return err
	}
	t := time.NewTicker(n.cfg.TickInterval / 2)
	defer t.Stop()
	for n.lead.Load() != to {
		select {
		case <-t.C:
		case <-n.done:
			return n.stoppedErr()
		case <-ctx.Done():
			return fmt.Errorf("peer: leadership not transferred to %d: %w", to, ctx.Err())
		}
		// Raft abandons a transfer that member to has not completed
		// within an election timeout (it was behind, or did not hear the
		// request); while this member still leads, ask again.
		var other uint64
		if derr := n.do(ctx, func() {
			bs := n.rn.BasicStatus()
			switch {
			case bs.RaftState == raft.StateLeader && bs.LeadTransferee == 0:
				n.logger.Info("peer: leadership transfer abandoned; asking again", "to", to)
				n.transferAsks.Add(1)
				n.rn.TransferLeader(to)
			case bs.RaftState != raft.StateLeader && bs.Lead != 0 && bs.Lead != to:
				other = bs.Lead
			}
		}); derr != nil {
			return derr
		}
		if other != 0 {
			return fmt.Errorf("peer: leadership went to member %d, not %d", other, to)
		}
	}
	return nil
}

// Handoff hands the leadership to another voter before this node stops
// (a graceful shutdown) and returns once this node no longer leads; it
// does nothing when this node does not lead. The member chosen is a
// reachable voter (recently heard from, its log being replicated) whose
// log matches the leader's to its last entry, the most caught-up one if
// none does within an election timeout (raft brings it up to date before
// handing over; proposals fail with raftstore.ErrLeadershipLost
// meanwhile). A transfer raft gives up on (the member did not take over
// within an election timeout) is tried again, with whichever member fits
// then. Handoff fails when ctx ends first, or when no other voter has
// been reachable for an election timeout.
func (n *Node) Handoff(ctx context.Context) error {
	start := time.Now()
	patience := time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		ch := n.Changes()
		if !n.isLeader.Load() {
			return nil
		}
		var leading, transferring, reachable bool
		err := n.do(ctx, func() {
			bs := n.rn.BasicStatus()
			if leading = bs.RaftState == raft.StateLeader; !leading {
				return
			}
			if transferring = bs.LeadTransferee != 0; transferring {
				return
			}
			var best, bestMatch uint64
			n.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
				if id == n.cfg.NodeID || typ != raft.ProgressTypePeer || !pr.RecentActive || pr.State != tracker.StateReplicate {
					return
				}
				if best == 0 || pr.Match > bestMatch || (pr.Match == bestMatch && id < best) {
					best, bestMatch = id, pr.Match
				}
			})
			if reachable = best != 0; !reachable {
				return
			}
			last, _ := n.ms.LastIndex()
			if bestMatch >= last || time.Since(start) >= patience {
				n.logger.Info("peer: handing the leadership over", "to", best, "match", bestMatch, "last", last)
				n.rn.TransferLeader(best)
			}
		})
		if err != nil {
			return fmt.Errorf("peer: handoff: %w", err)
		}
		if !leading {
			return nil
		}
		if !transferring && !reachable && time.Since(start) >= patience {
			return errors.New("peer: handoff: no other voter is reachable")
		}
		select {
		case <-ch:
		case <-t.C:
		case <-n.done:
			return n.stoppedErr()
		case <-ctx.Done():
			return fmt.Errorf("peer: handoff: this node still leads: %w", ctx.Err())
		}
	}
}

// ParsePeers parses "1=host:7001,2=host:7002,..." into member ids and
// peer addresses.
func ParsePeers(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idS, addr, ok := strings.Cut(part, "=")
		id, err := strconv.ParseUint(strings.TrimSpace(idS), 10, 64)
		if !ok || err != nil || id == 0 || strings.TrimSpace(addr) == "" {
			return nil, fmt.Errorf("peer: %q is not ID=HOST:PORT with an id above 0", part)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("peer: member %d named twice", id)
		}
		addr = strings.TrimSpace(addr)
		for other, a := range out {
			if a == addr {
				return nil, fmt.Errorf("peer: members %d and %d share the address %s", other, id, a)
			}
		}
		out[id] = addr
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("peer: no members")
	}
	return out, nil
}

var _ raftstore.Raft = (*Node)(nil)

// Refusals counts the peer calls this member refused since it started,
// by reason (the Refused* constants; auth.go): calls that did not
// authenticate, named another cluster, came from no member, or were
// over their size limit.
func (n *Node) Refusals() map[string]uint64 {
	r := n.tr.refused.snapshot()
	r[RefusedCertificate] += n.cfg.TLS.callersRefused()
	return r
}
