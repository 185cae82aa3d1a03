package commitlog

import (
	"context"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// The derived store time stays within the wall clock's readings around
// it: on the first call, between anchors and across a re-anchor.
func TestStoreClockTracksWallClock(t *testing.T) {
	c := storeClock{epoch: time.Now()}
	check := func(what string) {
		t.Helper()
		before := time.Now().UnixMilli()
		got := c.millis(0)
		after := time.Now().UnixMilli()
		if got < before || got > after {
			t.Fatalf("%s: store time %d outside the wall clock's %d..%d", what, got, before, after)
		}
	}
	check("first call")
	if !c.anchored {
		t.Fatal("no anchor taken")
	}
	first := c.at
	for range 1000 {
		check("between anchors")
	}
	if c.at != first && time.Since(c.epoch)-first < anchorSpan {
		t.Fatalf("re-anchored %v after the anchor, before anchorSpan", time.Since(c.epoch)-first)
	}
	// An anchor anchorSpan old is replaced: a step of the wall clock is
	// seen within anchorSpan.
	c.at -= anchorSpan
	stale := c.at
	check("after anchorSpan")
	if c.at == stale {
		t.Fatal("anchor older than anchorSpan kept")
	}
}

// A reading the appender passes is the store time, not the clock's now;
// one from before the anchor too.
func TestStoreClockUsesReading(t *testing.T) {
	c := storeClock{epoch: time.Now().Add(-10 * time.Second)}
	c.millis(0) // anchor now
	back := 3 * time.Second
	now := time.Now()
	at := now.Sub(c.epoch) - back // monotonic
	want := now.Add(-back).UnixMilli()
	if got := c.millis(at); got < want-1 || got > want+1 {
		t.Fatalf("store time for a reading %v ago: %d, want %d (±1 ms)", back, got, want)
	}
}

// A custom clock is used as it is, readings or not.
func TestStoreClockCustom(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	c := storeClock{now: func() time.Time { return at }, epoch: time.Now()}
	for _, reading := range []time.Duration{0, time.Second} {
		if got := c.millis(reading); got != at.UnixMilli() {
			t.Fatalf("store time %d, want %d", got, at.UnixMilli())
		}
	}
}

// Through the log: an append without a reading is stamped with the wall
// clock; AppendAt's reading becomes the store time when it is not older
// than the last one, and store times never go back.
func TestAppendStoreTimes(t *testing.T) {
	epoch := time.Now().Add(-time.Minute)
	o := mappedOpts(vfs.Default, t.TempDir(), 1<<20)
	o.Epoch = epoch
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	defer func() {
		l.Stop(false)
		l.Close()
	}()
	rec := bodyRecord(t, []byte("x"))
	appendAt := func(at time.Duration) int64 {
		t.Helper()
		ents, _, err := l.AppendAt(context.Background(), []Record{rec}, at)
		if err != nil {
			t.Fatal(err)
		}
		return ents[0].StoreTime
	}
	// Set the last store time 30 s back, then append with a reading 20 s
	// back: that is the store time.
	l.SetLastStoreTime(time.Now().Add(-30 * time.Second).UnixMilli())
	now := time.Now()
	if got, want := appendAt(now.Sub(epoch)-20*time.Second), now.Add(-20*time.Second).UnixMilli(); got < want-1 || got > want+1 {
		t.Fatalf("store time for a reading 20 s back: %d, want %d", got, want)
	}
	before := time.Now().UnixMilli()
	got := appendAt(0)
	if after := time.Now().UnixMilli(); got < before || got > after {
		t.Fatalf("store time without a reading: %d, outside the wall clock's %d..%d", got, before, after)
	}
	// An older reading does not take the store time back.
	if older := appendAt(time.Since(epoch) - 10*time.Second); older < got {
		t.Fatalf("store time went back from %d to %d", got, older)
	}
}
