package consumequeue

import (
	"errors"
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
