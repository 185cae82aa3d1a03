package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

func TestAppendReadReopen(t *testing.T) {
	forEachMode(t, testAppendReadReopen)
}

func testAppendReadReopen(t *testing.T, o Options) {
	s := mustOpen(t, "/data", o)
	var want []*message.Message
	for i := 0; i < 300; i++ {
		m := msg("T", int32(i%3), i/3)
		e := appendOne(t, s, m)
		if e.QueueOffset != int64(i/3) {
			t.Fatalf("queue offset %d, want %d", e.QueueOffset, i/3)
		}
		want = append(want, m)
	}
	waitAll(t, s)
	check := func(s *Store) {
		for q := int32(0); q < 3; q++ {
			got := readAllQueue(t, s, "T", q)
			if len(got) != 100 {
				t.Fatalf("queue %d has %d", q, len(got))
			}
			for i, m := range got {
				if !sameMessage(m, want[i*3+int(q)]) || m.QueueOffset != int64(i) {
					t.Fatalf("queue %d msg %d differs: %+v", q, i, m)
				}
			}
		}
	}
	check(s)
	if st := s.Stats(); st.Segments < 2 || st.Appends != 300 {
		t.Fatalf("stats %+v", st)
	}
	mustClose(t, s)
	s = mustOpen(t, "/data", o)
	if !s.Recovery().Clean || s.Recovery().ReplayedBytes != 0 {
		t.Fatalf("expected clean fast reopen: %+v", s.Recovery())
	}
	check(s)
	e := appendOne(t, s, msg("T", 1, 100))
	if e.QueueOffset != 100 {
		t.Fatalf("queue offset after reopen %d", e.QueueOffset)
	}
	mustClose(t, s)
}

func TestLockedDir(t *testing.T) {
	forEachMode(t, func(t *testing.T, o Options) {
		s := mustOpen(t, "/d", o)
		if _, err := Open("/d", o); !errors.Is(err, ErrLocked) {
			t.Fatalf("second open: %v", err)
		}
		mustClose(t, s)
		s = mustOpen(t, "/d", o)
		mustClose(t, s)
		if _, err := s.Append(context.Background(), msg("T", 0, 0)); !errors.Is(err, ErrClosed) {
			t.Fatalf("append after close: %v", err)
		}
	})
}

func TestLimits(t *testing.T) {
	forEachMode(t, testLimits)
}

func testLimits(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	defer mustClose(t, s)
	big := msg("T", 0, 0)
	big.Body = make([]byte, 8<<10+1)
	if _, err := s.Append(context.Background(), big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("big body: %v", err)
	}
	bad := msg("T", 0, 0)
	bad.Flags = message.FlagControl
	if _, err := s.Append(context.Background(), bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("control flag: %v", err)
	}
	if _, err := s.Append(context.Background(), &message.Message{QueueID: 0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no topic: %v", err)
	}
	if _, err := s.ReadMessage(0, 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad read: %v", err)
	}
	if _, err := s.ReadMessage(0, 100); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read past end: %v", err)
	}
}

func TestIndexLookups(t *testing.T) {
	forEachMode(t, testIndexLookups)
}

func testIndexLookups(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	for i := 0; i < 600; i++ { // > IndexCapacity: several index files
		appendOne(t, s, msg("T", int32(i%2), i))
	}
	appendOne(t, s, msg("U", 0, 5))
	waitAll(t, s)
	check := func(s *Store) {
		ms, err := s.LookupByID("T", "id-T-1-7", 4)
		if err != nil || len(ms) != 1 || ms[0].UniqKey() != "id-T-1-7" {
			t.Fatalf("by id: %v %v", ms, err)
		}
		ms, err = s.LookupByKey("T", "k9", 0, 1<<62, 10)
		if err != nil || len(ms) != 1 {
			t.Fatalf("by key: %d %v", len(ms), err)
		}
		ms, err = s.LookupByKey("U", "k5", 0, 1<<62, 10)
		if err != nil || len(ms) != 1 || ms[0].Topic != "U" {
			t.Fatalf("topic scoped: %v %v", ms, err)
		}
		ms, err = s.LookupByKey("T", "common", 0, 1<<62, 1000)
		if err != nil || len(ms) != 600 {
			t.Fatalf("common key: %d %v", len(ms), err)
		}
		if ms, _ := s.LookupByKey("T", "k9", 0, 1, 10); len(ms) != 0 {
			t.Fatal("time range ignored")
		}
	}
	check(s)
	mustClose(t, s)
	s = mustOpen(t, "/d", o)
	check(s)
	mustClose(t, s)
	// A missing index is rebuilt from the log.
	if err := s.fs.RemoveAll("/d/index"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, "/d", o)
	if s.Recovery().ReplayedBytes == 0 {
		t.Fatal("index not rebuilt")
	}
	check(s)
	verifyConsistent(t, s)
	mustClose(t, s)
}

// TestSealedIndexFilesWrittenSoon: the index seals a full file in memory
// (the dispatcher does no index I/O); the store then checkpoints at once,
// not at its next CheckpointInterval (an hour here), so that sealed files
// do not pile up in memory. Replay writes them as it goes.
func TestSealedIndexFilesWrittenSoon(t *testing.T) {
	forEachMode(t, testSealedIndexFilesWrittenSoon)
}

