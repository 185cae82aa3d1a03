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

// TestDiskFull: while writes to the log fail with ENOSPC, appends fail
// with ErrNotWritable and nothing is acknowledged; already acknowledged
// records are intact; when space returns appends succeed and queue
// offsets continue without a gap.
func TestDiskFull(t *testing.T) {
	for _, mode := range []FlushMode{FlushAsync, FlushSync} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem, nil)
			o := testOpts(efs)
			o.FlushMode = mode
			s := mustOpen(t, "/d", o)
			var ents []AppendEntry
			for i := 0; i < 50; i++ {
				ents = append(ents, appendOne(t, s, msg("T", 0, i)))
			}
			efs.SetInject(func(op vfs.Op, path string) error {
				if (op == vfs.OpWrite || op == vfs.OpCreate) && strings.Contains(path, "commitlog") {
					return syscall.ENOSPC
				}
				return nil
			})
			for i := 0; i < 20; i++ {
				res, err := s.Append(context.Background(), msg("T", 0, 1000+i))
				if !errors.Is(err, ErrNotWritable) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append on full disk: %+v %v", res, err)
				}
			}
			efs.SetInject(nil)
			for i := 50; i < 100; i++ {
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
		})
	}
}

// TestDiskFullCapacity uses the in-memory FS's capacity: a partial write
// past the limit is cut back, and retention by disk usage makes room.
func TestDiskFullCapacity(t *testing.T) {
	mem := vfs.NewMem()
	o := testOpts(mem)
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
	for i := 0; i < 10; i++ {
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
// cache state is unknown) and the receipt never claims durability.
func TestFsyncFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := testOpts(efs)
	o.FlushMode = FlushSync
	s := mustOpen(t, "/d", o)
	appendOne(t, s, msg("T", 0, 0))
	efs.SetInject(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "commitlog") {
			return syscall.EIO
		}
		return nil
	})
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
	s = mustOpen(t, "/d", testOpts(mem))
	if _, err := s.Append(context.Background(), msg("T", 0, 3)); err != nil {
		t.Fatalf("reopen recovers writability: %v", err)
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestFlushTimeout: in sync mode an append whose fsync does not finish
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
