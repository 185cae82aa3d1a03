package storage

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

func TestRetentionByTime(t *testing.T) {
	forEachMode(t, testRetentionByTime)
}

func testRetentionByTime(t *testing.T, o Options) {
	var now atomic.Int64
	now.Store(1_000_000_000)
	o.RetentionTime = time.Hour
	o.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	s := mustOpen(t, "/d", o)
	var ents []AppendEntry
	for i := 0; i < 600; i++ {
		now.Add(1000) // one second per message
		ents = append(ents, appendOne(t, s, msg("T", int32(i%2), i)))
	}
	waitAll(t, s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.RunRetention(); n != 0 {
		t.Fatalf("deleted %d segments before expiry", n)
	}
	segsBefore := len(s.log.Segments())
	now.Add(int64(time.Hour/time.Millisecond) + 300_000) // messages older than ~300 s are past retention
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	segs := s.log.Segments()
	if len(segs) != segsBefore-n || !segs[len(segs)-1].Active {
		t.Fatalf("segments %+v", segs)
	}
	logMin, _ := s.LogRange()
	// Only segments whose every record is past retention went.
	cutoff := now.Load() - time.Hour.Milliseconds()
	for _, e := range ents {
		if e.PhysOffset < logMin && e.StoreTime > cutoff {
			t.Fatalf("record stored at %d (cutoff %d) deleted", e.StoreTime, cutoff)
		}
	}
	for q := int32(0); q < 2; q++ {
		lo, hi := s.QueueRange("T", q)
		if lo == 0 || hi != 300 {
			t.Fatalf("queue %d range %d..%d", q, lo, hi)
		}
		if _, err := s.ReadQueue("T", q, lo-1, 10); !errors.Is(err, ErrOffsetMoved) {
			t.Fatalf("read below min: %v", err)
		}
		if _, _, err := s.ReadMessages("T", q, 0, 10); !errors.Is(err, ErrOffsetMoved) {
			t.Fatalf("read messages below min: %v", err)
		}
	}
	if _, err := s.ReadMessage(ents[0].PhysOffset, ents[0].Size); !errors.Is(err, ErrOffsetMoved) {
		t.Fatalf("read deleted record: %v", err)
	}
	verifyConsistent(t, s)
	s.crash()
	s = mustOpen(t, "/d", o) // min offsets survive a crash and replay
	for q := int32(0); q < 2; q++ {
		if lo, hi := s.QueueRange("T", q); lo == 0 || hi != 300 {
			t.Fatalf("after reopen queue %d range %d..%d", q, lo, hi)
		}
	}
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestRetentionWhileReading: readers racing with segment deletion get a
// record or ErrOffsetMoved, never garbage; on the OS FS this exercises
// mmap'd segments unmapped only after the last reader is done.
func TestRetentionWhileReading(t *testing.T) {
	forEachMode(t, func(t *testing.T, o Options) { testRetentionWhileReading(t, o, "/d") })
	t.Run("os", func(t *testing.T) { testRetentionWhileReading(t, testOpts(vfs.Default), t.TempDir()) })
}

func testRetentionWhileReading(t *testing.T, o Options, dir string) {
	o.DiskUsagePercent = -1
	s := mustOpen(t, dir, o)
	var ents []AppendEntry
	for i := 0; i < 2000; i++ {
		ents = append(ents, appendOne(t, s, msg("T", 0, i)))
	}
	waitAll(t, s)
	s.Sync()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var reads, moved atomic.Int64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; ; i = (i + 7) % len(ents) {
				select {
				case <-stop:
					return
				default:
				}
				m, err := s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
				switch {
				case errors.Is(err, ErrOffsetMoved):
					moved.Add(1)
				case err != nil:
					t.Errorf("read %d: %v", i, err)
					return
				case !sameMessage(m, msg("T", 0, i)):
					t.Errorf("read %d: wrong record", i)
					return
				default:
					reads.Add(1)
				}
			}
		}(g)
	}
	// Delete everything but the active segment, one at a time,
	// each while readers are busy.
	for {
		for target := reads.Load() + 50; reads.Load() < target && moved.Load() < 1<<40; {
			runtime.Gosched()
		}
		ok, err := s.log.RemoveOldest(s.DispatchedUpTo())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no reads")
	}
	if _, err := s.ReadMessage(ents[0].PhysOffset, ents[0].Size); !errors.Is(err, ErrOffsetMoved) {
		t.Fatalf("deleted record: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
