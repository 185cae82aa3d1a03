package storage

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// checkReadEntries compares ReadEntries with ReadMessage entry by entry:
// the same message, or the same error.
func checkReadEntries(t *testing.T, s *Store, ents []QueueEntry) (failed int) {
	t.Helper()
	msgs, errs := make([]*message.Message, len(ents)), make([]error, len(ents))
	s.ReadEntries(ents, msgs, errs)
	for i, e := range ents {
		want, werr := s.ReadMessage(e.PhysOffset, e.Size)
		if fmt.Sprint(werr) != fmt.Sprint(errs[i]) {
			t.Fatalf("entry %d: error %v, ReadMessage's %v", i, errs[i], werr)
		}
		if werr != nil {
			failed++
			if msgs[i] != nil {
				t.Fatalf("entry %d: a message with the error", i)
			}
			continue
		}
		if !sameMessage(msgs[i], want) || msgs[i].PhysOffset != want.PhysOffset || msgs[i].Size != want.Size {
			t.Fatalf("entry %d: %+v, ReadMessage's %+v", i, msgs[i], want)
		}
	}
	return failed
}

func TestReadEntriesMatchesReadMessage(t *testing.T) {
	forEachMode(t, func(t *testing.T, o Options) {
		s := mustOpen(t, "/d", o)
		defer mustClose(t, s)
		// Batches of one queue lie back to back in the log; single
		// appends of two topics interleave; the log spans many segments.
		n := 0
		for round := 0; round < 12; round++ {
			var batch []*message.Message
			for i := 0; i < 1+round%5*7; i++ {
				m := msg("A", 0, n)
				m.Body = make([]byte, 100+n*37%900)
				batch = append(batch, m)
				n++
			}
			if _, err := s.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			appendOne(t, s, msg("B", 0, round))
			if round%3 == 0 {
				appendOne(t, s, msg("A", 0, n))
				n++
			}
		}
		waitAll(t, s)
		ents, err := s.ReadQueue("A", 0, 0, 1000)
		if err != nil || len(ents) != n {
			t.Fatalf("%d entries, %v", len(ents), err)
		}
		if f := checkReadEntries(t, s, ents); f != 0 {
			t.Fatalf("%d unreadable", f)
		}
		// Adjacent records were read with one copy: their bodies lie as
		// far apart in memory as in the log.
		msgs, errs := make([]*message.Message, len(ents)), make([]error, len(ents))
		s.ReadEntries(ents, msgs, errs)
		adjacent, shared := 0, 0
		for i := 1; i < len(ents); i++ {
			if ents[i].PhysOffset != ents[i-1].PhysOffset+int64(ents[i-1].Size) {
				continue
			}
			adjacent++
			gap := uintptr(unsafe.Pointer(unsafe.SliceData(msgs[i].Body))) - uintptr(unsafe.Pointer(unsafe.SliceData(msgs[i-1].Body)))
			if gap == uintptr(ents[i].PhysOffset-ents[i-1].PhysOffset) {
				shared++
			}
		}
		// Segments are 16 KiB: a run breaks at each segment end.
		if shared < adjacent*3/4 {
			t.Fatalf("%d of %d records that follow the one before in the log read together with it", shared, adjacent)
		}
		for from := 0; from < len(ents); from += 7 {
			checkReadEntries(t, s, ents[from:min(from+13, len(ents))])
		}
		// Entries out of order, repeated, and not at a record.
		mixed := []QueueEntry{ents[5], ents[4], ents[5], ents[6], ents[6]}
		odd := ents[8]
		odd.PhysOffset++
		mixed = append(mixed, odd, ents[9], ents[10])
		short := ents[11]
		short.Size -= 3
		mixed = append(mixed, ents[10], short, ents[12])
		if f := checkReadEntries(t, s, mixed); f != 2 {
			t.Fatalf("%d unreadable, want 2", f)
		}
		// A damaged record in the middle of a run fails alone.
		fs := o.FS.(*vfs.MemFS)
		bad := len(ents) / 2
		flipByte(t, fs, ents[bad].PhysOffset+int64(ents[bad].Size)-3)
		if f := checkReadEntries(t, s, ents); f != 1 {
			t.Fatalf("%d unreadable, want 1", f)
		}
	})
}
