package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/raftstore"
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
	// The others' raft logs start after their stores' durable positions
	// at most: the copy reaches at least this far.
	compacted := l.rep.Persisted()

	m := c.restart(lag)
	c.waitFor("the lagging member to stage a copy", func() bool {
		select {
		case <-m.node.Done():
			return true
		default:
			return false
		}
	})
	if err := m.node.Err(); !errors.Is(err, raftstore.ErrCopyStaged) {
		t.Fatalf("the lagging member stopped with %v, want ErrCopyStaged", err)
	}
	_ = m.node.Stop() // its error is the one above
	if err := m.rep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.node = nil
	m = c.restart(lag) // installs the copy
	if m.rep.Applied() < compacted {
		t.Fatalf("after the install the member applied %d, the others' durable position was %d", m.rep.Applied(), compacted)
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

// A snapshot message no member can send a copy for (a member's bug, or
// an index from nowhere) is dropped: the member goes on following and
// applying, where it used to stop for good.
func TestSnapshotWithoutCopyDropped(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{persist: 8, snap: 64, timeout: 3 * time.Second})
	l := c.leader()
	appendN(t, l, 0, 10)
	f := c.follower(l)
	st, err := l.node.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	md := metadata.Pairs(mdToken, testToken, mdClusterID, c.id, mdFromNode, fmt.Sprint(l.id))
	snap := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(f.id), From: new(l.id), Term: new(st.Term),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1e9)), Term: new(st.Term),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}
	if err := c.raftStream(f.id, md, snap); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Fatalf("the snapshot message was refused: %v", err)
	}
	acked := appendN(t, l, 10, 40)
	c.converged(l.rep.Applied())
	if err := f.node.Err(); err != nil {
		t.Fatalf("the member stopped: %v", err)
	}
	have := contents(t, f)
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("member %d lacks %s after the snapshot message", f.id, id)
		}
	}
}

// A member whose store is ahead of its raft log (a copy installed, the
// raft log not naming it: a crash between the two) takes the leader's
// snapshot at or below what its store holds without a copy, on an idle
// group too, where it used to ask for a copy ahead of itself and stop.
func TestSnapshotTheStoreHolds(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{persist: 8, snap: 16, timeout: 3 * time.Second})
	l := c.leader()
	f := c.follower(l)
	appendN(t, l, 0, 10)
	c.converged(l.rep.Applied())
	c.kill(f.id)
	appendN(t, l, 10, 200) // the others compact past f's raft log
	c.converged(l.rep.Applied())

	// Stage, on f's replica, a copy of the leader's store, as a fetch
	// interrupted before the raft log named it leaves it.
	var cp raftstore.Checkpoint
	var cerr error
	if err := l.node.do(testCtx(t), func() { cp, cerr = l.rep.Checkpoint() }); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	rep, err := raftstore.OpenReplica(filepath.Join(f.dir, "replica"), raftstore.Options{Store: storeOpts(), StoreHost: "cluster:8081", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = rep.StageCopy(cp, func(sp raftstore.SegmentPart, w io.Writer) error {
		ra, cl, err := l.rep.OpenSegment(sp.Name)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = io.Copy(w, io.NewSectionReader(ra, 0, sp.Length))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rep.Abandon()
	m := c.restart(f.id) // installs the copy; its raft log is far behind
	if m.rep.Applied() < cp.Index {
		t.Fatalf("applied %d after the install, the copy is at %d", m.rep.Applied(), cp.Index)
	}
	// Idle: the leader's snapshot is at or below the copy.
	c.waitFor("the member to follow the leader's log again", func() bool {
		st, err := l.node.Status(testCtx(t))
		return err == nil && st.Progress[m.id].Match >= cp.Index
	})
	if err := m.node.Err(); err != nil {
		t.Fatalf("the member stopped: %v", err)
	}
	appendN(t, l, 200, 220)
	c.converged(l.rep.Applied())
	c.stopAll()
	c.sameStores()
}