func testSealedIndexFilesWrittenSoon(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	for i := 0; i < 600; i++ { // 3 index entries each: 7 files of 256
		appendOne(t, s, msg("T", int32(i%2), i))
	}
	waitAll(t, s)
	for deadline := time.Now().Add(10 * time.Second); s.idx.Unwritten() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sealed index files still unwritten after 10 s", s.idx.Unwritten())
		}
	}
	mustClose(t, s)
	if err := s.fs.RemoveAll("/d/index"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, "/d", o)
	if n := s.idx.Unwritten(); n != 0 {
		t.Fatalf("replay left %d sealed index files in memory", n)
	}
	if ms, err := s.LookupByID("T", "id-T-1-7", 4); err != nil || len(ms) != 1 {
		t.Fatalf("by id after the rebuild: %v %v", ms, err)
	}
	mustClose(t, s)
}

func TestDeleteTopic(t *testing.T) {
	forEachMode(t, testDeleteTopic)
}

func testDeleteTopic(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	for i := 0; i < 10; i++ {
		appendOne(t, s, msg("T", 0, i))
		appendOne(t, s, msg("K", 0, i))
	}
	if err := s.DeleteTopic(context.Background(), "T"); err != nil {
		t.Fatal(err)
	}
	if ids := s.QueueIDs("T"); len(ids) != 0 {
		t.Fatalf("queues left %v", ids)
	}
	if e := appendOne(t, s, msg("T", 0, 0)); e.QueueOffset != 0 {
		t.Fatalf("recreated topic starts at %d", e.QueueOffset)
	}
	waitAll(t, s)
	s.crash() // replay must reproduce the deletion
	s = mustOpen(t, "/d", o)
	if lo, hi := s.QueueRange("T", 0); lo != 0 || hi != 1 {
		t.Fatalf("T range after replay %d..%d", lo, hi)
	}
	if lo, hi := s.QueueRange("K", 0); lo != 0 || hi != 10 {
		t.Fatalf("K range %d..%d", lo, hi)
	}
	mustClose(t, s)
}

func TestArrivalHookAndWait(t *testing.T) {
	forEachMode(t, testArrivalHookAndWait)
}

func testArrivalHookAndWait(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	defer mustClose(t, s)
	got := make(chan int64, 100)
	s.SetArrivalHook(func(topic string, q int32, next int64) {
		if topic == "T" && q == 2 {
			got <- next
		}
	})
	res, err := s.Append(context.Background(), msg("T", 2, 0), msg("T", 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDispatched(context.Background(), res.End); err != nil {
		t.Fatal(err)
	}
	if ents, _ := s.ReadQueue("T", 2, 0, 10); len(ents) != 2 {
		t.Fatalf("read-your-writes: %d entries", len(ents))
	}
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("hook next %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hook not called")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitDispatched(ctx, res.End+1); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait beyond end: %v", err)
	}
}

func TestOffsetForTime(t *testing.T) {
	forEachMode(t, testOffsetForTime)
}

func testOffsetForTime(t *testing.T, o Options) {
	now := int64(1_000_000)
	o.Now = func() time.Time { return time.UnixMilli(now) }
	s := mustOpen(t, "/d", o)
	defer mustClose(t, s)
	for i := 0; i < 50; i++ {
		now += 10
		appendOne(t, s, msg("T", 0, i))
	}
	waitAll(t, s)
	for _, c := range []struct{ ts, want int64 }{{0, 0}, {1_000_010, 0}, {1_000_011, 1}, {1_000_250, 24}, {1_000_500, 49}, {1_000_501, 50}} {
		if got, err := s.OffsetForTime("T", 0, c.ts); err != nil || got != c.want {
			t.Fatalf("OffsetForTime(%d) = %d %v, want %d", c.ts, got, err, c.want)
		}
	}
}

// A reused encoded form keeps at most maxPooledBytes of buffers, so a
// batch of large records does not stay pinned in the pool; a common batch
// keeps all of its buffers for the next append.
func TestReleaseBoundsKeptBuffers(t *testing.T) {
	s := &Store{}
	kept := func(e *encoded) (n, bytes int) {
		for _, b := range e.bufs {
			if b != nil {
				n, bytes = n+1, bytes+cap(b)
			}
		}
		return n, bytes
	}
	small := &encoded{}
	for range 32 {
		small.bufs = append(small.bufs, make([]byte, 1200))
	}
	s.release(small)
	if n, _ := kept(small); n != 32 {
		t.Fatalf("a batch of 32 records of 1.2 KB kept %d of its buffers, want all 32", n)
	}
	large := &encoded{}
	for range 100 {
		large.bufs = append(large.bufs, make([]byte, 60<<10))
	}
	s.release(large)
	if _, bytes := kept(large); bytes > maxPooledBytes {
		t.Fatalf("a batch of 100 records of 60 KiB kept %d bytes of buffers, want at most %d", bytes, maxPooledBytes)
	}
}

// Every record an append was answered for is readable through its queue
// once WaitDispatched(Answered()) returns, whatever LogRange's written
// end says meanwhile (with a staging ring it covers a record only after
// the ring is written out).
func TestWaitAnswered(t *testing.T) {
	forEachMode(t, func(t *testing.T, o Options) {
		s := mustOpen(t, "/data", o)
		defer mustClose(t, s)
		for i := range 200 {
			res, err := s.Append(context.Background(), msg("T", 0, i))
			if err != nil {
				t.Fatal(err)
			}
			_, written := s.LogRange()
			answered := s.Answered()
			if answered < res.End || written > answered {
				t.Fatalf("append %d ends at %d: answered %d, written %d", i, res.End, answered, written)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = s.WaitDispatched(ctx, answered)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if _, next := s.QueueRange("T", 0); next != int64(i+1) {
				t.Fatalf("after append %d the queue ends at %d", i, next)
			}
		}
	})
}
