package commitlog

import "github.com/mqgate/mqgate/storage/vfs"

// allocChunk is how far ahead of the write position the writer reserves
// blocks itself where the reserver has not.
const allocChunk = 8 << 20

// Block reservation ahead of a staged log.
//
// With a staging ring the writer reserves a segment's blocks before it
// answers an append (allocate), so that a full disk fails the append, not
// the flusher. Reserving from the writer role made every appender wait
// whenever the reservation did: on a test VM a fallocate issued
// while fsyncs of the log, queue and index files were committing took up
// to 165 ms, and the role held through it stopped all appends (a Go
// execution trace of BenchmarkAppendAsync). So a reserver goroutine
// reserves the whole of each new active segment at once (past the file's
// end: Reserve keeps the size, see allocate), and the writer reserves
// itself, 8 MiB at a time, only beyond what the reserver has done: at the
// start of a segment, or where the reserver did not (the disk has less
// free space than a segment and some headroom, or the reservation
// failed; the writer's own attempt then gives an append its error).
//
// A segment therefore holds blocks for its full size from early on, as a
// RocketMQ broker's preallocated commit-log files do.

// reserveAhead hands seg, the new active segment, to the reserver.
// Writer role (or Start) only.
func (l *Log) reserveAhead(seg *segment) {
	if !l.staging.Load() {
		return
	}
	seg.acquire() // the reserver releases it
	if old := l.rsvSeg.Swap(seg); old != nil {
		old.release()
	}
	signal(l.rsvWake)
}

// reserveLoop is the reserver goroutine.
func (l *Log) reserveLoop() {
	defer close(l.rsvDone)
	for {
		select {
		case <-l.rsvWake:
		case <-l.rsvStop:
			if seg := l.rsvSeg.Swap(nil); seg != nil {
				seg.release()
			}
			return
		}
		if seg := l.rsvSeg.Swap(nil); seg != nil {
			l.reserveSegment(seg)
			seg.release()
		}
	}
}

// reserveSegment reserves blocks for all of seg, unless a cut of its file
// (which frees reserved blocks past the cut) happened meanwhile.
func (l *Log) reserveSegment(seg *segment) {
	seg.rmu.Lock()
	gen, done := seg.rgen, seg.reserved >= l.opts.SegmentSize
	seg.rmu.Unlock()
	if done {
		return
	}
	wm, ok := seg.f.(vfs.Reserver)
	if !ok {
		return
	}
	// Not on a nearly full disk: a fallocate that runs out of space keeps
	// what it took, and the queues, index and metadata need room too.
	// The writer's own 8 MiB reservations then fail an append, not them.
	if u, err := l.opts.FS.Usage(l.opts.Dir); err != nil || u.Free < uint64(l.opts.SegmentSize)+reserveHeadroom(l.opts.SegmentSize) {
		l.logger.Debug("commitlog: not reserving a whole segment ahead", "segment", seg.path, "free", u.Free, "err", err)
		return
	}
	if err := wm.Reserve(0, l.opts.SegmentSize); err != nil {
		l.logger.Debug("commitlog: reserve segment blocks ahead", "segment", seg.path, "err", err)
		return
	}
	seg.rmu.Lock()
	if seg.rgen == gen {
		seg.reserved = l.opts.SegmentSize
	}
	seg.rmu.Unlock()
}

// reserveHeadroom is the free space the reserver leaves beyond a whole
// segment: a quarter of one, at least 64 MiB.
func reserveHeadroom(segSize int64) uint64 { return uint64(max(segSize/4, 64<<20)) }

// reservedUpTo is how far the reserver has reserved seg's blocks.
func (seg *segment) reservedUpTo() int64 {
	seg.rmu.Lock()
	defer seg.rmu.Unlock()
	return seg.reserved
}

// truncate cuts seg's file to size. Blocks reserved past the cut are
// freed with it, so the reserver's record of them goes too; rmu is held
// throughout, so that a reservation that ran before the cut cannot be
// recorded after it. Writer role (or Stop) only.
func (seg *segment) truncate(size int64) error {
	seg.rmu.Lock()
	defer seg.rmu.Unlock()
	seg.rgen++
	seg.reserved = 0
	seg.allocEnd = 0
	seg.allocated.Store(0)
	return seg.f.Truncate(size)
}

// allocate makes sure seg's file has blocks reserved for [0, end), past
// the file's end (Reserve keeps the size: the flusher's pwrites extend
// the file, so it is never longer than the log and a roll or clean stop
// has no reserved tail to cut). Writer role only.
func (l *Log) allocate(seg *segment, end int64) error {
	if end <= seg.allocEnd {
		return nil
	}
	if r := seg.reservedUpTo(); r >= end {
		seg.allocEnd = r // the reserver's work
		return nil
	}
	size, err := seg.f.Size()
	if err != nil {
		return err
	}
	if size >= end {
		seg.allocEnd = size // written
		return nil
	}
	wm, ok := seg.f.(vfs.Reserver)
	if !ok {
		return vfs.ErrNoAllocate
	}
	from := max(size, seg.allocEnd)
	to := max(min(max(end, from)+allocChunk, l.opts.SegmentSize), end)
	if err := wm.Reserve(from, to-from); err != nil {
		return err
	}
	seg.allocEnd = to
	seg.allocated.Store(to)
	return nil
}

// ReservedAhead is how many bytes of blocks the log holds reserved (by
// the reserver, or by the writer ahead of its appends) in the active
// segment past the end of what was answered: room the log fills without
// taking more of the file system's free space. Free space figures
// (statfs) count those blocks as used.
func (l *Log) ReservedAhead() int64 {
	l.mu.RLock()
	var seg *segment
	if n := len(l.segs); n > 0 {
		seg = l.segs[n-1]
	}
	l.mu.RUnlock()
	if seg == nil {
		return 0
	}
	used := l.Answered() - seg.base
	if used < 0 || used > l.opts.SegmentSize {
		return 0
	}
	return max(seg.reservedUpTo()-used, seg.allocated.Load()-used, 0)
}
