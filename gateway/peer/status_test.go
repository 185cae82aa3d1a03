package peer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
)

func TestStatusAndTransferLeadership(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	appendN(t, l, 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := l.node.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != l.id || st.Leader != l.id || st.State != "StateLeader" || st.Commit == 0 || st.Commit < st.Applied || len(st.Progress) != 3 {
		t.Fatalf("leader status %+v", st)
	}
	var to *member
	for _, m := range c.members {
		if m != l {
			to = m
			fs, err := m.node.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fs.Leader != l.id || fs.State != "StateFollower" || fs.Progress != nil {
				t.Fatalf("follower status %+v", fs)
			}
			if err := m.node.TransferLeadership(ctx, m.id); !errors.Is(err, raftstore.ErrNotLeader) {
				t.Fatalf("transfer by a follower: %v", err)
			}
		}
	}
	c.waitFor("the follower to catch up", func() bool { return to.rep.Applied() >= l.rep.Applied() })
	if err := l.node.TransferLeadership(ctx, to.id); err != nil {
		t.Fatal(err)
	}
	if got := c.leader(); got != to {
		t.Fatalf("leader %d after the transfer to %d", got.id, to.id)
	}
	appendN(t, to, 10, 20)
	if err := l.node.TransferLeadership(ctx, 99); err == nil {
		t.Fatal("transfer to an unknown member accepted")
	}
}

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers(" 1=a:7001, 2=b:7001,3=c:7001 ")
	if err != nil || len(got) != 3 || got[1] != "a:7001" || got[3] != "c:7001" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "1", "0=a:1", "x=a:1", "1=", "1=a:1,1=b:1", "1=a:1,2=a:1"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
