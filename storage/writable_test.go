package storage

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/mqgate/mqgate/storage/vfs"
)

// TestWritableDiskFull: after an append fails for lack of space Writable
// says so, and it clears when space returns (without any append) or when
// an append succeeds.
func TestWritableDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	s := mustOpen(t, "/d", testOpts(efs))
	defer mustClose(t, s)
	appendOne(t, s, msg("T", 0, 0))
	if err := s.Writable(); err != nil {
		t.Fatalf("fresh store: %v", err)
	}
	full := func(op vfs.Op, path string) error {
		if (op == vfs.OpWrite || op == vfs.OpCreate) && strings.Contains(path, "commitlog") {
			return syscall.ENOSPC
		}
		return nil
	}
	efs.SetInject(full)
	if _, err := s.Append(context.Background(), msg("T", 0, 1)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append on a full disk: %v", err)
	}
	// The in-memory FS reports the space its capacity leaves.
	u, _ := mem.Usage("/d")
	used := int64(u.Total - u.Free)
	mem.SetCapacity(used + WritableFreeBytes/2)
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Writable after a disk-full append: %v", err)
	}
	// Space returns (retention, an operator): writable again before any
	// append, so a node taken out of rotation comes back.
	mem.SetCapacity(used + 2*WritableFreeBytes)
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable once space returned: %v", err)
	}
	efs.SetInject(nil)
	appendOne(t, s, msg("T", 0, 2))

	// Another write error stays until an append succeeds.
	efs.SetInject(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.Contains(path, "commitlog") {
			return syscall.EIO
		}
		return nil
	})
	if _, err := s.Append(context.Background(), msg("T", 0, 3)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append with an I/O error: %v", err)
	}
	if err := s.Writable(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Writable after an I/O error: %v", err)
	}
	efs.SetInject(nil)
	appendOne(t, s, msg("T", 0, 4))
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable after a successful append: %v", err)
	}
}

// TestWritableAfterFsyncFailure: a failed fsync leaves the store refusing
// writes until reopened, and Writable says so all along.
func TestWritableAfterFsyncFailure(t *testing.T) {
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
	if _, err := s.Append(context.Background(), msg("T", 0, 1)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	efs.SetInject(nil)
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Writable after a failed fsync: %v", err)
	}
	_ = s.Close(context.Background())
	if err := s.Writable(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Writable after close: %v", err)
	}
}
