package peer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/mqgate/mqgate/broker/cluster"
)

// Status is a member's view of the group.
type Status struct {
	ID, Leader     uint64
	Term           uint64
	Commit         uint64
	Applied        uint64 // as raft counts it (handed to the Applier)
	State          string // StateLeader, StateFollower, ...
	LeadTransferee uint64
	// Progress of each member's log, known on the leader only.
	Progress map[uint64]Progress
}

// Progress is the leader's view of one member's log.
type Progress struct {
	Match, Next  uint64
	State        string // StateProbe, StateReplicate, StateSnapshot
	RecentActive bool
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
		st = Status{ID: s.ID, Leader: s.Lead, Term: s.HardState.GetTerm(), Commit: s.HardState.GetCommit(),
			Applied: s.Applied, State: s.RaftState.String(), LeadTransferee: s.LeadTransferee}
		if s.RaftState == raft.StateLeader {
			st.Progress = map[uint64]Progress{}
			for id, pr := range s.Progress {
				st.Progress[id] = Progress{Match: pr.Match, Next: pr.Next, State: pr.State.String(), RecentActive: pr.RecentActive}
			}
		}
	})
	return st, err
}

// TransferLeadership hands the leadership to member to and waits until
// to leads (as this member sees it), at most until ctx ends. Only the
// leader can transfer; another member gets a *cluster.NotLeaderError.
// While the transfer runs the leader drops proposals: appends fail with
// cluster.ErrLeadershipLost, nothing of them proposed.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	if _, ok := n.cfg.Peers[to]; !ok {
		return fmt.Errorf("peer: no member %d", to)
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
	if err != nil || to == n.cfg.NodeID {
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
	}
	return nil
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

var _ cluster.Raft = (*Node)(nil)
