package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// salvageOpts leaves the bookkeeping topic SYS out of salvages, as the
// broker leaves out its own.
func salvageOpts(fs vfs.FS) Options {
	o := testOpts(fs)
	o.SalvageTopic = func(t string) bool { return t != "SYS" }
	return o
}

// salvageFixture is a store with a damaged record in the middle of its
// log: what was written, and what a salvage must bring back.
type salvageFixture struct {
	ents []AppendEntry
	msgs []*message.Message
	bad  int // index of the damaged record
	// kept are the indexes of the messages a salvage keeps in queues
	// after the damage, per topic and queue, in order.
	after map[string][]int
}

// writeSalvageFixture writes n records to topic T (4 queues), with a SYS
// record every 7th and, after the damage, a deletion of topic D between
// two of its records; group G commits offsets. It damages record bad,
// and closes the store.
func writeSalvageFixture(t *testing.T, fs *vfs.MemFS, n, bad int) *salvageFixture {
	t.Helper()
	f := &salvageFixture{bad: bad, after: map[string][]int{}}
	s := mustOpen(t, "/d", salvageOpts(fs))
	for i := 0; i < n; i++ {
		topic := "T"
		switch {
		case i%7 == 3:
			topic = "SYS"
		case i == bad+5 || i == bad-5 || i == bad+20:
			topic = "D"
		}
		m := msg(topic, int32(i%4), i)
		if topic == "D" {
			m.QueueID = 0
		}
		if i == bad+10 {
			if err := s.DeleteTopic(context.Background(), "D"); err != nil {
				t.Fatal(err)
			}
		}
		f.ents = append(f.ents, appendOne(t, s, m))
		f.msgs = append(f.msgs, m)
		if i > bad && topic != "SYS" {
			k := fmt.Sprintf("%s/%d", topic, m.QueueID)
			f.after[k] = append(f.after[k], i)
		}
	}
	waitAll(t, s)
	md := s.Meta()
	// G consumed T/1 up to a record before the damage, T/0 (the queue of
	// the damaged record) and T/2 up to one well after it, T/3 to the
	// queue's end.
	md.CommitOffset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 1}, f.ents[bad-40].QueueOffset)
	md.CommitOffset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 0}, f.queueOffsetOf(0, bad+40))
	md.CommitOffset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 2}, f.queueOffsetOf(2, bad+40))
	_, end3 := s.QueueRange("T", 3)
	md.CommitOffset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 3}, end3)
	mustClose(t, s)
	e := f.ents[bad]
	flipByte(t, fs, e.PhysOffset+int64(e.Size)-7)
	fs.Remove("/d/checkpoint")
	return f
}

// queueOffsetOf is the queue offset of the first T record of queue q at
// or after index i.
func (f *salvageFixture) queueOffsetOf(q int32, i int) int64 {
	for ; i < len(f.msgs); i++ {
		if f.msgs[i].Topic == "T" && f.msgs[i].QueueID == q {
			return f.ents[i].QueueOffset
		}
	}
	panic("no such record")
}

// check asserts that s holds every record of the fixture but the damaged
// one and the SYS records after it, each once, in order per queue, found
// by id and key; and that G's offsets point where they should.
func (f *salvageFixture) check(t *testing.T, s *Store) {
	t.Helper()
	verifyConsistent(t, s)
	for _, q := range []int32{0, 1, 2, 3} {
		var want []int
		for i, m := range f.msgs {
			if m.Topic == "T" && m.QueueID == q && i != f.bad {
				want = append(want, i)
			}
		}
		got := readAllQueue(t, s, "T", q)
		if len(got) != len(want) {
			t.Fatalf("T/%d holds %d messages, want %d", q, len(got), len(want))
		}
		for j, i := range want {
			if got[j].UniqKey() != f.msgs[i].UniqKey() || string(got[j].Body) != string(f.msgs[i].Body) {
				t.Fatalf("T/%d offset %d holds %s, want %s", q, j, got[j].UniqKey(), f.msgs[i].UniqKey())
			}
		}
	}
	// D: the deletion after the damage dropped the record before it.
	d := readAllQueue(t, s, "D", 0)
	if len(d) != 1 || d[0].UniqKey() != f.msgs[f.bad+20].UniqKey() || d[0].QueueOffset != 0 {
		t.Fatalf("D/0 after the salvage: %d messages %v", len(d), d)
	}
	for i, m := range f.msgs {
		if i == f.bad || m.Topic != "T" {
			continue
		}
		ms, err := s.LookupByID("T", m.UniqKey(), 4)
		if err != nil || len(ms) != 1 || !sameProps(ms[0], m, i > f.bad) {
			t.Fatalf("message %d by id: %v %v", i, ms, err)
		}
		ks, err := s.LookupByKey("T", fmt.Sprintf("k%d", i), 0, 1<<62, 4)
		if err != nil || len(ks) != 1 || ks[0].UniqKey() != m.UniqKey() {
			t.Fatalf("message %d by key: %v %v", i, ks, err)
		}
	}
	// SYS records after the damage are left out; those before stay.
	var sys int
	for q := int32(0); q < 4; q++ {
		sys += len(readAllQueue(t, s, "SYS", q))
	}
	var wantSys int
	for i, m := range f.msgs {
		if m.Topic == "SYS" && i < f.bad {
			wantSys++
		}
	}
	if sys != wantSys {
		t.Fatalf("SYS holds %d records, want the %d before the damage", sys, wantSys)
	}
	// Offsets: T/1 before the damage is unchanged; T/0 (moved down by the
	// damaged record) and T/2 point at the copy of the first record G had
	// not consumed; T/3 at the queue's end.
	md := s.Meta()
	if off, _ := md.Offset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 1}); off != f.ents[f.bad-40].QueueOffset {
		t.Fatalf("G's T/1 offset moved to %d", off)
	}
	for _, q := range []int32{0, 2} {
		off, _ := md.Offset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: q})
		ms, _, err := s.ReadMessages("T", q, off, 1)
		if want := f.indexAt(q, f.bad+40); err != nil || len(ms) != 1 || ms[0].UniqKey() != f.msgs[want].UniqKey() {
			t.Fatalf("G's T/%d offset %d reads %v %v, want message %d", q, off, ms, err, want)
		}
	}
	off3, _ := md.Offset(metastore.OffsetKey{Group: "G", Topic: "T", QueueID: 3})
	if _, end := s.QueueRange("T", 3); off3 != end {
		t.Fatalf("G's T/3 offset %d, want the queue's end %d", off3, end)
	}
}

