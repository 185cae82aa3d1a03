package storage

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// TestDiskFull: while the disk is full, appends fail with ErrNotWritable
// and nothing of theirs is acknowledged; already acknowledged records are
// intact; when space returns appends succeed and queue offsets continue
// without a gap. A full disk fails writes that need new blocks: every
// write to the log, or with a staging ring (which reserves the active
// segment's blocks ahead) block reservations and new segments only, so
// there appends still fit until the reserved blocks run out.
func TestDiskFull(t *testing.T) {
	forEachMode(t, testDiskFull)
}

func testDiskFull(t *testing.T, o Options) {
	efs := vfs.NewErrorFS(o.FS, nil)
	o.FS = efs
	s := mustOpen(t, "/d", o)
	ring := s.log.Staging()
	var ents []AppendEntry
	for i := 0; i < 50; i++ {
		ents = append(ents, appendOne(t, s, msg("T", 0, i)))
	}
	efs.SetInject(func(op vfs.Op, path string) error {
		full := op == vfs.OpWrite || op == vfs.OpCreate
		if ring {
			full = op == vfs.OpReserve || op == vfs.OpCreate
		}
		if full && strings.Contains(path, "commitlog") {
			return syscall.ENOSPC
		}
		return nil
	})
	failed := 0
	for i := 0; failed < 20; i++ {
		if i == 1000 {
			t.Fatalf("%d of %d appends failed on a full disk", failed, i)
		}
		res, err := s.Append(context.Background(), msg("T", 0, len(ents)))
		if err == nil && ring && failed == 0 {
			ents = append(ents, res.Entries[0]) // into blocks reserved before
			continue
		}
		if !errors.Is(err, ErrNotWritable) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on full disk: %+v %v", res, err)
		}
		failed++
	}
	efs.SetInject(nil)
	for i, n := len(ents), len(ents)+50; i < n; i++ {
		e := appendOne(t, s, msg("T", 0, i))
		if e.QueueOffset != int64(i) {
			t.Fatalf("queue offset %d after disk-full, want %d", e.QueueOffset, i)
		}
		ents = append(ents, e)
	}
	verifyConsistent(t, s)
	mustClose(t, s)
	s = mustOpen(t, "/d", o)
	for i, e := range ents {
		m, err := s.ReadMessage(e.PhysOffset, e.Size)
		if err != nil || !sameMessage(m, msg("T", 0, i)) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestDiskFullCapacity uses the in-memory FS's capacity: a partial write
// past the limit is cut back (with a staging ring, the block reservation
// fails instead, once the blocks reserved before are used up; in sync
// mode appends fill the pre-zeroed tail first), and
// retention by disk usage makes room.
func TestDiskFullCapacity(t *testing.T) {
	forEachMode(t, testDiskFullCapacity)
}

func testDiskFullCapacity(t *testing.T, o Options) {
	mem := o.FS.(*vfs.MemFS)
	s := mustOpen(t, "/d", o)
	for i := 0; i < 400; i++ {
		appendOne(t, s, msg("T", 0, i))
	}
	waitAll(t, s)
	if err := s.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	u, _ := mem.Usage("/d")
	mem.SetCapacity(int64(u.Total-u.Free) + 300) // room for about two records
	var failed bool
	for i := 0; i < 10 || !failed && (s.log.Staging() || o.FlushMode == FlushSync) && i < 1000; i++ {
		if _, err := s.Append(context.Background(), msg("T", 0, 400+i)); err != nil {
			if !errors.Is(err, ErrNotWritable) {
				t.Fatalf("want ErrNotWritable, got %v", err)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("capacity never hit")
	}
	s.opts.DiskUsagePercent = 50
	if err := s.Sync(); err != nil { // retention never deletes unsynced bytes
		t.Fatal(err)
	}
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention by disk usage: %d %v segs=%+v stats=%+v", n, err, s.log.Segments(), s.Stats())
	}
	if _, err := s.Append(context.Background(), msg("T", 0, 500)); err != nil {
		t.Fatalf("append after retention freed space: %v", err)
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestFsyncFailure: a failed fsync makes the store refuse writes (the page
// cache state is unknown) and the receipt never claims durability. In
// sync mode the append waiting for the fsync fails; in async mode the
// appends answered before it are DurabilityMemory, and those after it
// fail.
func TestFsyncFailure(t *testing.T) {
	forEachMode(t, testFsyncFailure)
}

func testFsyncFailure(t *testing.T, o Options) {
	mem := o.FS
	efs := vfs.NewErrorFS(mem, nil)
	o.FS = efs
	s := mustOpen(t, "/d", o)
	appendOne(t, s, msg("T", 0, 0))
	if err := s.Sync(); err != nil { // the syncer has nothing left to fsync
		t.Fatal(err)
	}
	efs.SetInject(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "commitlog") {
			return syscall.EIO
		}
		return nil
	})
	if o.FlushMode == FlushAsync {
		res, err := s.Append(context.Background(), msg("T", 0, 1))
		if err != nil || res.Durability != DurabilityMemory {
			t.Fatalf("async append before the fsync: %+v %v", res, err)
		}
		if err := s.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync with failing fsync: %v", err)
		}
	}
	res, err := s.Append(context.Background(), msg("T", 0, 1))
	if !errors.Is(err, ErrNotWritable) || res.Durability == DurabilityLocal {
		t.Fatalf("append with failing fsync: %+v %v", res, err)
	}
	efs.SetInject(nil)
	if _, err := s.Append(context.Background(), msg("T", 0, 2)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("store should stay read-only after fsync failure: %v", err)
	}
	if err := s.Close(context.Background()); err == nil {
		t.Fatal("close after fsync failure reported clean")
	}
	o.FS = mem
	s = mustOpen(t, "/d", o)
	if _, err := s.Append(context.Background(), msg("T", 0, 3)); err != nil {
		t.Fatalf("reopen recovers writability: %v", err)
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestFlushTimeout: in sync mode (the only one with a FlushTimeout) an append whose fsync does not finish
// within FlushTimeout (or the ctx deadline, if sooner) is answered
// StatusFlushTimeout with DurabilityMemory; the record is in the log and
// becomes durable and visible once the fsync completes.
func TestFlushTimeout(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := testOpts(efs)
	o.FlushMode = FlushSync
	o.FlushTimeout = 20 * time.Millisecond
	s := mustOpen(t, "/d", o)
	release := make(chan struct{})
	efs.SetInject(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "commitlog") {
			<-release // a disk that stalls
		}
		return nil
	})
	res, err := s.Append(context.Background(), msg("T", 0, 0))
	if err != nil || res.Status != StatusFlushTimeout || res.Durability != DurabilityMemory {
		t.Fatalf("stalled fsync: %+v %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	res2, err := s.Append(ctx, msg("T", 0, 1)) // the ctx deadline is sooner
	cancel()
	if err != nil || res2.Status != StatusFlushTimeout {
		t.Fatalf("ctx deadline: %+v %v", res2, err)
	}
	if s.Stats().FlushTimeouts != 2 {
		t.Fatal("flush timeouts not counted")
	}
	close(release)
	efs.SetInject(nil)
	if err := s.WaitDispatched(context.Background(), res2.End); err != nil {
		t.Fatal(err)
	}
	for i, r := range []AppendResult{res, res2} {
		m, err := s.ReadMessage(r.Entries[0].PhysOffset, r.Entries[0].Size)
		if err != nil || !sameMessage(m, msg("T", 0, i)) {
			t.Fatalf("timed-out record %d not in the log: %v", i, err)
		}
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}
