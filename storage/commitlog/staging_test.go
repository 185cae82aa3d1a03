package commitlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

func stagingOpts(fs vfs.FS, dir, stage string, seg int64) Options {
	o := mappedOpts(fs, dir, seg)
	o.StagingDir = stage
	return o
}

// openHeld opens the log with its flusher held: appends are answered from
// the ring and nothing reaches the segment until a reader or Sync asks.
func openHeld(t *testing.T, o Options) *Log {
	t.Helper()
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	if l.stg == nil {
		t.Fatal("no staging ring")
	}
	l.noFlusher = true
	l.Start()
	return l
}

// bodyRecord encodes a record of topic T with body b.
func bodyRecord(t *testing.T, b []byte) Record {
	t.Helper()
	d, crc, err := message.Encode(nil, &message.Message{Topic: "T", Body: b})
	if err != nil {
		t.Fatal(err)
	}
	return Record{Data: d, CRC: crc, Topic: "T"}
}

func ringFile(t *testing.T, o Options) string {
	t.Helper()
	p, err := StagingPath(o.StagingDir, o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStagingReplay: records answered from the ring and never written to
// the segment (the process died) are written to the log by the next Open,
// byte for byte; a record torn in the ring ends the replay; the replayed
// log is whole again for appends and a clean reopen.
func TestStagingReplay(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 1<<20)
	l := openHeld(t, o)
	recs := appendN(t, l, 30, 0)
	if l.Written() != 0 {
		t.Fatalf("written %d with the flusher held", l.Written())
	}
	end := recs[29].e.PhysOffset + int64(recs[29].e.Size)
	if st := l.staged.Load(); st != end {
		t.Fatalf("staged %d, want %d", st, end)
	}
	// A crash: another Log opens the directory while this one is frozen.
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.Staged != end || res.StagedRecords != 30 || res.FastPath {
		t.Fatalf("recovery %+v, want all %d bytes of 30 records from the ring", res, end)
	}
	l2.Start()
	checkRecords(t, l2, recs)
	if err := l2.Stop(true); err != nil {
		t.Fatal(err)
	}
	l2.Close()
	l.Stop(true)
	l.Close()

	// The reopened log's ring starts empty: nothing left to replay.
	l3, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.Staged != 0 {
		t.Fatalf("second recovery %+v, want end %d and nothing from the ring", res, end)
	}
	l3.noFlusher = true
	l3.Start()
	more := appendN(t, l3, 20, 30)
	// Tear record 10 of these in the ring: the replay keeps 0-9.
	f, err := os.OpenFile(ringFile(t, o), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := more[10].e
	if _, err := f.WriteAt([]byte{0xff}, stagingData+torn.PhysOffset%l3.stg.size+int64(torn.Size)/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l4, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != torn.PhysOffset || res.StagedRecords != 10 {
		t.Fatalf("recovery %+v, want the 10 records before the torn one (end %d)", res, torn.PhysOffset)
	}
	l4.Start()
	checkRecords(t, l4, append(recs, more[:10]...))
	after := appendN(t, l4, 5, 100)
	if after[0].e.PhysOffset != torn.PhysOffset {
		t.Fatalf("next record at %d, want %d", after[0].e.PhysOffset, torn.PhysOffset)
	}
	if err := l4.Stop(false); err != nil {
		t.Fatal(err)
	}
	l4.Close()
	l3.Stop(true)
	l3.Close()
	if _, err := os.Stat(ringFile(t, o)); !os.IsNotExist(err) {
		t.Fatalf("ring file after a clean stop: %v", err)
	}
	final := l4.Written()
	l5, res := openLog(t, o, Recovery{From: final, CleanEnd: final})
	if !res.FastPath || res.End != final {
		t.Fatalf("clean reopen %+v", res)
	}
	l5.Start()
	checkRecords(t, l5, append(append(recs, more[:10]...), after...))
	l5.Stop(false)
	l5.Close()
}

// TestStagingOtherLog: a ring whose id is not the log's (the directory
// was removed and made again at the same path) is not replayed.
func TestStagingOtherLog(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 1<<20)
	l := openHeld(t, o)
	appendN(t, l, 10, 0)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The new directory has an id of its own already (its first run
	// could not make a ring, say): the old ring's header names another.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stagingIDFile), []byte("0123456789abcdef0123456789abcdef\n"+ringFile(t, o)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := (&Log{opts: o}).readStagingID(); !ok {
		t.Fatal("test id not readable")
	}
	l2, res := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	if res.End != 0 || res.Staged != 0 {
		t.Fatalf("recovery %+v: replayed another log's ring", res)
	}
	l2.Start()
	recs := appendN(t, l2, 3, 50)
	checkRecords(t, l2, recs)
	l2.Stop(false)
	l2.Close()
	l.Stop(true)
	l.Close()
}

// TestStagingReadsAnswered: a record is readable as soon as its append
// returns, though the flusher has not written it out yet; Sync writes
// and fsyncs everything answered.
func TestStagingReadsAnswered(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 1<<20)
	l := openHeld(t, o)
	recs := appendN(t, l, 5, 0)
	if a, end := l.Answered(), recs[4].e.PhysOffset+int64(recs[4].e.Size); l.Written() != 0 || a != end {
		t.Fatalf("written %d, answered %d with the flusher held; want 0 and %d", l.Written(), a, end)
	}
	// A reader by position (the store's ReadMessageAt) asks WrittenFor:
	// the ring is written out up to the end of the record asked for.
	if w, err := l.WrittenFor(recs[1].e.PhysOffset + 8); err != nil || w != recs[1].e.PhysOffset+int64(recs[1].e.Size) {
		t.Fatalf("WrittenFor: %d, %v; want the second record written out, no more", w, err)
	}
	recs = append(recs, appendN(t, l, 5, 5)...)
	checkRecords(t, l, recs[5:6])
	if w, end := l.Written(), recs[5].e.PhysOffset+int64(recs[5].e.Size); w != end {
		t.Fatalf("written %d after a read, want %d", w, end)
	}
	more := appendN(t, l, 5, 10)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	end := more[4].e.PhysOffset + int64(more[4].e.Size)
	if l.Written() != end || l.Durable() != end {
		t.Fatalf("after Sync written %d durable %d, want %d", l.Written(), l.Durable(), end)
	}
	checkRecords(t, l, append(recs, more...))
	l.Stop(false)
	l.Close()
}

// TestStagingFailedBatch: a batch that fails after part of it was staged
// (its roll into a new segment could not reserve blocks) is answered
// with the error and is not replayed after a crash; the ring full of
// unwritten records is written out by the writer itself.
func TestStagingFailedBatch(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	fs := &allocFS{FS: vfs.Default}
	o := stagingOpts(fs, dir, stage, 64<<10)
	l := openHeld(t, o)
	recs := appendN(t, l, 10, 0)
	for l.staged.Load() < 60<<10 {
		recs = append(recs, appendN(t, l, 1, len(recs))...)
	}
	before := l.staged.Load()
	var batch []Record
	for i := 0; i < 40; i++ {
		batch = append(batch, bodyRecord(t, bytes.Repeat([]byte{'b'}, 200)))
	}
	enospc := error(&os.PathError{Op: "fallocate", Path: "x", Err: syscall.ENOSPC})
	fs.fail.Store(&enospc)
	if _, _, err := l.Append(context.Background(), batch); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("batch across a segment whose blocks cannot be reserved: %v, want ENOSPC", err)
	}
	if l.staged.Load() != before {
		t.Fatalf("staged moved from %d to %d", before, l.staged.Load())
	}
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != before {
		t.Fatalf("recovery %+v, want end %d: the failed batch was replayed", res, before)
	}
	startCheckClose(t, l2, recs)
	l.Stop(true)
	l.Close()

	// A small ring (the minimum, 16 MiB) filled by a held flusher: the
	// writer writes it out to make room, and every record stays whole.
	dir = t.TempDir()
	o = stagingOpts(vfs.Default, dir, stage, 64<<20)
	l = openHeld(t, o)
	body := bytes.Repeat([]byte{'r'}, 4000)
	var n int
	for l.staged.Load() < 2*l.stg.size {
		if _, _, err := l.Append(context.Background(), []Record{bodyRecord(t, body)}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if l.Written() == 0 {
		t.Fatal("nothing written out though the ring filled twice")
	}
	l2, res = openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != l.staged.Load() {
		t.Fatalf("recovery %+v, want end %d", res, l.staged.Load())
	}
	l2.Start()
	var pos int64
	for i := 0; i < n; i++ {
		b, err := l2.Read(pos, int(res.End/int64(n)))
		if err != nil {
			t.Fatal(err)
		}
		m, err := message.Decode(b, 8<<10)
		if err != nil || !bytes.Equal(m.Body, body) || m.PhysOffset != pos {
			t.Fatalf("record %d at %d: %v", i, pos, err)
		}
		pos += int64(len(b))
	}
	l2.Stop(false)
	l2.Close()
	l.Stop(true)
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, stagingIDFile)); err != nil {
		t.Fatal(err)
	}
}

