package commitlog

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"path/filepath"
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

// TestZeroerRecovery: the active segment is longer than the log (a
// durable zero tail); after a power loss recovery ends the log at the
// first zero byte, drops the tail without counting it as damage, and the
// reopened log zeroes it again; a clean close leaves no tail and reopens on
// the fast path.
func TestZeroerRecovery(t *testing.T) {
	fs := vfs.NewMem()
	o := zeroOpts(fs, 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 60, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	waitZero(t, l)
	end := l.Written()
	sz := fileSize(t, fs, 0)
	if sz <= end {
		t.Fatalf("file size %d, log end %d: no zero tail", sz, end)
	}
	tail := make([]byte, sz-end)
	f, _ := fs.Open(filepath.Join("/log", segName(0)))
	f.ReadAt(tail, end)
	f.Close()
	if !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("tail past the log end is not zero")
	}
	crashed := fs.CrashClone(nil) // power loss: the zero tail was fsynced
	if fileSize(t, crashed, 0) != sz {
		t.Fatalf("zero tail not durable: %d after crash, %d before", fileSize(t, crashed, 0), sz)
	}
	l.Stop(true)
	l.Close()

	o.FS = crashed
	l, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.Truncated != 0 || res.FastPath {
		t.Fatalf("recovery %+v, want end %d, nothing truncated", res, end)
	}
	if got := fileSize(t, crashed, 0); got != end {
		t.Fatalf("file size after recovery %d, want %d", got, end)
	}
	l.Start()
	checkRecords(t, l, recs)
	waitZero(t, l) // the tail is re-established
	recs = append(recs, appendN(t, l, 10, 60)...)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	end = recs[len(recs)-1].e.PhysOffset + int64(recs[len(recs)-1].e.Size)
	if got := fileSize(t, crashed, 0); got != end {
		t.Fatalf("clean close left size %d, log end %d", got, end)
	}
	l, res = openLog(t, o, Recovery{From: end, CleanEnd: end})
	if !res.FastPath || res.End != end {
		t.Fatalf("clean reopen %+v", res)
	}
	startCheckClose(t, l, recs)
}

// TestZeroerTorn: damage inside the zeroed region after a crash: a torn
// record (a prefix of its bytes), a record that is complete but followed
// by garbage, and a stray byte deep in the zeros. Recovery keeps exactly
// the valid records, the log keeps working, and what is appended after
// recovery survives the next crash.
func TestZeroerTorn(t *testing.T) {
	base := vfs.NewMem()
	o := zeroOpts(base, 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 40, 0)
	l.Sync()
	waitZero(t, l)
	end := l.Written()
	l.Stop(true)
	l.Close()
	// A record as the writer would have put it at end.
	d, crc, _ := message.Encode(nil, &message.Message{Topic: "T", Body: []byte("not acknowledged")})
	message.Seal(d, crc, end, 99, 1)
	rng := rand.New(rand.NewSource(3))
	for it := 0; it < 60; it++ {
		fs := base.CrashClone(nil)
		f, err := fs.OpenRW(filepath.Join("/log", segName(0)))
		if err != nil {
			t.Fatal(err)
		}
		wantEnd := end
		switch it % 3 {
		case 0: // torn: a strict prefix of the record
			f.WriteAt(d[:1+rng.Intn(len(d)-1)], end)
		case 1: // complete record (written, never acknowledged), then garbage
			f.WriteAt(d, end)
			f.WriteAt([]byte{byte(1 + rng.Intn(255))}, end+int64(len(d))+int64(rng.Intn(64)))
			wantEnd = end + int64(len(d))
		case 2: // a stray byte somewhere in the zeros
			f.WriteAt([]byte{byte(1 + rng.Intn(255))}, end+int64(rng.Intn(8<<10)))
		}
		f.Sync()
		f.Close()
		oc := o
		oc.FS = fs
		l, res := openLog(t, oc, Recovery{From: 0, CleanEnd: -1})
		if res.End != wantEnd || res.Truncated == 0 {
			t.Fatalf("iter %d: recovery %+v, want end %d and damage counted", it, res, wantEnd)
		}
		l.Start()
		checkRecords(t, l, recs)
		if _, err := l.Read(wantEnd, message.MinSize); err == nil {
			t.Fatalf("iter %d: read past the recovered end", it)
		}
		more := appendN(t, l, 5, 1000)
		if more[0].e.PhysOffset != wantEnd {
			t.Fatalf("iter %d: append at %d, want %d", it, more[0].e.PhysOffset, wantEnd)
		}
		l.Sync()
		l.Stop(true)
		l.Close()
		oc.FS = fs.CrashClone(nil)
		l, _ = openLog(t, oc, Recovery{From: 0, CleanEnd: -1})
		l.Start()
		checkRecords(t, l, append(append([]appended(nil), recs...), more...))
		l.Stop(true)
		l.Close()
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
