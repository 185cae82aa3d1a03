package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// damagedStore writes n records over several segments, closes the store
// cleanly and returns its entries and messages.
func damagedStore(t *testing.T, fs *vfs.MemFS, n int) ([]AppendEntry, []*message.Message) {
	t.Helper()
	s := mustOpen(t, "/d", testOpts(fs))
	var ents []AppendEntry
	var msgs []*message.Message
	for i := 0; i < n; i++ {
		m := msg("T", int32(i%4), i)
		m.Body = append(m.Body, bytes.Repeat([]byte{'p'}, 100+i%50)...)
		ents = append(ents, appendOne(t, s, m))
		msgs = append(msgs, m)
	}
	waitAll(t, s)
	mustClose(t, s)
	return ents, msgs
}

// segmentOf returns the path of the segment holding log position pos
// and its base.
func segmentOf(t *testing.T, fs vfs.FS, pos int64) (string, int64) {
	t.Helper()
	names, err := fs.List("/d/commitlog")
	if err != nil {
		t.Fatal(err)
	}
	var path string
	var base int64
	for _, n := range names {
		var b int64
		if _, err := fmt.Sscanf(n, "%020d.log", &b); err == nil && b <= pos {
			path, base = filepath.Join("/d/commitlog", n), b
		}
	}
	return path, base
}

func flipByte(t *testing.T, fs vfs.FS, pos int64) {
	t.Helper()
	p, base := segmentOf(t, fs, pos)
	f, err := fs.OpenRW(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos-base); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], pos-base); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// logFiles returns the contents of every commit-log segment file of the