func (f *salvageFixture) indexAt(q int32, i int) int {
	for ; i < len(f.msgs); i++ {
		if f.msgs[i].Topic == "T" && f.msgs[i].QueueID == q {
			return i
		}
	}
	return -1
}

// sameProps: a's properties are b's, plus the salvage mark on a copy.
func sameProps(a, b *message.Message, copied bool) bool {
	if _, ok := a.Get(message.PropSalvaged); ok != copied {
		return false
	}
	if !sameMessage(&message.Message{Topic: a.Topic, QueueID: a.QueueID, Body: a.Body, BornTime: a.BornTime, Properties: a.Properties}, b) && !copied {
		return false
	}
	for _, p := range b.Properties {
		if v, ok := a.Get(p.Key); !ok || v != p.Value {
			return false
		}
	}
	return a.BornHost == b.BornHost && a.BornTime == b.BornTime
}

// Verify says what a salvage would bring back; Salvage cuts the log at
// the damage, appends the valid records after it again (new offsets, the
// same ids, keys and properties), leaves the broker's bookkeeping out,
// replays a topic deletion in its place, and moves committed offsets so
// that no consumer skips a copy. A second salvage changes nothing.
func TestSalvageAppendsTheRecordsAfterTheDamage(t *testing.T) {
	const n, bad = 220, 100
	fs := vfs.NewMem()
	f := writeSalvageFixture(t, fs, n, bad)
	opts := salvageOpts(fs)

	r, err := Verify("/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	var salvageable, skipped int
	first, last := int64(-1), int64(-1)
	for i := bad + 1; i < n; i++ {
		if f.msgs[i].Topic == "SYS" {
			skipped++
			continue
		}
		salvageable++
		if first < 0 {
			first = f.ents[i].PhysOffset
		}
		last = f.ents[i].PhysOffset
	}
	salvageable++ // the deletion of D
	if !r.Damaged() || r.Salvageable != salvageable || r.SalvageSkipped != skipped || r.SalvageFirst != first || r.SalvageLast != last ||
		r.Salvageable+r.SalvageSkipped != r.RecordsAfter {
		t.Fatalf("verify: salvageable %d (want %d), skipped %d (want %d), positions %d to %d (want %d to %d), records after %d",
			r.Salvageable, salvageable, r.SalvageSkipped, skipped, r.SalvageFirst, r.SalvageLast, first, last, r.RecordsAfter)
	}

	rep, err := Salvage(context.Background(), "/d", opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Salvaged) != 1 || rep.Salvaged[0].Appended != salvageable || rep.Salvaged[0].Skipped != skipped ||
		rep.Salvaged[0].Already != 0 || rep.Salvaged[0].Offsets != 1 || rep.SavedTo == "" {
		t.Fatalf("salvage report %+v", rep)
	}
	s := mustOpen(t, "/d", opts)
	f.check(t, s)
	mustClose(t, s)

	after, err := Verify("/d", opts)
	if err != nil || after.Damaged() || len(after.PendingSalvages) != 0 || len(after.Problems) != 0 {
		t.Fatalf("verify after the salvage: %+v %v", after, err)
	}
	again, err := Salvage(context.Background(), "/d", opts)
	if err != nil || len(again.Salvaged) != 0 || len(again.Actions) != 0 {
		t.Fatalf("second salvage: %+v %v", again, err)
	}
	s = mustOpen(t, "/d", opts)
	f.check(t, s)
	mustClose(t, s)
}

// A salvage that fails at any file-system operation (an injected error,
// then a power loss that keeps only what was fsynced) leaves a store
// that opens once the log was cut, and a second salvage then brings back
// every record exactly once.
func TestSalvageCrashAtEveryStep(t *testing.T) {
	const n, bad = 120, 50
	base := vfs.NewMem()
	f := writeSalvageFixture(t, base, n, bad)
	errInjected := errors.New("injected")
	failed := 0
	for k := 1; ; k++ {
		mem := base.CrashClone(nil)
		// Counted from the salvage's goroutine and the store's (writer,
		// dispatcher) alike.
		var ops atomic.Int64
		efs := vfs.NewErrorFS(mem, func(op vfs.Op, path string) error {
			switch op {
			case vfs.OpRead, vfs.OpList, vfs.OpOpen:
				return nil
			}
			if ops.Add(1) == int64(k) {
				return errInjected
			}
			return nil
		})
		opts := salvageOpts(efs)
		opts.FlushInterval = time.Hour // no background fsyncs: the steps are the salvage's own
		_, err := Salvage(context.Background(), "/d", opts)
		if err == nil && ops.Load() < int64(k) {
			break // past the last step
		}
		// The error is the injected one, or what the store made of it (a
		// store that failed an fsync refuses writes); a failure the store
		// retried past (err == nil) is checked the same way.
		if err != nil && !errors.Is(err, errInjected) {
			t.Logf("step %d: %v", k, err)
		}
		failed++
		crashed := mem.CrashClone(nil)
		opts = salvageOpts(crashed)
		r, err := Verify("/d", opts)
		if err != nil {
			t.Fatalf("step %d: verify after the crash: %v", k, err)
		}
		if !r.Damaged() {
			s, err := Open("/d", opts)
			if err != nil {
				t.Fatalf("step %d: the cut store does not open: %v", k, err)
			}
			mustClose(t, s)
		}
		if _, err := Salvage(context.Background(), "/d", opts); err != nil {
			t.Fatalf("step %d: second salvage: %v", k, err)
		}
		s := mustOpen(t, "/d", opts)
		f.check(t, s)
		mustClose(t, s)
		if r, err := Verify("/d", opts); err != nil || r.Damaged() || len(r.PendingSalvages) != 0 {
			t.Fatalf("step %d: after the second salvage: %+v %v", k, r, err)
		}
	}
	if failed < 20 {
		t.Fatalf("only %d steps failed: the injection missed the salvage", failed)
	}
	t.Logf("%d failure points", failed)
}

// Verify reports a salvage a crash interrupted, with what it has left to
// do, as a note (the store opens).
func TestVerifyReportsAnInterruptedSalvage(t *testing.T) {
	const n, bad = 120, 50
	base := vfs.NewMem()
	writeSalvageFixture(t, base, n, bad)
	// Fail the last step, marking the saved directory done: every copy is
	// appended.
	var cut bool
	efs := vfs.NewErrorFS(base, func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.HasSuffix(path, "/"+salvageMark) {
			return errors.New("injected")
		}
		if op == vfs.OpTruncate {
			cut = true
		}
		return nil
	})
	if _, err := Salvage(context.Background(), "/d", salvageOpts(efs)); err == nil || !cut {
		t.Fatalf("salvage: %v (cut %v)", err, cut)
	}
	r, err := Verify("/d", salvageOpts(base))
	if err != nil {
		t.Fatal(err)
	}
	if r.Damaged() || len(r.PendingSalvages) != 1 || r.PendingSalvages[0].Records == 0 ||
		r.PendingSalvages[0].Done != r.PendingSalvages[0].Records {
		t.Fatalf("verify: %+v", r)
	}
	if len(r.Problems) != 1 || r.Problems[0].Part != "salvage" || r.Problems[0].Damage {
		t.Fatalf("problems: %+v", r.Problems)
	}
}