// TestStagingOrphans: opening a log removes the rings of logs whose
// directory is gone, and keeps those of logs that may still come back.
func TestStagingOrphans(t *testing.T) {
	stage := t.TempDir()
	crashed := func(dir string) string {
		o := stagingOpts(vfs.Default, dir, stage, 1<<20)
		l := openHeld(t, o)
		appendN(t, l, 3, 0)
		l.Stop(true)
		l.Close()
		p := ringFile(t, o)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("crashed log left no ring: %v", err)
		}
		return p
	}
	goneDir, keptDir := filepath.Join(t.TempDir(), "gone"), t.TempDir()
	gone, kept := crashed(goneDir), crashed(keptDir)
	if err := os.RemoveAll(goneDir); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(stage, "mqgate-unrelated.stage")
	if err := os.WriteFile(stray, []byte("not a ring"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _ := openLog(t, stagingOpts(vfs.Default, t.TempDir(), stage, 1<<20), Recovery{From: -1, CleanEnd: -1})
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("ring of a removed log directory: %v", err)
	}
	for _, p := range []string{kept, stray} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
	l.Stop(false)
	l.Close()
	l2, res := openLog(t, stagingOpts(vfs.Default, keptDir, stage, 1<<20), Recovery{From: 0, CleanEnd: -1})
	if res.StagedRecords != 3 {
		t.Fatalf("kept ring replayed %d records, want 3", res.StagedRecords)
	}
	l2.Stop(false)
	l2.Close()
}

