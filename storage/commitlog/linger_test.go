package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// awaitWritten waits (on Options.Notify) until Written reaches end.
func awaitWritten(t *testing.T, l *Log, notify chan struct{}, end int64, what string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for l.Written() < end {
		select {
		case <-notify:
		case <-deadline.C:
			t.Fatalf("%s: written %d after 10 s, want %d (answered %d)", what, l.Written(), end, l.Answered())
		}
	}
}

// TestStagingLinger: with a linger far longer than the test, the first
// record after a quiet spell is still written out at once, records that
// follow it wait in the ring only until lingerBytes of them do, and a
// stop during a linger writes everything out.
func TestStagingLinger(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 64<<20)
	o.StagingLinger = time.Hour
	o.FlushInterval = time.Hour // no fsync round writes the ring out meanwhile
	o.Notify = make(chan struct{}, 1)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	if l.stg == nil {
		t.Fatal("no staging ring")
	}
	l.lingerWithin = time.Hour // every wake-up after the first write lingers
	l.Start()
	ctx := context.Background()
	rec := bodyRecord(t, bytes.Repeat([]byte("x"), 3000))

	_, end, err := l.Append(ctx, []Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	awaitWritten(t, l, o.Notify, end, "the first record")
	first := end

	// Short of lingerBytes waiting, nothing more is written out.
	for end-first+int64(len(rec.Data)) < lingerBytes {
		if _, end, err = l.Append(ctx, []Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	if w := l.Written(); w != first {
		t.Fatalf("written %d while lingering, want %d (answered %d)", w, first, end)
	}
	// A read of a record still in the ring writes it out itself.
	if _, err := l.Read(end-int64(len(rec.Data)), len(rec.Data)); err != nil {
		t.Fatal(err)
	}
	if l.Written() != end {
		t.Fatalf("written %d after a read of the last record, want %d", l.Written(), end)
	}
	// lingerBytes waiting cut the linger short.
	before := end
	for end-before < lingerBytes {
		if _, end, err = l.Append(ctx, []Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	awaitWritten(t, l, o.Notify, end, "lingerBytes waiting")

	// A stop during a linger returns and leaves everything in the log.
	if _, end, err = l.Append(ctx, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- l.Stop(false) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return during a linger")
	}
	l.Close()
	l2, res := openLog(t, o, Recovery{From: end, CleanEnd: end})
	if !res.FastPath || res.End != end {
		t.Fatalf("reopen after a stop during a linger: %+v, want a clean end at %d", res, end)
	}
	l2.Close()
}

// TestStagingLingerReadersWaiting: while readers wait for new records the
// flusher does not linger, and a reader that starts waiting cuts a linger
// in progress short.
func TestStagingLingerReadersWaiting(t *testing.T) {
	dir, stage := t.TempDir(), t.TempDir()
	o := stagingOpts(vfs.Default, dir, stage, 64<<20)
	o.StagingLinger = time.Hour
	o.FlushInterval = time.Hour
	o.Notify = make(chan struct{}, 1)
	l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
	l.lingerWithin = time.Hour
	var waiting atomic.Bool
	l.SetReadersWaiting(waiting.Load)
	l.Start()
	defer func() {
		if err := l.Stop(false); err != nil {
			t.Error(err)
		}
		l.Close()
	}()
	ctx := context.Background()
	rec := bodyRecord(t, []byte("r"))
	appendOne := func() int64 {
		t.Helper()
		_, end, err := l.Append(ctx, []Record{rec})
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	awaitWritten(t, l, o.Notify, appendOne(), "the first record")

	waiting.Store(true)
	for i := range 20 {
		awaitWritten(t, l, o.Notify, appendOne(), fmt.Sprintf("record %d with a reader waiting", i))
	}

	waiting.Store(false)
	end := appendOne()
	// The flusher lingers on this record (for an hour) until a reader
	// comes: Hurry, whether the linger began yet or not.
	l.Hurry()
	awaitWritten(t, l, o.Notify, end, "a lingering record once a reader came")
}
