package storage

import (
	"errors"
	"testing"
)

// With a staging ring the records may still be in the ring when read:
// a read by position writes them out first.
func TestReadMessageAtFindsRecordsByPositionOnly(t *testing.T) {
	forEachMode(t, testReadMessageAt)
}

func testReadMessageAt(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	defer mustClose(t, s)
	var ents []AppendEntry
	for i := range 5 {
		ents = append(ents, appendOne(t, s, msg("T", 0, i)))
	}
	for i, e := range ents {
		m, err := s.ReadMessageAt(e.PhysOffset)
		if err != nil {
			t.Fatalf("record %d at %d: %v", i, e.PhysOffset, err)
		}
		if !sameMessage(m, msg("T", 0, i)) || m.PhysOffset != e.PhysOffset || m.QueueOffset != e.QueueOffset {
			t.Fatalf("record %d: got %+v", i, m)
		}
	}
	// Positions inside a record, past the end or negative never return a
	// message.
	for _, pos := range []int64{ents[1].PhysOffset + 1, ents[2].PhysOffset + 4, ents[4].PhysOffset + int64(ents[4].Size), 1 << 40, -1} {
		if m, err := s.ReadMessageAt(pos); err == nil {
			t.Fatalf("position %d returned %+v", pos, m)
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("position %d: unexpected error class %v", pos, err)
		}
	}
}