// A salvage of more saved bytes than two reads of the walk (4 MiB each)
// copies every record intact.
func TestSalvageLargeTail(t *testing.T) {
	const n, bad = 1400, 20
	fs := vfs.NewMem()
	opts := salvageOpts(fs)
	opts.SegmentSize = 16 << 20 // one segment: the saved part is one file
	s := mustOpen(t, "/d", opts)
	var ents []AppendEntry
	var msgs []*message.Message
	for i := 0; i < n; i++ {
		m := msg("T", int32(i%2), i)
		m.Body = []byte(fmt.Sprintf("%04d%s", i, strings.Repeat(string(rune('a'+i%26)), 7000)))
		ents = append(ents, appendOne(t, s, m))
		msgs = append(msgs, m)
	}
	mustClose(t, s)
	flipByte(t, fs, ents[bad].PhysOffset+int64(ents[bad].Size)-7)
	fs.Remove("/d/checkpoint")
	rep, err := Salvage(context.Background(), "/d", opts)
	if err != nil || len(rep.Salvaged) != 1 || rep.Salvaged[0].Appended != n-bad-1 {
		t.Fatalf("salvage: %+v %v", rep, err)
	}
	s = mustOpen(t, "/d", opts)
	defer mustClose(t, s)
	for i := bad + 1; i < n; i++ {
		ms, err := s.LookupByID("T", msgs[i].UniqKey(), 2)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != string(msgs[i].Body) {
			t.Fatalf("message %d after the salvage: %v", i, err)
		}
	}
}
