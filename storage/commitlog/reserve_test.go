package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

func mappedOpts(fs vfs.FS, dir string, seg int64) Options {
	return Options{FS: fs, Dir: dir, SegmentSize: seg, MaxRecordSize: 4 << 10}
}

// checkFileLengths requires each segment's file to be exactly as long
// as its part of a log that ends at end.
func checkFileLengths(t *testing.T, dir string, segs []*segment, end int64) {
	t.Helper()
	for i, s := range segs {
		want := end - s.base
		if i+1 < len(segs) {
			want = segs[i+1].base - s.base
		}
		if got := osSize(t, dir, s.base); got != want {
			t.Fatalf("segment %d: file size %d, log length %d", s.base, got, want)
		}
	}
}

// osAllocated is how many bytes of disk the segment's file holds.
func osAllocated(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, segName(base)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func osSize(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, segName(base)))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestStagedFileLengths: with a staging ring the segment's blocks are
// reserved past the file's end (the flusher's pwrites extend it), so the
// file is never longer than the log; after a simulated crash recovery
// keeps every record without counting damage; rolls and a clean stop
// leave files their log lengths, and the clean reopen takes the fast path.
func TestStagedFileLengths(t *testing.T) {
	dir := t.TempDir()
	o := mappedOpts(vfs.Default, dir, 64<<10)
	o.StagingDir = t.TempDir()
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 40, 0)
	end := recs[39].e.PhysOffset + int64(recs[39].e.Size) // Written may lag with a ring
	if sz := osSize(t, dir, 0); sz > end {
		t.Fatalf("file size %d, log end %d: a staged log's file holds nothing past the log", sz, end)
	}
	if a := osAllocated(t, dir, 0); a < 64<<10 {
		t.Fatalf("%d bytes allocated: the segment's blocks are not reserved", a)
	}
	checkRecords(t, l, recs)
	l.Stop(true) // a crash: no fsync (the ring and the page cache keep the records)
	l.Close()

	l, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.Truncated != 0 || res.FastPath {
		t.Fatalf("recovery %+v, want end %d, nothing truncated", res, end)
	}
	if got := osSize(t, dir, 0); got != end {
		t.Fatalf("file size after recovery %d, want %d", got, end)
	}
	l.Start()
	checkRecords(t, l, recs)
	// Enough to roll several 64 KiB segments.
	recs = append(recs, appendN(t, l, 600, 40)...)
	checkRecords(t, l, recs)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want a few rolls", len(segs))
	}
	end = l.Written()
	checkFileLengths(t, dir, segs, end)
	l.Close()
	l, res = openLog(t, o, Recovery{From: end, CleanEnd: end})
	if !res.FastPath || res.End != end {
		t.Fatalf("clean reopen %+v", res)
	}
	startCheckClose(t, l, recs)
}

// allocFS is the OS file system with an injectable block reservation
// (fail) and an injectable write error (failWrite).
type allocFS struct {
	vfs.FS
	fail      atomic.Pointer[error]
	failWrite atomic.Pointer[error]
	free      atomic.Int64 // > 0: Usage reports this much free space
}

func (a *allocFS) Usage(dir string) (vfs.DiskUsage, error) {
	u, err := a.FS.Usage(dir)
	if f := a.free.Load(); f > 0 {
		u.Free = uint64(f)
	}
	return u, err
}

type allocFile struct {
	vfs.File
	fs *allocFS
}

func (a *allocFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return allocFile{f, a}, nil
}

func (a *allocFS) Create(name string) (vfs.File, error) { return a.wrap(a.FS.Create(name)) }
func (a *allocFS) OpenRW(name string) (vfs.File, error) { return a.wrap(a.FS.OpenRW(name)) }
func (a *allocFS) Open(name string) (vfs.File, error)   { return a.wrap(a.FS.Open(name)) }

func (f allocFile) Map(n int) ([]byte, func() error, error) { return f.File.(vfs.Mapper).Map(n) }

func (f allocFile) WriteAt(b []byte, off int64) (int, error) {
	if p := f.fs.failWrite.Load(); p != nil {
		return 0, *p
	}
	return f.File.WriteAt(b, off)
}

func (f allocFile) Reserve(off, n int64) error {
	if p := f.fs.fail.Load(); p != nil {
		return *p
	}
	return f.File.(vfs.Reserver).Reserve(off, n)
}

