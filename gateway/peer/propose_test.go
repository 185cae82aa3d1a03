package peer

import (
	"fmt"
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// leaderRawNode is a RawNode that leads a group of members 1, 2 and 3
// (it is 1; the others' votes are stepped in by hand), its election's
// Ready handled and its followers caught up.
func leaderRawNode(t *testing.T) (*raft.RawNode, *raft.MemoryStorage) {
	t.Helper()
	ms := raft.NewMemoryStorage()
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: raftLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Bootstrap([]raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}); err != nil {
		t.Fatal(err)
	}
	// Handle what raft has ready as the raft loop does, without sending;
	// answer every append as a follower that stored it would.
	settle := func() {
		for rn.HasReady() {
			rd := rn.Ready()
			if err := ms.Append(rd.Entries); err != nil {
				t.Fatal(err)
			}
			if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
				if err := ms.SetHardState(rd.HardState); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range rd.CommittedEntries {
				if e.GetType() == raftpb.EntryConfChange {
					var cc raftpb.ConfChange
					if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
						t.Fatal(err)
					}
					rn.ApplyConfChange(&cc)
				}
			}
			rn.Advance(rd)
			for _, m := range rd.Messages {
				switch m.GetType() {
				case raftpb.MsgVote:
					_ = rn.Step(&raftpb.Message{Type: raftpb.MsgVoteResp.Enum(), From: m.To, To: new(uint64(1)), Term: m.Term})
				case raftpb.MsgApp:
					last := m.GetIndex() + uint64(len(m.GetEntries()))
					_ = rn.Step(&raftpb.Message{Type: raftpb.MsgAppResp.Enum(), From: m.To, To: new(uint64(1)), Term: m.Term, Index: new(last)})
				}
			}
		}
	}
	settle()
	if err := rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	settle()
	if rn.BasicStatus().RaftState != raft.StateLeader {
		t.Fatalf("the test's node does not lead: %v", rn.BasicStatus().RaftState)
	}
	return rn, ms
}

// The proposals the raft loop takes in one turn go to each follower in
// one append: raft sends one per proposal message, so they are stepped
// in as one message of many entries.
func TestProposalsOfOneTurnShareAnAppend(t *testing.T) {
	rn, _ := leaderRawNode(t)
	n := &Node{rn: rn, cfg: Config{NodeID: 1}}
	const k = 5
	var props []proposal
	for i := range k {
		data := fmt.Appendf(nil, "entry %d", i)
		props = append(props, proposal{build: func() []byte { return data }, errc: make(chan error, 1)})
	}
	errcs := make([]chan error, k)
	for i := range props {
		errcs[i] = props[i].errc
	}
	if rest := n.propose(props); len(rest) != 0 {
		t.Fatalf("propose left %d proposals", len(rest))
	}
	for i, c := range errcs {
		if err := <-c; err != nil {
			t.Fatalf("proposal %d: %v", i, err)
		}
	}
	rd := rn.Ready()
	apps := map[uint64][]int{}
	for _, m := range rd.Messages {
		if m.GetType() == raftpb.MsgApp {
			apps[m.GetTo()] = append(apps[m.GetTo()], len(m.GetEntries()))
		}
	}
	for _, to := range []uint64{2, 3} {
		if got := apps[to]; len(got) != 1 || got[0] != k {
			t.Errorf("appends to member %d carry %v entries, want one append of %d", to, got, k)
		}
	}
	if len(rd.Entries) != k {
		t.Errorf("%d entries to write, want %d", len(rd.Entries), k)
	}
	if n.work.Proposals != k {
		t.Errorf("%d proposals counted, want %d", n.work.Proposals, k)
	}
}
