package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
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

// TestMembershipChangeWaitsForSpace: a follower with no room to record a
// configuration change in its members file neither stops nor skips the
// change: it waits (Stalled says why), trying again, while the others
// apply it and go on; once there is room its file holds the change and
// it goes on with the group. Any other error writing the file stops it.
func TestMembershipChangeWaitsForSpace(t *testing.T) {
	c := newTestClusterWith(t, 3, testCluster{timeout: 5 * time.Second, token: "peer-token-of-the-space-test"})
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
	stopped := func() bool {
		select {
		case <-f.node.Done():
			return true
		default:
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// change makes a change on the leader while f's members file has no
	// room, checks that f waits, then gives it room.
	next := 10
	change := func(what string, do func() error) {
		t.Helper()
		var tries atomic.Int64
		full := func() error {
			tries.Add(1)
			return syscall.ENOSPC
		}
		f.node.book.failWrite.Store(&full)
		if err := do(); err != nil { // the leader and the other follower apply it
			t.Fatalf("%s: %v", what, err)
		}
		c.waitFor("the follower to try its members file again", func() bool { return tries.Load() >= 2 || stopped() })
		if stopped() {
			t.Fatalf("%s: the member stopped: %v", what, f.node.Err())
		}
		if err := f.node.Stalled(); err == nil || !strings.Contains(err.Error(), "lack of disk space") {
			t.Fatalf("%s: stalled: %v", what, err)
		}
		appendN(t, l, next, next+10) // the others go on
		next += 10
		f.node.book.failWrite.Store(nil)
		c.converged(l.rep.Applied())
		if err := f.node.Stalled(); err != nil {
			t.Fatalf("%s: still stalled once there is room: %v", what, err)
		}
	}

	c.join(4)
	change("add member 4", func() error { return l.node.AddMember(ctx, 4, c.addrs[4]) })
	if got := voters(f); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("voters %v after adding 4", got)
	}
	if got := membersFile(t, f).Addrs[4]; got != c.addrs[4] {
		t.Fatalf("the members file names member 4 at %q, want %q", got, c.addrs[4])
	}
	// The last change: only writing the file again records it.
	change("remove member 4", func() error {
		if err := l.node.RemoveMember(ctx, 4); err != nil {
			return err
		}
		if err := c.stopped(4); !errors.Is(err, ErrRemoved) {
			return fmt.Errorf("member 4 stopped with %v", err)
		}
		c.drop(4)
		return nil
	})
	if got := voters(f); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("voters %v after removing 4", got)
	}
	if got := membersFile(t, f); !slices.Contains(got.Removed, 4) || got.Addrs[4] != "" {
		t.Fatalf("the members file after removing 4: %+v", got)
	}

	broken := func() error { return syscall.EIO }
	f.node.book.failWrite.Store(&broken)
	if err := l.node.RemoveMember(ctx, f.id); err != nil {
		t.Fatal(err)
	}
	if err := c.stopped(f.id); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the member stopped with %v, want EIO", err)
	}
	if err := f.node.Stalled(); err != nil {
		t.Fatalf("stalled on EIO: %v", err)
	}
}

// membersFile reads member m's members file.
func membersFile(t *testing.T, m *member) bookFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(m.dir, "members.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f bookFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// A members file that cannot be written for lack of space (ENOSPC, or
// the quota: EDQUOT) says raftstore.ErrNoSpace, as the store does; other
// errors do not.
func TestMembersFileNoSpace(t *testing.T) {
	b, err := openBook(filepath.Join(t.TempDir(), "members.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO} {
		fail := func() error { return errno }
		b.failWrite.Store(&fail)
		err := b.save()
		if !errors.Is(err, errno) || errors.Is(err, raftstore.ErrNoSpace) != (errno != syscall.EIO) {
			t.Errorf("%v: save: %v", errno, err)
		}
	}
	b.failWrite.Store(nil)
	if err := b.save(); err != nil {
		t.Fatal(err)
	}
}
