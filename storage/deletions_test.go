package storage

import (
	"context"
	"testing"
)

func TestLastDeletion(t *testing.T) {
	forEachMode(t, testLastDeletion)
}

// testLastDeletion: the newest deletion record of a topic is found while
// the store runs and, through the index, after a crash and after a
// clean reopen; a topic never deleted has none.
func testLastDeletion(t *testing.T, o Options) {
	ctx := context.Background()
	s := mustOpen(t, "/d", o)
	del := func() int64 {
		t.Helper()
		res, err := s.deleteTopic(ctx, "T", nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Entries[0].PhysOffset
	}
	want := func(topic string, pos int64) {
		t.Helper()
		got, err := s.LastDeletion(topic)
		if err != nil {
			t.Fatal(err)
		}
		if got != pos {
			t.Fatalf("LastDeletion(%s) = %d, want %d", topic, got, pos)
		}
	}
	for i := 0; i < 5; i++ {
		appendOne(t, s, msg("T", 0, i))
		appendOne(t, s, msg("K", 0, i))
	}
	want("T", -1)
	first := del()
	want("T", first)
	// Enough records to seal index files (IndexCapacity 256) between the
	// two deletions.
	for i := 0; i < 300; i++ {
		appendOne(t, s, msg("T", 0, i))
	}
	second := del()
	if second <= first {
		t.Fatalf("second deletion at %d, first at %d", second, first)
	}
	want("T", second)
	want("K", -1)
	waitAll(t, s)

	s.crash()
	s = mustOpen(t, "/d", o)
	want("T", second)
	want("K", -1)
	mustClose(t, s)

	s = mustOpen(t, "/d", o)
	want("K", -1)
	want("T", second)
	mustClose(t, s)
}
