package consumequeue

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

func entries(from, n int64) []Entry {
	out := make([]Entry, n)
	for i := range out {
		off := from + int64(i)
		out[i] = Entry{PhysOffset: 100 * (off + 1), Size: 50, TagHash: off * 3, StoreTime: 1000 + off}
	}
	return out
}

func TestAppendReadReopenTruncate(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open(Options{FS: fs, Dir: "/cq", EntriesPerFile: 10, TruncateAt: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := s.Ensure("%RETRY%g/x", 3)
	if err := q.Append(0, entries(0, 25)); err != nil {
		t.Fatal(err)
	}
	if err := q.Append(30, entries(30, 1)); !errors.Is(err, serr.ErrInvalid) {
		t.Fatalf("gap accepted: %v", err)
	}
	got, err := q.Read(8, 5) // crosses a file boundary
	if err != nil || len(got) != 5 || got[0].QueueOffset != 8 || got[4].PhysOffset != 1300 || got[2].StoreTime != 1010 {
		t.Fatalf("read %+v %v", got, err)
	}
	if off, _ := q.OffsetForTime(1012); off != 12 {
		t.Fatalf("offset for time %d", off)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Reopen dropping entries pointing at or past log position 1701.
	s, err = Open(Options{FS: fs, Dir: "/cq", EntriesPerFile: 10, TruncateAt: 1701})
	if err != nil {
		t.Fatal(err)
	}
	if topics := s.Topics(); len(topics) != 1 || topics[0] != "%RETRY%g/x" {
		t.Fatalf("topics %v", topics)
	}
	q = s.Get("%RETRY%g/x", 3)
	if q.Min() != 0 || q.Next() != 17 {
		t.Fatalf("after truncate %d..%d", q.Min(), q.Next())
	}
	if err := q.TrimBelow(1000); err != nil {
		t.Fatal(err)
	}
	if q.Min() != 9 {
		t.Fatalf("min after trim %d", q.Min())
	}
	if _, err := q.Read(3, 1); !errors.Is(err, serr.ErrOffsetMoved) {
		t.Fatalf("read below min: %v", err)
	}
	if err := s.DeleteTopic("%RETRY%g/x"); err != nil {
		t.Fatal(err)
	}
	if s.Get("%RETRY%g/x", 3) != nil {
		t.Fatal("deleted queue still there")
	}
}

func TestEscape(t *testing.T) {
	for _, topic := range []string{"a", "%DLQ%group", "x/y..z", "..", "日本", "a%2Fb"} {
		e := Escape(topic)
		u, err := Unescape(e)
		if err != nil || u != topic {
			t.Fatalf("%q -> %q -> %q %v", topic, e, u, err)
		}
		for _, c := range e {
			if c == '/' || c == '.' {
				t.Fatalf("escaped %q contains %q", e, c)
			}
		}
	}
}

// fileEntries is how many entries the queue's files hold (written out).
func fileEntries(t *testing.T, q *Queue) int64 {
	t.Helper()
	q.mu.RLock()
	defer q.mu.RUnlock()
	var n int64
	for _, f := range q.files {
		sz, err := f.f.Size()
		if err != nil {
			t.Fatal(err)
		}
		n += sz / EntrySize
	}
	return n
}

func checkRead(t *testing.T, q *Queue, from int64, max int, want int) {
	t.Helper()
	got, err := q.Read(from, max)
	if err != nil || len(got) != want {
		t.Fatalf("read %d+%d: %d entries, %v; want %d", from, max, len(got), err, want)
	}
	for i, e := range got {
		off := from + int64(i)
		if w := entries(off, 1)[0]; e.QueueOffset != off || e.PhysOffset != w.PhysOffset || e.TagHash != w.TagHash || e.StoreTime != w.StoreTime {
			t.Fatalf("entry %d = %+v, want %+v", off, e, w)
		}
	}
}

// The newest entries live in memory until the tail fills or a Sync/Close
// writes them out; reads see them either way, across the file/tail
// boundary and across file boundaries.
func TestTailWriteOut(t *testing.T) {
	fs := vfs.NewMem()
	s := openSet(t, fs, 100)
	q, _ := s.Ensure("t", 0)
	for off := int64(0); off < 150; off += 10 {
		if err := q.Append(off, entries(off, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if n := fileEntries(t, q); n != 0 {
		t.Fatalf("%d entries written before the tail filled", n)
	}
	checkRead(t, q, 95, 20, 20)
	if off, err := q.OffsetForTime(1000 + 120); err != nil || off != 120 {
		t.Fatalf("offset for time in the tail: %d %v", off, err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := fileEntries(t, q); n != 150 {
		t.Fatalf("after Sync the files hold %d entries, want 150", n)
	}
	checkRead(t, q, 0, 200, 150)

	// A full tail is written out by Append itself.
	per := int64(tailFlushBytes/EntrySize + 1)
	if err := q.Append(150, entries(150, per)); err != nil {
		t.Fatal(err)
	}
	if n := fileEntries(t, q); n != 150+per {
		t.Fatalf("full tail not written: files hold %d entries, want %d", n, 150+per)
	}
	if err := q.Append(150+per, entries(150+per, 5)); err != nil {
		t.Fatal(err)
	}
	checkRead(t, q, 140+per, 20, 15)

	// Close writes the tail out; a reopened set has every entry.
	s.Close()
	s = openSet(t, fs, 100)
	q = s.Get("t", 0)
	if q.Next() != 155+per {
		t.Fatalf("reopened next %d, want %d", q.Next(), 155+per)
	}
	checkRead(t, q, 0, int(200+per), int(155+per))
	// Appends continue after a reopen.
	if err := q.Append(155+per, entries(155+per, 3)); err != nil {
		t.Fatal(err)
	}
	checkRead(t, q, 150+per, 10, 8)
	s.Close()
}

// A deleted topic's tail is dropped, never written into removed files,
// and later write-outs of its queues do nothing.
func TestTailDroppedWithTopic(t *testing.T) {
	fs := vfs.NewMem()
	s := openSet(t, fs, 100)
	q, _ := s.Ensure("gone", 1)
	if err := q.Append(0, entries(0, 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := q.WriteOut(); err != nil {
		t.Fatal(err)
	}
	if err := q.Append(7, entries(7, 1)); !errors.Is(err, serr.ErrClosed) {
		t.Fatalf("append to a deleted queue: %v", err)
	}
	if names, _ := fs.List("/cq"); len(names) != 0 {
		t.Fatalf("files left after delete: %v", names)
	}
	s.Close()
}

// Readers run against appends, write-outs and syncs (run with -race).
func TestTailConcurrentReaders(t *testing.T) {
	fs := vfs.NewMem()
	s := openSet(t, fs, 64)
	defer s.Close()
	q, _ := s.Ensure("t", 0)
	const total = 5000
	done := make(chan struct{})
	errs := make(chan error, 3)
	// repeat runs step until done is closed or step fails.
	repeat := func(step func() error) {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if err := step(); err != nil {
				errs <- err
				return
			}
		}
	}
	for r := 0; r < 2; r++ {
		go repeat(func() error {
			from := max(q.Next()-40, 0)
			got, err := q.Read(from, 40)
			if err != nil {
				return err
			}
			for i, e := range got {
				if w := entries(from+int64(i), 1)[0]; e.PhysOffset != w.PhysOffset || e.StoreTime != w.StoreTime {
					return fmt.Errorf("entry %d = %+v, want %+v", from+int64(i), e, w)
				}
			}
			return nil
		})
	}
	go repeat(s.Sync)
	for off := int64(0); off < total; off += 7 {
		if err := q.Append(off, entries(off, 7)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// openSet opens the set under /cq keeping every entry.
func openSet(t *testing.T, fs vfs.FS, perFile int64) *Set {
	t.Helper()
	s, err := Open(Options{FS: fs, Dir: "/cq", EntriesPerFile: perFile, TruncateAt: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Stray names in the queue directories (another spelling of a queue id or
// of a file's base, a negative id) are left alone: they are neither
// loaded as queues or files nor allowed to disturb or delete the real
// ones.
func TestOpenSkipsStrayNames(t *testing.T) {
	fs := vfs.NewMem()
	s := openSet(t, fs, 10)
	q, _ := s.Ensure("T", 1)
	if err := q.Append(0, entries(0, 25)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	stray := []string{"/cq/T/01/" + fileName(0), "/cq/T/+1/" + fileName(0), "/cq/T/-1/" + fileName(0),
		"/cq/T/1/+0000000000000000000.cq", "/cq/T/1/0.cq", "/cq/T/1/-0000000000000000010.cq"}
	for _, p := range stray {
		if err := fs.MkdirAll(p[:strings.LastIndexByte(p, '/')]); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 3*EntrySize), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s = openSet(t, fs, 10)
	defer s.Close()
	if qs := s.QueueIDs("T"); len(qs) != 1 || qs[0] != 1 {
		t.Fatalf("queues of T: %v", qs)
	}
	q = s.Get("T", 1)
	if q.Min() != 0 || q.Next() != 25 {
		t.Fatalf("queue 1 holds %d..%d, want 0..25", q.Min(), q.Next())
	}
	checkRead(t, q, 0, 25, 25)
	for _, p := range stray {
		if _, _, err := fs.Stat(p); err != nil {
			t.Fatalf("stray %s: %v", p, err)
		}
	}
}