// TestStagingNeedsReservation: on a file system that cannot reserve
// blocks (here the in-memory one) the log writes without a ring.
func TestStagingNeedsReservation(t *testing.T) {
	stage := t.TempDir()
	l, _ := openLog(t, stagingOpts(vfs.NewMem(), "/log", stage, 1<<20), Recovery{From: -1, CleanEnd: -1})
	if l.stg != nil {
		t.Fatal("a staging ring for files that cannot reserve blocks")
	}
	l.Start()
	recs := appendN(t, l, 5, 0)
	checkRecords(t, l, recs)
	l.Stop(false)
	l.Close()
}

// TestStagingLargeWrites: a write larger than half the ring goes to the
// segment directly, after what was staged before it; records staged after
// it are replayed behind it after a crash.
func TestStagingLargeWrites(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 64<<20)
	o.MaxRecordSize = 12 << 20
	l := openHeld(t, o)
	small := appendN(t, l, 3, 0)
	big := bytes.Repeat([]byte{'B'}, 9<<20)
	ents, _, err := l.Append(context.Background(), []Record{bodyRecord(t, big)})
	if err != nil {
		t.Fatal(err)
	}
	after := appendN(t, l, 3, 3)
	if f := l.flushed.Load(); f != ents[0].PhysOffset+int64(ents[0].Size) {
		t.Fatalf("flushed %d: the large record (at %d) was not written directly behind the staged ones", f, ents[0].PhysOffset)
	}
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.StagedRecords != 3 || res.End != after[2].e.PhysOffset+int64(after[2].e.Size) {
		t.Fatalf("recovery %+v, want the 3 records after the large one from the ring", res)
	}
	l2.Start()
	checkRecords(t, l2, small)
	checkRecords(t, l2, after)
	b, err := l2.Read(ents[0].PhysOffset, int(ents[0].Size))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := message.Decode(b, o.MaxRecordSize); err != nil || !bytes.Equal(m.Body, big) {
		t.Fatalf("large record: %v", err)
	}
	l2.Stop(false)
	l2.Close()
	l.Stop(true)
	l.Close()
}

