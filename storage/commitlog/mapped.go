package commitlog

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/mqgate/mqgate/storage/vfs"
)

// Mapped writes.
//
// Where the file system can reserve blocks (vfs.WriteMapper), the writer
// stores records through a shared, writable mapping of the active segment
// instead of calling pwrite: a copy into the page cache without a system
// call. A 1,100-byte record costs ~0.5 µs that way against ~3 µs for its
// own pwrite on a test VM, and a gRPC send saves the one write
// call it otherwise makes for itself (batches hold one or two records at
// that load).
//
// Blocks are reserved (fallocate) allocChunk at a time ahead of the write
// position, before any store through the mapping, so that a full disk
// fails the reservation, an ordinary error that rejects the batch, and
// never a store (SIGBUS). Stores are made with the goroutine's panic on
// fault turned on, so an I/O error surfacing as SIGBUS also becomes an
// error instead of a crash.
//
// What a store leaves is exactly what a pwrite leaves: dirty pages of the
// file in the page cache, kept across a process crash and made durable by
// the same fdatasync (Linux tracks pages dirtied through a shared mapping
// and writes them back on fsync). The reserved tail reads as zeros, which
// recovery cuts as it cuts a pre-zeroed tail (zero.go); a segment is cut
// to its exact end when the next one starts and on a clean Stop.
//
// The writer owns a segment's mapping and allocEnd. Where the file system
// cannot reserve blocks, or the file cannot be mapped, the log falls back
// to pwrite for good.

// allocChunk is how far ahead of the write position blocks are reserved.
const allocChunk = 8 << 20

// dropChunk: the writer's mapping keeps at most this much written data.
// A multiple of every page size (4 KiB to 64 KiB).
const dropChunk = 1 << 20

var pageSize = int64(os.Getpagesize())

// writeAt stores b at file offset off of seg, the active segment. The
// range has been reserved from the zeroer (reserve).
func (l *Log) writeAt(seg *segment, b []byte, off int64) error {
	if l.staging.Load() {
		err := l.stage(seg, b, off)
		if err == nil || !errors.Is(err, vfs.ErrNoAllocate) {
			return err
		}
		if err := l.stopStaging(seg.base + off); err != nil {
			return err
		}
	}
	if m := l.writable(seg); m != nil {
		end := off + int64(len(b))
		err := l.allocate(seg, end)
		if err == nil {
			if end > int64(len(m)) {
				return fmt.Errorf("commitlog: write at %d+%d past the mapping (%d)", off, len(b), len(m))
			}
			if err := storeMapped(m[off:end], b); err != nil {
				return err
			}
			if full := end &^ (dropChunk - 1); full > seg.dropped {
				// Written pages leave the writer's mapping a chunk at a
				// time: otherwise write-back must write-protect each one
				// again, a TLB shootdown (an IPI to every CPU) per page.
				from := min(seg.dropped, full) &^ (pageSize - 1)
				if err := vfs.DropPages(m[from:full]); err != nil {
					l.logger.Debug("commitlog: madvise", "err", err)
				}
				seg.dropped = full
			}
			return nil
		}
		if !errors.Is(err, vfs.ErrNoAllocate) {
			return err
		}
		l.logger.Info("commitlog: the file system cannot reserve blocks; writing with pwrite", "err", err)
		l.noMap = true
	}
	_, err := seg.f.WriteAt(b, off)
	return err
}

// writable returns seg's writable mapping, making it on first use, or nil
// when the log writes with pwrite.
func (l *Log) writable(seg *segment) []byte {
	if l.noMap || l.opts.NoMappedWrites || l.opts.SyncMode || seg.wmFailed {
		return nil
	}
	if seg.wm != nil {
		return seg.wm
	}
	wm, ok := seg.f.(vfs.WriteMapper)
	if !ok || seg.mapLen <= 0 {
		l.noMap = true
		return nil
	}
	b, unmap, err := wm.MapWritable(seg.mapLen)
	if err != nil {
		l.logger.Info("commitlog: cannot map the segment for writing; writing it with pwrite", "segment", seg.path, "err", err)
		seg.wmFailed = true
		return nil
	}
	seg.wm, seg.wunmap = b, unmap
	return b
}

// allocate makes sure seg's file has reserved blocks for [0, end): with a
// staging ring past the file's end, otherwise by extending the file.
func (l *Log) allocate(seg *segment, end int64) error {
	if end <= seg.allocEnd {
		return nil
	}
	size, err := seg.f.Size()
	if err != nil {
		return err
	}
	if size >= end {
		// Written or pre-zeroed (the zeroer writes zeros: allocated).
		// A file longer than the log holds only a reserved tail.
		seg.allocEnd = size
		return nil
	}
	if l.staging.Load() {
		// The flusher writes with pwrite, which extends the file, so the
		// blocks are reserved past its end and the file stays as long as
		// the log: a roll (or a clean stop) has no reserved tail to cut.
		// Cutting one (truncate, fdatasync) held the writer role for
		// 40-90 ms at every segment on a test VM.
		if r := seg.reservedUpTo(); r >= end {
			seg.allocEnd = r // the reserver's work (reserve.go)
			return nil
		}
		from := max(size, seg.allocEnd)
		to := max(min(max(end, from)+allocChunk, l.opts.SegmentSize), end)
		if err := seg.f.(vfs.WriteMapper).Reserve(from, to-from); err != nil {
			return err
		}
		seg.allocEnd = to
		return nil
	}
	to := min(max(end, size)+allocChunk, max(l.opts.SegmentSize, end), int64(seg.mapLen))
	if to < end {
		to = end
	}
	if err := seg.f.(vfs.WriteMapper).Allocate(size, to-size); err != nil {
		return err
	}
	seg.allocEnd = to
	return nil
}

// storeMapped copies b into dst, a range of a shared file mapping, and
// turns a fault (SIGBUS: an I/O error, or a block the file system could
// not find after all) into an error.
func storeMapped(dst, b []byte) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("commitlog: store through the mapping faulted: %v", r)
		}
	}()
	copy(dst, b)
	return nil
}
