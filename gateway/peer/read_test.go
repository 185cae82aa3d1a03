package peer

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/broker/raftstore"
)

// ReadIndex on the leader returns once it has applied what was committed
// before the call; a follower refuses, naming the leader; a leader that
// lost its majority steps down and refuses too, instead of answering
// from a store another leader may have moved past.
func TestReadIndex(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	l := c.leader()
	appendN(t, l, 0, 20)
	st, err := l.node.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.node.ReadIndex(testCtx(t)); err != nil {
		t.Fatalf("read index on the leader: %v", err)
	}
	if got := l.rep.Applied(); got < st.Commit {
		t.Fatalf("applied %d after the read, commit was %d", got, st.Commit)
	}
	f := c.follower(l)
	var nl *raftstore.NotLeaderError
	if err := f.node.ReadIndex(testCtx(t)); !errors.As(err, &nl) || nl.LeaderID != l.id {
		t.Fatalf("read index on a follower: %v, want NotLeader naming %d", err, l.id)
	}
	for _, m := range c.members {
		if m != l {
			c.kill(m.id)
		}
	}
	c.waitFor("the leader without a majority to step down", func() bool { return !l.node.IsLeader() })
	if err := l.node.ReadIndex(testCtx(t)); !errors.As(err, &nl) {
		t.Fatalf("read index on a deposed leader: %v, want NotLeader", err)
	}
}

// A raft snapshot at index p records the configuration in force at p,
// not one a later change made.
func TestConfAt(t *testing.T) {
	three := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	four := &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}
	n := &Node{confs: []confAt{{index: 3, cs: three}, {index: 40, cs: four}}}
	for _, tc := range []struct {
		at   uint64
		want *raftpb.ConfState
	}{{2, nil}, {3, three}, {39, three}, {40, four}, {99, four}} {
		if got := n.confAt(tc.at); got != tc.want {
			t.Fatalf("configuration at %d: %v, want %v", tc.at, got, tc.want)
		}
	}
	n.pruneConfs(39)
	if len(n.confs) != 2 || n.confAt(39) != three {
		t.Fatalf("pruned at 39: %v", n.confs)
	}
	n.pruneConfs(45)
	if len(n.confs) != 1 || n.confAt(45) != four {
		t.Fatalf("pruned at 45: %v", n.confs)
	}
}