// TestStagingRuns: the ring is written out in runs that end at record
// boundaries, at most flushRun long unless one record is longer. The
// flushed position is never inside a record: the writer reuses ring bytes
// below it, and a record a crash tore in the file must still be whole in
// the ring. A reopen at any point (a crash) replays exactly what was
// answered.
func TestStagingRuns(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 256<<20)
	o.MaxRecordSize = 2 << 20
	o.FlushInterval = time.Hour // no Sync writes the ring out meanwhile
	l := openHeld(t, o)
	boundary := map[int64]bool{0: true}
	var data [][]byte
	var ents []Entry
	checkFlushed := func(when string) {
		t.Helper()
		if f := l.flushed.Load(); !boundary[f] {
			t.Fatalf("%s: flushed %d is inside a record", when, f)
		}
	}
	for i := 0; l.staged.Load() < 5*l.stg.size/2; i++ {
		// Mostly single records, some batches of three (whose records'
		// ends the writer notes for the runs at once, noteRunEnds), and
		// now and then one record longer than a run.
		var recs []Record
		for k := 0; k < 1+2*min(i%7/6, 1); k++ {
			n := 200 + ((i+k)*7919)%20000
			if i%500 == 499 {
				n = flushRun * 3 / 2
			}
			recs = append(recs, bodyRecord(t, bytes.Repeat([]byte{byte(i + k)}, n)))
		}
		e, _, err := l.Append(context.Background(), recs)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		for k, r := range recs {
			boundary[e[k].PhysOffset+int64(e[k].Size)] = true
			data, ents = append(data, r.Data), append(ents, e[k])
		}
		checkFlushed("after an append")
	}
	if l.flushed.Load() == 0 {
		t.Fatal("the ring filled, and nothing was written out to make room")
	}
	// Half of what is left goes out in runs, as the flusher writes it.
	half := l.flushed.Load() + (l.staged.Load()-l.flushed.Load())/2
	for l.flushed.Load() < half {
		from := l.flushed.Load()
		if !l.flushNext() {
			t.Fatal("flushNext: nothing more to write")
		}
		to := l.flushed.Load()
		checkFlushed("after a run")
		if to-from > flushRun && !(boundary[from] && to-from == int64(len(data[recordAt(ents, from)]))) {
			t.Fatalf("run %d..%d: %d bytes, more than %d and not one record", from, to, to-from, flushRun)
		}
		if l.Written() != to {
			t.Fatalf("written %d after a run to %d", l.Written(), to)
		}
	}
	// A crash now: the next Open finds part of the log in the file, the
	// rest in the ring.
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != l.staged.Load() || res.Staged != l.staged.Load()-l.flushed.Load() {
		t.Fatalf("recovery %+v, want end %d with %d bytes from the ring", res, l.staged.Load(), l.staged.Load()-l.flushed.Load())
	}
	l2.Start()
	for i, e := range ents {
		b, err := l2.Read(e.PhysOffset, int(e.Size))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(b, data[i]) {
			t.Fatalf("record %d at %d differs", i, e.PhysOffset)
		}
	}
	l2.Stop(false)
	l2.Close()
	l.Stop(true)
	l.Close()
}

// recordAt is the index of the entry at position pos.
func recordAt(ents []Entry, pos int64) int {
	for i, e := range ents {
		if e.PhysOffset == pos {
			return i
		}
	}
	return -1
}

// TestStagingDirChanged: after a crash, the next Open replays the ring the
// last run wrote even when the staging directory has been changed, or
// turned off, in between, and removes it from the former directory.
func TestStagingDirChanged(t *testing.T) {
	dir, stageA, stageB := t.TempDir(), t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stageA, 1<<20)
	l := openHeld(t, o)
	recs := appendN(t, l, 20, 0)
	ringA := ringFile(t, o)

	// Crash; the next run is configured with another directory.
	o.StagingDir = stageB
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.StagedRecords != 20 {
		t.Fatalf("recovery %+v: want the 20 records of the ring in %s", res, stageA)
	}
	if _, err := os.Stat(ringA); !os.IsNotExist(err) {
		t.Fatalf("the replayed ring in the former directory: %v, want it removed", err)
	}
	if _, last, _ := l2.readStagingID(); last != ringFile(t, o) {
		t.Fatalf("id file records ring %q, want %q", last, ringFile(t, o))
	}
	l2.noFlusher = true
	l2.Start()
	checkRecords(t, l2, recs)
	recs = append(recs, appendN(t, l2, 15, 20)...)

	// Crash again; the next run has no staging directory at all.
	o.StagingDir = ""
	l3, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.StagedRecords != 15 {
		t.Fatalf("recovery %+v: want the 15 records of the ring in %s", res, stageB)
	}
	startCheckClose(t, l3, recs)
	for _, s := range []string{stageA, stageB} {
		if names, _ := os.ReadDir(s); len(names) != 0 {
			t.Fatalf("%s still holds %d files", s, len(names))
		}
	}
	l2.Stop(true)
	l2.Close()
	l.Stop(true)
	l.Close()
}

