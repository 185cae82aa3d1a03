package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

func syncOpts(fs vfs.FS, seg int64) Options {
	return Options{FS: fs, Dir: "/log", SegmentSize: seg, MaxRecordSize: 4 << 10, SyncMode: true}
}

func openLog(t *testing.T, o Options, rec Recovery) (*Log, RecoveryResult) {
	t.Helper()
	l, res, err := Open(o, rec)
	if err != nil {
		t.Fatal(err)
	}
	return l, res
}

type appended struct {
	e    Entry
	body string
}

func appendN(t *testing.T, l *Log, n, from int) []appended {
	t.Helper()
	var out []appended
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("body-%d-%s", i, bytes.Repeat([]byte{'x'}, i%300))
		d, crc, err := message.Encode(nil, &message.Message{Topic: "T", QueueID: int32(i % 3), Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		ents, _, err := l.Append(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T", QueueID: int32(i % 3)}})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, appended{ents[0], body})
	}
	return out
}

func checkRecords(t *testing.T, l *Log, recs []appended) {
	t.Helper()
	for i, r := range recs {
		b, err := l.Read(r.e.PhysOffset, int(r.e.Size))
		if err != nil {
			t.Fatalf("record %d at %d: %v", i, r.e.PhysOffset, err)
		}
		m, err := message.Decode(b, 4<<10)
		if err != nil || string(m.Body) != r.body || m.QueueOffset != r.e.QueueOffset {
			t.Fatalf("record %d at %d: %v", i, r.e.PhysOffset, err)
		}
	}
}

// startCheckClose starts l, checks that it reads back recs, and stops and
// closes it cleanly.
func startCheckClose(t *testing.T, l *Log, recs []appended) {
	t.Helper()
	l.Start()
	checkRecords(t, l, recs)
	l.Stop(false)
	l.Close()
}

func fileSize(t *testing.T, fs vfs.FS, base int64) int64 {
	t.Helper()
	sz, _, err := fs.Stat(filepath.Join("/log", segName(base)))
	if err != nil {
		t.Fatal(err)
	}
	return sz
}

// zeroTail writes n zero bytes past the end of l's active segment and
// fsyncs them: a file system can leave such a tail after a power loss
// (the new size reached the disk, the data did not).
func zeroTail(t *testing.T, fs vfs.FS, l *Log, n int) {
	t.Helper()
	segs := l.Segments()
	last := segs[len(segs)-1]
	f, err := fs.OpenRW(filepath.Join("/log", segName(last.Base)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), last.End-last.Base); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestZeroTailRecovery: the active segment is longer than the log (a
// durable zero tail); after a power loss recovery ends the log at the
// first zero byte and drops the tail without counting it as damage; a
// clean close leaves no tail and reopens on the fast path.
func TestZeroTailRecovery(t *testing.T) {
	fs := vfs.NewMem()
	o := syncOpts(fs, 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 60, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	end := l.Written()
	zeroTail(t, fs, l, 16<<10)
	sz := fileSize(t, fs, 0)
	if sz <= end {
		t.Fatalf("file size %d, log end %d: no zero tail", sz, end)
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

// TestZeroTailTorn: damage inside a zero tail (zeroTail) after a crash: a torn
// record (a prefix of its bytes), a record that is complete but followed
// by garbage, and a stray byte deep in the zeros. Recovery keeps exactly
// the valid records, the log keeps working, and what is appended after
// recovery survives the next crash.
func TestZeroTailTorn(t *testing.T) {
	base := vfs.NewMem()
	o := syncOpts(base, 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 40, 0)
	l.Sync()
	end := l.Written()
	zeroTail(t, base, l, 16<<10)
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

// TestRecoveredIsDurable: after a process crash, Open makes what it
// recovered durable, the records and the names of segments that no Sync
// covered (a roll leaves those to the next Sync), before Durable reports
// it: a power loss right after the reopen keeps all of it.
func TestRecoveredIsDurable(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{FS: fs, Dir: "/log", SegmentSize: 8 << 10, MaxRecordSize: 4 << 10, FlushInterval: time.Hour}
	if err := fs.MkdirAll("/log"); err != nil {
		t.Fatal(err)
	}
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	recs := appendN(t, l, 100, 0) // several segments, none fsynced
	end := l.Written()
	l.Stop(true) // a process crash: the page cache keeps everything
	l.Close()

	l, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || l.Durable() != end {
		t.Fatalf("reopen: %+v, durable %d, want %d", res, l.Durable(), end)
	}
	l.Close()

	o.FS = fs.CrashClone(nil) // a power loss now
	l, res = openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.Truncated != 0 {
		t.Fatalf("after the power loss: %+v, want end %d", res, end)
	}
	startCheckClose(t, l, recs)
}
