package peer

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/cluster"
	"github.com/mqgate/mqgate/internal/testutil"
)

// A member down while the others compacted their raft logs past what it
// has catches up from a copy of another member's store: its raft loop
// stages the copy and stops with ErrCopyStaged, and once restarted it
// installs the copy, applies what followed, and ends byte-identical.
func TestLaggingMemberCatchesUpByCopy(t *testing.T) {
	testLaggingCatchUp(t, testCluster{persist: 8, snap: 64, timeout: 3 * time.Second})
}

// The same with mutual TLS and a peer token: the copy is fetched over
// the member's TLS connection.
func TestLaggingMemberCatchesUpByCopyTLS(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	testLaggingCatchUp(t, testCluster{persist: 8, snap: 64, timeout: 3 * time.Second, token: "s3cret",
		tls: func(uint64) *TLS { return loadTLS(t, ca.Issue(t, "member")) }})
}

func testLaggingCatchUp(t *testing.T, o testCluster) {
	c := newTestClusterWith(t, 3, o)
	l := c.leader()
	var lag uint64
	for id := range c.members {
		if id != l.id {
			lag = id
			break
		}
	}
	appendN(t, l, 0, 20)
	c.kill(lag)
	appendN(t, l, 20, 400) // far past SnapshotEvery: the others compact
	c.converged(l.rep.Applied())

	m := c.restart(lag)
	c.waitFor("the lagging member to stage a copy", func() bool {
		select {
		case <-m.node.Done():
			return true
		default:
			return false
		}
	})
	if err := m.node.Err(); !errors.Is(err, cluster.ErrCopyStaged) {
		t.Fatalf("the lagging member stopped with %v, want ErrCopyStaged", err)
	}
	_ = m.node.Stop() // its error is the one above
	if err := m.rep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.node = nil
	m = c.restart(lag) // installs the copy
	if m.rep.Applied() < 400 {
		t.Fatalf("after the install the member applied %d", m.rep.Applied())
	}
	appendN(t, c.leader(), 400, 450)
	c.converged(c.leader().rep.Applied())
	want := contents(t, c.leader())
	if len(want) != 450 {
		t.Fatalf("the leader holds %d messages", len(want))
	}
	if got := contents(t, m); !maps.Equal(got, want) {
		t.Fatalf("the caught-up member holds %d messages, the leader %d", len(got), len(want))
	}
	c.stopAll()
	c.sameStores()
}