// TestStagingLogMoved: a log directory moved after a crash finds the ring
// its last run wrote (named after the old path), replays it, and removes
// it; a copy of a crashed log directory replays the ring but leaves it to
// the original, which still needs it.
func TestStagingLogMoved(t *testing.T) {
	base, stage := t.TempDir(), t.TempDir()
	dirA, dirB, dirC := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	o := stagingOpts(vfs.Default, dirA, stage, 1<<20)
	l := openHeld(t, o)
	recs := appendN(t, l, 20, 0)
	ringA := ringFile(t, o)
	l.Stop(true) // a crash: the ring stays
	l.Close()

	if err := os.CopyFS(dirC, os.DirFS(dirA)); err != nil {
		t.Fatal(err)
	}
	// The copy first, while the original is still there; then the
	// original, moved.
	for _, d := range []string{dirC, dirB} {
		if d == dirB {
			if err := os.Rename(dirA, dirB); err != nil {
				t.Fatal(err)
			}
		}
		o.Dir = d
		l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
		if res.StagedRecords != 20 {
			t.Fatalf("%s: recovery %+v, want the 20 records of the ring", d, res)
		}
		_, err := os.Stat(ringA)
		if d == dirC && err != nil {
			t.Fatalf("the copy removed the ring its original needs: %v", err)
		}
		if d == dirB && !os.IsNotExist(err) {
			t.Fatalf("the moved log left its former ring: %v", err)
		}
		startCheckClose(t, l2, recs)
	}
}

// TestStagingRingCutShort: a ring file shorter than its header says (not
// one this code wrote whole) is ignored with a warning, not read past its
// end; the log opens with what its files hold.
func TestStagingRingCutShort(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 1<<20)
	l := openHeld(t, o)
	appendN(t, l, 10, 0)
	if err := os.Truncate(ringFile(t, o), stagingData+4096); err != nil {
		t.Fatal(err)
	}
	l2, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != 0 || res.Staged != 0 {
		t.Fatalf("recovery %+v from a ring cut short", res)
	}
	l2.Start()
	checkRecords(t, l2, appendN(t, l2, 3, 10))
	l2.Stop(false)
	l2.Close()
	l.Stop(true)
	l.Close()
}

// TestStagingMemFS: the ring goes through the file system seam, so the
// in-memory file system models it: records answered from the ring are in
// the log after a process crash (the store abandoned, its file system
// kept) and a reopen; a power loss (CrashClone) takes the ring with it,
// and what was fsynced survives it.
func TestStagingMemFS(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/shm"); err != nil {
		t.Fatal(err)
	}
	o := stagingOpts(fs, "/log", "/shm", 1<<20)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	if l.stg == nil {
		t.Fatal("no staging ring on the in-memory file system")
	}
	l.Start()
	synced := appendN(t, l, 20, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Stop(false)
	l.Close()

	l = openHeld(t, o)
	staged := appendN(t, l, 30, 20)
	if w := l.Written(); w != staged[0].e.PhysOffset {
		t.Fatalf("written %d with the flusher held, want %d", w, staged[0].e.PhysOffset)
	}
	end := staged[29].e.PhysOffset + int64(staged[29].e.Size)
	power := fs.CrashClone(nil) // the machine dies now
	l.Stop(true)                // the process dies now
	l.Close()
	if _, _, err := power.Stat(ringFile(t, o)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ring after a power loss: %v", err)
	}

	l, res := openLog(t, o, Recovery{From: 0, CleanEnd: -1})
	if res.End != end || res.StagedRecords != 30 || res.Staged != end-staged[0].e.PhysOffset {
		t.Fatalf("reopen after a process crash: %+v, want the 30 staged records replayed (end %d)", res, end)
	}
	l.Start()
	checkRecords(t, l, append(append([]appended(nil), synced...), staged...))
	l.Stop(true)
	l.Close()

	op := o
	op.FS = power
	l, res = openLog(t, op, Recovery{From: 0, CleanEnd: -1})
	if res.Staged != 0 || res.End != staged[0].e.PhysOffset {
		t.Fatalf("reopen after a power loss: %+v, want the fsynced log (end %d) and no ring", res, staged[0].e.PhysOffset)
	}
	l.Start()
	checkRecords(t, l, synced)
	l.Stop(false)
	l.Close()
}
