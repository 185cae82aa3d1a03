package commitlog

import (
	"fmt"
	"sync"

	"github.com/mqgate/mqgate/storage/vfs"
)

// Pre-zeroing (Options.ZeroAhead > 0).
//
// An fdatasync after a write at the end of a growing file must also commit
// the file's new size and extents (a journal commit on ext4); after a write
// into a range that already holds durable zeros, it only writes the data
// pages. The zeroer goroutine therefore keeps the active segment's tail
// written with zeros and fdatasynced, ZeroAhead bytes ahead of the writer,
// like RocketMQ's warmed mapped files.
//
// Ownership: the zeroer writes zeros and fsyncs through its own file
// handle, only at file offsets it has claimed under zmu; the writer
// reserves every range before writing it (reserve) and never writes into
// a claimed range until the claim is finished, and the zeroer never claims
// below what the writer reserved. Neither shares the other's handle.
//
// Recovery: zeros are not a record (size 0 fails the magic check), so the
// valid prefix ends at the first zero byte after the last record, exactly
// as at a torn tail; recovery truncates the tail and the zeroer rewrites
// it. A segment is truncated to its exact end (and fdatasynced) before the
// next one is created, and the active one on a clean close, so file sizes
// of closed segments keep meaning log positions.
type zeroState struct {
	mu   sync.Mutex
	cond *sync.Cond
	seg  *segment // the segment being pre-zeroed (the active one), nil when off
	// File offsets in seg: the writer has reserved [0, wEnd); zeros are
	// written in [wEnd, zEnd) as far as zEnd > wEnd (and fsynced soon
	// after); the zeroer is writing [cStart, cEnd) when cEnd > 0.
	wEnd, zEnd   int64
	cStart, cEnd int64
	// retryAt: after a failed zero write (disk full), do not try again
	// before the writer reaches this offset.
	retryAt int64
	stopped bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

const zeroChunkMax = 1 << 20

func (l *Log) zeroing() bool { return l.opts.ZeroAhead > 0 }

func (l *Log) zeroAhead() int64 { return min(l.opts.ZeroAhead, l.opts.SegmentSize) }

func (l *Log) zeroChunk() int64 { return max(min(l.zeroAhead()/4, zeroChunkMax), 4<<10) }

// waitClaim waits until no zero write is in flight.
// z.mu must be held.
func (z *zeroState) waitClaim() {
	for z.cEnd > 0 {
		z.cond.Wait()
	}
}

// reserve is called by the writer before it writes seg's file range
// [.., end): it waits for an overlapping zero write to finish and keeps
// the zeroer below end from now on.
func (l *Log) reserve(seg *segment, end int64) {
	if !l.zeroing() {
		return
	}
	z := &l.z
	z.mu.Lock()
	if z.seg != seg {
		z.mu.Unlock()
		return
	}
	for z.cEnd > 0 && end > z.cStart {
		z.cond.Wait()
	}
	if end > z.wEnd {
		z.wEnd = end
	}
	kick := !z.stopped && z.zEnd-z.wEnd < l.zeroAhead()/2 && z.wEnd >= z.retryAt
	z.mu.Unlock()
	if kick {
		signal(z.wake)
	}
}

// retarget makes the zeroer work on seg from file offset end (the writer's
// position there) after waiting for any zero write in flight. nil stops
// pre-zeroing. Writer goroutine (or Open/Stop) only.
func (l *Log) retarget(seg *segment, end int64) {
	if !l.zeroing() {
		return
	}
	z := &l.z
	z.mu.Lock()
	z.waitClaim()
	z.seg, z.wEnd, z.zEnd, z.retryAt = seg, end, end, 0
	kick := seg != nil && !z.stopped
	z.mu.Unlock()
	if kick {
		signal(z.wake)
	}
}

func (l *Log) startZeroer() {
	z := &l.z
	z.cond = sync.NewCond(&z.mu)
	z.wake = make(chan struct{}, 1)
	z.stop = make(chan struct{})
	z.done = make(chan struct{})
	if !l.zeroing() {
		close(z.done)
		return
	}
	go l.zeroLoop()
	l.retarget(l.active, l.written.Load()-l.active.base)
}

// stopZeroer stops the zeroer and waits for it; the tail stays as it is.
func (l *Log) stopZeroer() {
	if !l.zeroing() {
		return
	}
	z := &l.z
	z.mu.Lock()
	z.stopped = true
	z.mu.Unlock()
	close(z.stop)
	<-z.done
}

func (l *Log) zeroLoop() {
	z := &l.z
	defer close(z.done)
	var (
		fseg  *segment // the segment fh is open on
		fh    vfs.File
		zeros []byte
	)
	defer func() {
		if fh != nil {
			fh.Close()
		}
	}()
	chunk := l.zeroChunk()
	for {
		select {
		case <-z.wake:
		case <-z.stop:
			return
		}
		for l.Failed() == nil {
			z.mu.Lock()
			seg := z.seg
			start := max(z.zEnd, z.wEnd)
			end := min(start+chunk, l.opts.SegmentSize)
			if z.stopped || seg == nil || z.wEnd < z.retryAt || start+chunk > z.wEnd+l.zeroAhead() || end <= start {
				z.mu.Unlock()
				break
			}
			z.cStart, z.cEnd = start, end
			z.mu.Unlock()

			var err error
			if fseg != seg {
				if fh != nil {
					fh.Close()
					fh = nil
				}
				fseg = seg
				fh, err = l.opts.FS.OpenRW(seg.path)
			}
			if err == nil {
				if zeros == nil {
					zeros = make([]byte, chunk)
				}
				_, err = fh.WriteAt(zeros[:end-start], start)
			}
			// The claim covers the write only: the writer never waits for
			// the fsync below (a stalled disk must stall the syncer, not
			// the writer).
			z.mu.Lock()
			z.cStart, z.cEnd = 0, 0
			if err == nil && z.seg == seg {
				z.zEnd = end
			} else if err != nil && z.seg == seg {
				// Disk full or similar: the writer extends the file as
				// without pre-zeroing; try again a chunk later.
				z.retryAt = z.wEnd + chunk
			}
			z.cond.Broadcast()
			z.mu.Unlock()
			if err != nil {
				l.logger.Debug("commitlog: pre-zeroing failed", "segment", seg.path, "err", err)
				if fh != nil {
					fh.Close()
				}
				fh, fseg = nil, nil
				break
			}
			if err := fh.Sync(); err != nil {
				// The page cache state of the file is unknown (and this
				// fsync may have consumed a write-back error of record
				// pages): refuse writes, as a failed fsync of records does.
				l.setFailed(fmt.Errorf("fsync (zero tail): %w", err))
				l.logger.Error("commitlog: fsync of zero tail failed; log is now read-only", "err", err)
				l.broadcast()
				break
			}
			select {
			case <-z.stop:
				return
			default:
			}
		}
	}
}

// ZeroTail returns how many bytes past the written end of the active
// segment are currently pre-zeroed (0 when pre-zeroing is off or behind).
func (l *Log) ZeroTail() int64 {
	if !l.zeroing() || l.z.cond == nil {
		return 0
	}
	z := &l.z
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.seg == nil {
		return 0
	}
	return max(z.zEnd-(l.written.Load()-z.seg.base), 0)
}
