package peer

import (
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// TestMemberWaitsForSpace: a follower whose disk has no room for a
// committed entry neither stops nor skips it: it waits (Stalled says
// why), the others go on committing without it, and once there is room
// it applies that entry and every later one, to the same bytes as the
// others.
func TestMemberWaitsForSpace(t *testing.T) {
	efs := map[uint64]*vfs.ErrorFS{}
	c := newTestClusterWith(t, 3, testCluster{persist: 16, timeout: 5 * time.Second, token: "peer-token-of-the-space-test",
		fs: func(id uint64) vfs.FS {
			efs[id] = vfs.NewErrorFS(vfs.Default, nil)
			return efs[id]
		}})
	l := c.leader()
	appendN(t, l, 0, 10)
	c.converged(l.rep.Applied())
	var f *member
	for _, m := range c.members {
		if m != l {
			f = m
			break
		}
	}
	efs[f.id].SetInject(func(op vfs.Op, path string) error {
		if (op == vfs.OpWrite || op == vfs.OpReserve) && strings.Contains(path, "commitlog") {
			return syscall.ENOSPC
		}
		return nil
	})
	before := f.rep.Applied()
	appendN(t, l, 10, 40) // committed by the leader and the other follower
	c.waitFor("the follower to wait for room", func() bool { return f.node.Stalled() != nil })
	if err := f.node.Stalled(); !strings.Contains(err.Error(), "lack of disk space") {
		t.Fatalf("stalled: %v", err)
	}
	select {
	case <-f.node.Done():
		t.Fatalf("the member stopped: %v", f.node.Err())
	default:
	}
	if f.rep.Failed() != nil || f.rep.Applied() >= l.rep.Applied() || f.rep.Applied() < before {
		t.Fatalf("follower: failed %v, applied %d (leader %d)", f.rep.Failed(), f.rep.Applied(), l.rep.Applied())
	}

	efs[f.id].SetInject(nil)
	c.converged(l.rep.Applied())
	if err := f.node.Stalled(); err != nil {
		t.Fatalf("still stalled once there is room: %v", err)
	}
	want := contents(t, l)
	if got := contents(t, f); len(got) != 40 || !maps.Equal(got, want) {
		t.Fatalf("follower holds %d messages, leader %d; want the same 40", len(got), len(want))
	}
	c.stopAll()
	c.sameStores()
}