// store in dir on fs.
func logFiles(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.List(filepath.Join(dir, "commitlog"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") {
			continue
		}
		b, err := vfs.ReadFile(fs, filepath.Join(dir, "commitlog", n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// TestMidLogDamageRefusesOpen: one flipped byte in a record in the
// middle of the log, with the checkpoint gone (so recovery validates the
// whole log): Open fails with an error naming the segment, the position
// and what follows, and truncates nothing, wherever in the record the
// byte is (size, magic, CRC, position, body).
func TestMidLogDamageRefusesOpen(t *testing.T) {
	const n, bad = 300, 120
	for _, field := range []struct {
		name string
		off  int64
	}{{"size", 0}, {"magic", 5}, {"crc", 9}, {"position", 13}, {"body", -10}} {
		t.Run(field.name, func(t *testing.T) {
			fs := vfs.NewMem()
			ents, _ := damagedStore(t, fs, n)
			e := ents[bad]
			at := e.PhysOffset + field.off
			if field.off < 0 {
				at = e.PhysOffset + int64(e.Size) + field.off
			}
			flipByte(t, fs, at)
			if err := fs.Remove("/d/checkpoint"); err != nil {
				t.Fatal(err)
			}
			before := logFiles(t, fs, "/d")
			_, err := Open("/d", testOpts(fs))
			if err == nil {
				t.Fatal("open succeeded on a log damaged in the middle")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			derr, ok := errors.AsType[*DamageError](err)
			if !ok {
				t.Fatalf("no DamageError: %v", err)
			}
			seg, base := segmentOf(t, fs, e.PhysOffset)
			if derr.Segment != seg || derr.Pos != e.PhysOffset || derr.FileOffset != e.PhysOffset-base ||
				derr.Next != e.PhysOffset+int64(e.Size) || derr.FollowingRecords != n-bad-1 {
				t.Fatalf("damage %+v; want segment %s, position %d, next %d, %d records after", derr, seg, e.PhysOffset,
					e.PhysOffset+int64(e.Size), n-bad-1)
			}
			last := ents[n-1]
			if want := last.PhysOffset + int64(last.Size) - e.PhysOffset; derr.Following != want {
				t.Fatalf("following %d bytes, want %d", derr.Following, want)
			}
			for _, s := range []string{seg, fmt.Sprint(e.PhysOffset), "mqgate verify --data-dir /d", "mqgate repair --data-dir /d", "nothing was truncated"} {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("error %q does not say %q", err, s)
				}
			}
			after := logFiles(t, fs, "/d")
			if len(after) != len(before) {
				t.Fatalf("segments %d, were %d", len(after), len(before))
			}
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Fatalf("segment %s changed by the failed open", name)
				}
			}
			// The failed open let go of the directory.
			if _, err := Verify("/d", testOpts(fs)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDamageAfterCheckpointRefusesOpen: after a crash, recovery validates
// from the checkpoint's flushed position; damage there that valid records
// follow is refused the same way.
func TestDamageAfterCheckpointRefusesOpen(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, "/d", testOpts(fs))
	var ents []AppendEntry
	for i := 0; i < 200; i++ {
		ents = append(ents, appendOne(t, s, msg("T", int32(i%2), i)))
	}
	waitAll(t, s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.crash()
	// A checkpoint taken after record 100: recovery validates from there.
	const bad = 150
	cp := checkpoint{Flushed: ents[100].PhysOffset, Dispatched: ents[100].PhysOffset, LogEnd: ents[100].PhysOffset}
	if err := writeCheckpoint(fs, "/d", cp); err != nil {
		t.Fatal(err)
	}
	flipByte(t, fs, ents[bad].PhysOffset+int64(ents[bad].Size)-3)
	_, err := Open("/d", testOpts(fs))
	if d, ok := errors.AsType[*DamageError](err); !ok || d.Pos != ents[bad].PhysOffset {
		t.Fatalf("open: %v", err)
	}
}

// TestTornTailStillRecovers: damage in the last record, or garbage after
// it, is a torn tail: Open cuts it and keeps every record before it.
func TestTornTailStillRecovers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		last    bool // damage the last record (else append garbage after it)
		removeC bool
	}{{"last record", true, true}, {"garbage after", false, true}, {"last record after the checkpoint", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			ents, msgs := damagedStore(t, fs, 150)
			last := ents[len(ents)-1]
			keep := len(ents)
			if tc.last {
				flipByte(t, fs, last.PhysOffset+int64(last.Size)/2)
				keep--
			} else {
				p, base := segmentOf(t, fs, last.PhysOffset)
				f, _ := fs.OpenRW(p)
				f.WriteAt(bytes.Repeat([]byte{0xab}, 300), last.PhysOffset+int64(last.Size)-base)
				f.Sync()
				f.Close()
			}
			if tc.removeC {
				fs.Remove("/d/checkpoint")
			} else {
				// A crash after a checkpoint that the last records
				// followed.
				f, _ := fs.Create("/d/RUNNING")
				f.Close()
				at := ents[len(ents)-20].PhysOffset
				if err := writeCheckpoint(fs, "/d", checkpoint{Flushed: at, Dispatched: at, LogEnd: at}); err != nil {
					t.Fatal(err)
				}
			}
			s := mustOpen(t, "/d", testOpts(fs))
			if s.Recovery().Truncated == 0 {
				t.Fatalf("nothing cut: %+v", s.Recovery())
			}
			for i := 0; i < keep; i++ {
				m, err := s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
				if err != nil || !sameMessage(m, msgs[i]) {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			var total int64
			for q := int32(0); q < 4; q++ {
				_, hi := s.QueueRange("T", q)
				total += hi
			}
			if total != int64(keep) {
				t.Fatalf("queues hold %d, want %d", total, keep)
			}
			verifyConsistent(t, s)
			mustClose(t, s)
		})
	}
}

func TestVerifyAndRepairLogDamage(t *testing.T) {
	const n, bad = 300, 140
	fs := vfs.NewMem()
	ents, msgs := damagedStore(t, fs, n)
	clean, err := Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if clean.Damaged() || len(clean.Problems) != 0 || clean.Records != n || !clean.Checkpoint || clean.QueueEntries != n {
		t.Fatalf("clean store: %+v", clean)
	}
	e := ents[bad]
	flipByte(t, fs, e.PhysOffset+int64(e.Size)-7)
	fs.Remove("/d/checkpoint")

	r, err := Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Damaged() || r.ValidEnd != e.PhysOffset || r.Records != n-1 || r.RecordsAfter != n-bad-1 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Problems) != 1 {
		t.Fatalf("problems %+v", r.Problems)
	}
	p := r.Problems[0]
	seg, _ := segmentOf(t, fs, e.PhysOffset)
	if p.Part != "commitlog" || p.File != seg || p.Pos != e.PhysOffset || !p.Damage ||
		!strings.Contains(p.Repair, fmt.Sprintf("holding %d valid records", n-bad-1)) {
		t.Fatalf("problem %+v", p)
	}
	// Verify changed nothing: Open still refuses.
	if _, err := Open("/d", testOpts(fs)); err == nil {
		t.Fatal("open succeeded after verify")
	}
	before := logFiles(t, fs, "/d")

	rep, err := Repair(context.Background(), "/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if rep.SavedTo == "" || len(rep.Actions) == 0 {
		t.Fatalf("repair %+v", rep)
	}
	// The cut-off log is saved: its valid records are all there.
	rd, err := commitlog.OpenReader(fs, rep.SavedTo)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := fs.List(rep.SavedTo)
	if err != nil {
		t.Fatal(err)
	}
	rd.Close()
	var savedRecs int
	for _, name := range saved {
		b, _ := vfs.ReadFile(fs, filepath.Join(rep.SavedTo, name))
		orig := name
		if i := strings.Index(name, ".from-"); i > 0 {
			orig = name[:i]
			var off int64
			fmt.Sscanf(name[i+len(".from-"):], "%d", &off)
			if !bytes.Equal(b, before[orig][off:]) {
				t.Fatalf("saved %s differs from the segment's bytes past %d", name, off)
			}
		} else if !bytes.Equal(b, before[orig]) {
			t.Fatalf("saved segment %s differs", name)
		}
		for p := 0; p < len(b); {
			size, err := message.Verify(b[p:], testOpts(fs).Defaults().MaxRecordSize)
			if err != nil {
				p++
				continue
			}
			savedRecs++
			p += size
		}
	}
	if savedRecs != n-bad-1 {
		t.Fatalf("saved %d valid records, want %d", savedRecs, n-bad-1)
	}

	s := mustOpen(t, "/d", testOpts(fs))
	for i := 0; i < bad; i++ {
		m, err := s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
		if err != nil || !sameMessage(m, msgs[i]) {
			t.Fatalf("record %d after repair: %v", i, err)
		}
	}
	if _, w := s.LogRange(); w != e.PhysOffset {
		t.Fatalf("log ends at %d, want %d", w, e.PhysOffset)
	}
	verifyConsistent(t, s)
	var total int64
	for q := int32(0); q < 4; q++ {
		_, hi := s.QueueRange("T", q)
		total += hi
	}
	if total != bad {
		t.Fatalf("queues hold %d, want %d", total, bad)
	}
	// The repaired store takes appends.
	appendOne(t, s, msg("T", 1, 9999))
	mustClose(t, s)
	if r, err := Verify("/d", testOpts(fs)); err != nil || r.Damaged() {
		t.Fatalf("after repair: %+v, %v", r, err)
	}
}

// TestVerifyAndRepairViews: damaged consume-queue entries, index file and
// checkpoint are reported, and repaired by rebuilding from the log, which
// keeps every record.
func TestVerifyAndRepairViews(t *testing.T) {
	fs := vfs.NewMem()
	ents, msgs := damagedStore(t, fs, 200)
	// A queue entry below the checkpoint's dispatch position pointing at
	// the wrong record.
	cq := "/d/consumequeue/T/1/00000000000000000000.cq"
	f, err := fs.OpenRW(cq)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	f.ReadAt(b[:], 2*28)
	b[0] ^= 1
	f.WriteAt(b[:], 2*28)
	f.Close()
	// An index file's header.
	idx, _ := fs.List("/d/index")
	if len(idx) == 0 {
		t.Fatal("no index files")
	}
	f, _ = fs.OpenRW(filepath.Join("/d/index", idx[0]))
	f.WriteAt([]byte{0xff}, 30)
	f.Close()

	r, err := Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for _, p := range r.Problems {
		parts[p.Part] = p.Damage
	}
	if !r.Damaged() || !parts["consumequeue"] || !parts["index"] || r.ValidEnd != r.LogEnd {
		t.Fatalf("report %+v", r)
	}

	// A damaged checkpoint is reported too.
	f, _ = fs.OpenRW("/d/checkpoint")
	f.WriteAt([]byte{0xff}, 20)
	f.Close()
	r, err = Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	parts = map[string]bool{}
	for _, p := range r.Problems {
		parts[p.Part] = p.Damage
	}
	if !parts["checkpoint"] {
		t.Fatalf("report %+v", r)
	}

	rep, err := Repair(context.Background(), "/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if rep.SavedTo != "" {
		t.Fatalf("repair cut the log: %+v", rep)
	}
	s := mustOpen(t, "/d", testOpts(fs))
	for i, e := range ents {
		m, err := s.ReadMessage(e.PhysOffset, e.Size)
		if err != nil || !sameMessage(m, msgs[i]) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	verifyConsistent(t, s)
	if got := readAllQueue(t, s, "T", 1); len(got) != 50 {
		t.Fatalf("queue T/1 holds %d", len(got))
	}
	mustClose(t, s)
	if r, err := Verify("/d", testOpts(fs)); err != nil || r.Damaged() {
		t.Fatalf("after repair: %+v, %v", r, err)
	}
}

// TestVerifyTornTailIsNotDamage: a crash's torn tail is reported but is
// not damage, and Repair leaves it to Open.
func TestVerifyTornTailIsNotDamage(t *testing.T) {
	fs := vfs.NewMem()
	ents, _ := damagedStore(t, fs, 50)
	last := ents[len(ents)-1]
	flipByte(t, fs, last.PhysOffset+10)
	r, err := Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	// The clean checkpoint vouches for the last record: damage.
	if !r.Damaged() || r.Problems[0].Pos != last.PhysOffset || !r.Problems[0].Damage {
		t.Fatalf("report %+v", r)
	}
	fs.Remove("/d/checkpoint")
	r, err = Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || len(r.Problems) != 1 || r.Problems[0].Pos != last.PhysOffset || r.RecordsAfter != 0 {
		t.Fatalf("report %+v", r)
	}
}

func TestVerifyRepairLocked(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, "/d", testOpts(fs))
	defer mustClose(t, s)
	if _, err := Verify("/d", testOpts(fs)); !errors.Is(err, ErrLocked) {
		t.Fatalf("verify of an open store: %v", err)
	}
	if _, err := Repair(context.Background(), "/d", testOpts(fs)); !errors.Is(err, ErrLocked) {
		t.Fatalf("repair of an open store: %v", err)
	}
}

// TestVerifySegmentGap: a segment ending short of the next one's base
// (at a record boundary) is what a power loss leaves in async mode: a
// note, not damage, and Open drops the later segments as before.
func TestVerifySegmentGap(t *testing.T) {
	fs := vfs.NewMem()
	ents, _ := damagedStore(t, fs, 300)
	fs.Remove("/d/checkpoint")
	names, _ := fs.List("/d/commitlog")
	if len(names) < 3 {
		t.Fatalf("%d segments", len(names))
	}
	seg := filepath.Join("/d/commitlog", names[1])
	var base int64
	fmt.Sscanf(names[1], "%020d.log", &base)
	// Cut the second segment after its first two records.
	var k int
	for k = range ents {
		if ents[k].PhysOffset >= base {
			break
		}
	}
	cutAt := ents[k+2].PhysOffset
	f, _ := fs.OpenRW(seg)
	f.Truncate(cutAt - base)
	f.Close()
	r, err := Verify("/d", testOpts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || len(r.Problems) != 1 || r.Problems[0].Pos != cutAt || r.ValidEnd != cutAt {
		t.Fatalf("report %+v", r)
	}
	s := mustOpen(t, "/d", testOpts(fs))
	if _, w := s.LogRange(); w != cutAt {
		t.Fatalf("log end %d, want %d", w, cutAt)
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}
