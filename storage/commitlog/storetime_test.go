package commitlog

import (
	"testing"
	"time"
)

// The derived store time stays within the wall clock's readings around
// it, on the first call, between anchors and across a re-anchor.
func TestStoreClockTracksWallClock(t *testing.T) {
	var c storeClock
	check := func(what string) {
		t.Helper()
		before := time.Now().UnixMilli()
		got := c.millis()
		after := time.Now().UnixMilli()
		if got < before || got > after {
			t.Fatalf("%s: store time %d outside the wall clock's %d..%d", what, got, before, after)
		}
	}
	check("first call")
	first := c.anchor
	if first.IsZero() {
		t.Fatal("no anchor taken")
	}
	for range 1000 {
		check("between anchors")
	}
	if c.anchor != first && time.Since(first) < anchorSpan {
		t.Fatalf("re-anchored after %v, before anchorSpan", time.Since(first))
	}
	// An anchor anchorSpan old is replaced: a step of the wall clock is
	// seen within anchorSpan.
	c.anchor = time.Now().Add(-anchorSpan)
	stale := c.anchor
	check("after anchorSpan")
	if c.anchor == stale {
		t.Fatal("anchor older than anchorSpan kept")
	}
}

// A custom clock is used as it is.
func TestStoreClockCustom(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	c := storeClock{now: func() time.Time { return at }}
	if got := c.millis(); got != at.UnixMilli() {
		t.Fatalf("store time %d, want %d", got, at.UnixMilli())
	}
}
