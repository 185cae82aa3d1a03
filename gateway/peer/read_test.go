package peer

import (
	"errors"
	"testing"

	"github.com/mqgate/mqgate/broker/cluster"
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
	var nl *cluster.NotLeaderError
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