// TestDiskFull: when the disk is full (with a staging ring: blocks
// cannot be reserved; without one: the write fails), the append fails
// with a clear error and writes nothing; what was acknowledged stays
// readable, and appends work again once space returns.
func TestDiskFull(t *testing.T) {
	t.Run("pwrite", func(t *testing.T) { testDiskFull(t, "") })
	t.Run("staged", func(t *testing.T) { testDiskFull(t, t.TempDir()) })
}

// logEnd is where the next record goes once everything appended is
// written: Written, or with a ring what was staged.
func logEnd(l *Log) int64 {
	if l.staging.Load() {
		return l.staged.Load()
	}
	return l.Written()
}

func testDiskFull(t *testing.T, stage string) {
	dir := t.TempDir()
	fs := &allocFS{FS: vfs.Default}
	o := mappedOpts(fs, dir, 64<<10)
	o.StagingDir = stage
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 10, 0)
	// Past the reserved 64 KiB (the whole segment) the next append needs a
	// new segment, whose reservation fails.
	for logEnd(l) < 60<<10 {
		recs = append(recs, appendN(t, l, 1, len(recs))...)
	}
	enospc := error(&os.PathError{Op: "fallocate", Path: "x", Err: syscall.ENOSPC})
	fail := &fs.fail
	if stage == "" {
		fail = &fs.failWrite
	}
	fail.Store(&enospc)
	before := logEnd(l)
	failed := 0
	for i := 0; i < 5000 && failed < 5; i++ {
		e, err := appendOne(l, 1000+i)
		if err == nil {
			if stage == "" {
				t.Fatalf("append at %d succeeded while writes fail", e.PhysOffset)
			}
			if e.PhysOffset+int64(e.Size) > 64<<10 {
				t.Fatalf("append at %d into a new segment whose blocks could not be reserved", e.PhysOffset)
			}
			before = logEnd(l) // still fitted in the reserved blocks
			continue
		}
		if !errors.Is(err, serr.ErrNotWritable) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want not-writable wrapping ENOSPC", err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no append failed while blocks could not be reserved")
	}
	if logEnd(l) != before {
		t.Fatalf("failed appends moved the log end from %d to %d", before, logEnd(l))
	}
	if l.Failed() != nil {
		t.Fatalf("log failed for good: %v", l.Failed())
	}
	checkRecords(t, l, recs)
	fail.Store(nil)
	recs = append(recs, appendN(t, l, 200, 2000)...)
	checkRecords(t, l, recs)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	end := recs[len(recs)-1].e.PhysOffset + int64(recs[len(recs)-1].e.Size)
	l, res := openLog(t, o, Recovery{From: end, CleanEnd: end})
	if !res.FastPath || res.End != end {
		t.Fatalf("reopen %+v, want end %d", res, end)
	}
	startCheckClose(t, l, recs)
}

// TestStagingFallback: on a file system that cannot reserve blocks, with
// a staging ring configured, the first append finds that out, writes what
// was staged and turns the ring off; the log writes with pwrite (and
// without a ring it always does): no tail past the log, same records.
func TestStagingFallback(t *testing.T) {
	t.Run("pwrite", func(t *testing.T) { testStagingFallback(t, "") })
	t.Run("staged", func(t *testing.T) { testStagingFallback(t, t.TempDir()) })
}

func testStagingFallback(t *testing.T, stage string) {
	dir := t.TempDir()
	fs := &allocFS{FS: vfs.Default}
	noAlloc := error(vfs.ErrNoAllocate)
	fs.fail.Store(&noAlloc)
	o := mappedOpts(fs, dir, 1<<20)
	o.StagingDir = stage
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 50, 0)
	if l.staging.Load() {
		t.Fatal("still staging though blocks cannot be reserved")
	}
	if sz := osSize(t, dir, 0); sz != l.Written() {
		t.Fatalf("file size %d, log end %d: want pwrite, no reserved tail", sz, l.Written())
	}
	checkRecords(t, l, recs)
	l.Stop(false)
	l.Close()
}

func appendOne(l *Log, i int) (Entry, error) {
	d, crc, err := message.Encode(nil, &message.Message{Topic: "T", Body: []byte(fmt.Sprintf("one-%d", i))})
	if err != nil {
		return Entry{}, err
	}
	ents, _, err := l.Append(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}})
	if err != nil {
		return Entry{}, err
	}
	return ents[0], nil
}

