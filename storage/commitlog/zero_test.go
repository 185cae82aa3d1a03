package commitlog

import (
	"context"
	"errors"
	"math/rand"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

func zeroOpts(fs vfs.FS, seg int64) Options {
	return Options{FS: fs, Dir: "/log", SegmentSize: seg, MaxRecordSize: 4 << 10, SyncMode: true, ZeroAhead: 16 << 10}
}

// waitZero waits until the zeroer has pre-zeroed past the written end.
func waitZero(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.ZeroTail() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("tail never pre-zeroed")
		}
		runtime.Gosched()
	}
}

// TestZeroTailRoll: with a zero tail in every active segment, a rolled
// segment ends exactly at the next one's base, durably, before the next
// exists; power loss with torn writes keeps every synced record; retention
// removes pre-zeroed segments.
func TestZeroTailRoll(t *testing.T) {
	fs := vfs.NewMem()
	fs.SetTearOverwrites(func(string) bool { return true })
	o := zeroOpts(fs, 16<<10)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	var recs []appended
	for i := 0; i < 10; i++ {
		recs = append(recs, appendN(t, l, 40, i*40)...)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	waitZero(t, l)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if got := fileSize(t, fs, s.Base); got != s.End-s.Base {
			t.Fatalf("closed segment %d: file size %d, want %d", s.Base, got, s.End-s.Base)
		}
	}
	rng := rand.New(rand.NewSource(9))
	for it := 0; it < 20; it++ {
		oc := o
		oc.FS = fs.CrashClone(rng)
		l2, res := openLog(t, oc, Recovery{From: -1, CleanEnd: -1})
		if res.End < recs[len(recs)-1].e.PhysOffset+int64(recs[len(recs)-1].e.Size) {
			t.Fatalf("iter %d: recovered end %d lost synced records", it, res.End)
		}
		l2.Start()
		checkRecords(t, l2, recs)
		l2.Stop(true)
		l2.Close()
	}
	// Retention of pre-zeroed (then cut) segments.
	if ok, err := l.RemoveOldest(l.Durable()); !ok || err != nil {
		t.Fatalf("remove oldest: %v %v", ok, err)
	}
	min := l.Min()
	var kept []appended
	for _, r := range recs {
		if r.e.PhysOffset >= min {
			kept = append(kept, r)
		}
	}
	recs = append(kept, appendN(t, l, 40, 1000)...)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, res := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	if res.Min != min || res.Truncated != 0 {
		t.Fatalf("reopen after retention %+v (min %d)", res, min)
	}
	startCheckClose(t, l, recs)
}

// zeroFailFS fails the zeroer's handles (opened with OpenRW; the writer
// creates fresh segments with Create) on demand.
type zeroFailFS struct {
	*vfs.MemFS
	failWrite, failSync atomic.Bool
}

type zeroFailFile struct {
	vfs.File
	fs *zeroFailFS
}

func (z *zeroFailFS) OpenRW(name string) (vfs.File, error) {
	f, err := z.MemFS.OpenRW(name)
	if err != nil {
		return nil, err
	}
	return &zeroFailFile{f, z}, nil
}

func (f *zeroFailFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failWrite.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

func (f *zeroFailFile) Sync() error {
	if f.fs.failSync.Load() {
		return syscall.EIO
	}
	return f.File.Sync()
}

// TestZeroFailures: pre-zeroing that cannot write (disk full) is skipped
// and appends go on extending the file; a failed fsync of the zero tail
// makes the log read-only like any failed fsync (it may have consumed a
// write-back error of record pages).
func TestZeroFailures(t *testing.T) {
	fs := &zeroFailFS{MemFS: vfs.NewMem()}
	fs.failWrite.Store(true)
	o := zeroOpts(fs, 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 200, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.ZeroTail() != 0 || fileSize(t, fs, 0) != l.Written() {
		t.Fatalf("zero tail %d, file %d, written %d", l.ZeroTail(), fileSize(t, fs, 0), l.Written())
	}
	checkRecords(t, l, recs)
	fs.failWrite.Store(false)
	fs.failSync.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; l.Failed() == nil; i++ {
		if time.Now().After(deadline) {
			t.Fatal("failed fsync of the zero tail did not fail the log")
		}
		d, crc, _ := message.Encode(nil, &message.Message{Topic: "T", Body: make([]byte, 512)})
		if _, _, err := l.Append(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}}); err != nil && !errors.Is(err, serr.ErrNotWritable) {
			t.Fatal(err)
		}
	}
	d, crc, _ := message.Encode(nil, &message.Message{Topic: "T", Body: []byte("x")})
	if _, _, err := l.Append(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}}); !errors.Is(err, serr.ErrNotWritable) {
		t.Fatalf("append after failed zero fsync: %v", err)
	}
	l.Stop(true)
	l.Close()
}
