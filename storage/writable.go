package storage

import (
	"errors"
	"syscall"

	"github.com/mqgate/mqgate/storage/internal/serr"
)

// WritableFreeBytes is the free space on the store's file system at which
// Writable stops reporting a disk-full failure: room for a new commit-log
// segment's first reservation and its consume-queue and index files.
const WritableFreeBytes = 16 << 20

// Writable reports whether appends can be expected to succeed, for
// readiness: nil, or the error that says why not —
//
//   - ErrClosed once the store is closed;
//   - after a failed fsync, the ErrNotWritable the log answers every
//     append with until the store is reopened;
//   - after an append that failed with ErrNotWritable (disk full, an I/O
//     error), that error, until an append succeeds or — when it failed for
//     lack of space (ENOSPC) — until the file system has WritableFreeBytes
//     free again (retention or an operator made room), so a node nobody
//     sends to while it is not ready still becomes ready again.
//
// It is cheap: a few atomic loads, and a statfs only while a disk-full
// failure is pending.
func (s *Store) Writable() error {
	if s.closed.Load() {
		return serr.ErrClosed
	}
	if err := s.log.Failed(); err != nil {
		return err
	}
	p := s.writeErr.Load()
	if p == nil {
		return nil
	}
	if errors.Is(*p, syscall.ENOSPC) {
		if u, err := s.fs.Usage(s.dir); err == nil && u.Free >= WritableFreeBytes {
			s.writeErr.CompareAndSwap(p, nil)
			return nil
		}
	}
	return *p
}