// TestFailedBatchKeepsQueueOffsets: a batch that fails part way (here
// its write at a roll fails) gives back the queue offsets it
// took, including those of queues a topic reset in the batch removed and
// of a queue the batch re-created after the reset: the next appends
// continue each queue where the answered records left it.
func TestFailedBatchKeepsQueueOffsets(t *testing.T) {
	dir := t.TempDir()
	fs := &allocFS{FS: vfs.Default}
	l, _ := openLog(t, mappedOpts(fs, dir, 64<<10), Recovery{From: -1, CleanEnd: -1})
	l.Start()
	defer func() {
		l.Stop(false)
		l.Close()
	}()
	recs := appendN(t, l, 12, 0) // queues T/0, T/1, T/2: next offsets 4, 4, 4
	rec := func(q int32, n int, reset bool) Record {
		d, crc, err := message.Encode(nil, &message.Message{Topic: "T", QueueID: q, Body: make([]byte, n)})
		if err != nil {
			t.Fatal(err)
		}
		return Record{Data: d, CRC: crc, Topic: "T", QueueID: q, ResetTopic: reset}
	}
	enospc := error(&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	fs.failWrite.Store(&enospc)
	batch := []Record{rec(0, 10, false), rec(-1, 10, true), rec(0, 10, false), rec(1, 10, false)}
	// Enough to need a new segment.
	for size := 0; size < 64<<10; size += 3 << 10 {
		batch = append(batch, rec(2, 3<<10, false))
	}
	before := l.Written()
	if _, _, err := l.Append(context.Background(), batch); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("batch whose write fails: %v, want ENOSPC", err)
	}
	if l.Written() != before {
		t.Fatalf("failed batch moved the log end from %d to %d", before, l.Written())
	}
	fs.failWrite.Store(nil)
	for q := int32(0); q < 3; q++ {
		ents, _, err := l.Append(context.Background(), []Record{rec(q, 10, false)})
		if err != nil {
			t.Fatal(err)
		}
		if ents[0].QueueOffset != 4 {
			t.Fatalf("queue T/%d: next append at queue offset %d, want 4", q, ents[0].QueueOffset)
		}
	}
	checkRecords(t, l, recs)
}

// TestStagingReservesAhead: with a staging ring the reserver reserves
// each active segment's blocks whole, the first at Start and each new one
// at its roll, without the writer's help; the files stay as long as the
// log.
func TestStagingReservesAhead(t *testing.T) {
	dir := t.TempDir()
	o := mappedOpts(vfs.Default, dir, 1<<20)
	o.StagingDir = t.TempDir()
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	// (The writer reserves 8 MiB at a time itself, a whole 1 MiB segment:
	// the reserver's own record tells its work apart.)
	waitReserved := func(seg *segment) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for seg.reservedUpTo() < 1<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("segment %d: reserved up to %d, want its whole size", seg.base, seg.reservedUpTo())
			}
			time.Sleep(time.Millisecond)
		}
		if got := osAllocated(t, dir, seg.base); got < 1<<20 {
			t.Fatalf("segment %d: %d bytes allocated, want its whole size", seg.base, got)
		}
	}
	l.mu.RLock()
	first := l.segs[0]
	l.mu.RUnlock()
	waitReserved(first) // before any append
	recs := appendN(t, l, 6000, 0)
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	if len(segs) < 2 {
		t.Fatalf("%d segments, want a roll", len(segs))
	}
	waitReserved(segs[len(segs)-1])
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	end := l.Written()
	checkFileLengths(t, dir, segs, end)
	l.Close()
	l, _ = openLog(t, o, Recovery{From: end, CleanEnd: end})
	startCheckClose(t, l, recs)
}

// TestStagingNoReserveOnFullDisk: with less free space than a segment and
// its headroom, the reserver leaves the segment to the writer's own
// reservations, and appends go on.
func TestStagingNoReserveOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	fs := &allocFS{FS: vfs.Default}
	fs.free.Store(1 << 20)
	o := mappedOpts(fs, dir, 1<<20)
	o.StagingDir = t.TempDir()
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 2000, 0)
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	for _, s := range segs {
		if r := s.reservedUpTo(); r != 0 {
			t.Fatalf("segment %d: the reserver reserved up to %d on a full disk", s.base, r)
		}
	}
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	checkFileLengths(t, dir, segs, l.Written())
	l.Close()
	end := recs[len(recs)-1].e.PhysOffset + int64(recs[len(recs)-1].e.Size)
	l, _ = openLog(t, o, Recovery{From: end, CleanEnd: end})
	startCheckClose(t, l, recs)
}

func (a *allocFS) CreateShared(name string, size int64) ([]byte, func() error, error) {
	return a.FS.(vfs.SharedMemory).CreateShared(name, size)
}
