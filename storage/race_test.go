package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentAppendReadDispatch runs appenders, queue readers that
// follow their queues, index lookups, checkpoints and retention at the
// same time (run with -race). Readers must see every queue entry exactly
// once and in order, each entry's record must match, and per-queue
// offsets handed to appenders must be dense.
func TestConcurrentAppendReadDispatch(t *testing.T) {
	forEachMode(t, testConcurrentAppendReadDispatch)
}

func testConcurrentAppendReadDispatch(t *testing.T, o Options) {
	o.CheckpointInterval = 2 * time.Millisecond
	s := mustOpen(t, "/d", o)
	const writers, perWriter, queues = 4, 300, 3
	arrivals := make(chan struct{}, 1)
	s.SetArrivalHook(func(string, int32, int64) {
		select {
		case arrivals <- struct{}{}:
		default:
		}
	})
	var wg sync.WaitGroup
	var appended atomic.Int64
	qoffs := make([]sync.Map, queues)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				q := int32((w + i) % queues)
				m := msg("T", q, w*perWriter+i)
				res, err := s.Append(context.Background(), m)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if _, dup := qoffs[q].LoadOrStore(res.Entries[0].QueueOffset, true); dup {
					t.Errorf("queue offset %d handed out twice", res.Entries[0].QueueOffset)
				}
				appended.Add(1)
				if i%50 == 0 {
					if _, err := s.LookupByID("T", m.UniqKey(), 1); err != nil {
						t.Errorf("lookup: %v", err)
					}
				}
			}
		}(w)
	}
	total := writers * perWriter
	var read atomic.Int64
	var rg sync.WaitGroup
	for q := int32(0); q < queues; q++ {
		rg.Add(1)
		go func(q int32) {
			defer rg.Done()
			next := int64(0)
			deadline := time.After(30 * time.Second)
			for read.Load() < int64(total) {
				ms, n, err := s.ReadMessages("T", q, next, 16)
				if err != nil {
					t.Errorf("read: %v", err)
					return
				}
				for i, m := range ms {
					if m.QueueOffset != next+int64(i) || m.QueueID != q {
						t.Errorf("queue %d: got offset %d at %d", q, m.QueueOffset, next+int64(i))
						return
					}
				}
				read.Add(int64(len(ms)))
				next = n
				if len(ms) == 0 {
					select {
					case <-arrivals:
					case <-time.After(5 * time.Millisecond): // also poll: the hook wakes one reader
					case <-deadline:
						t.Errorf("queue %d stuck at %d", q, next)
						return
					}
				}
			}
		}(q)
	}
	go func() {
		for appended.Load() < int64(total) {
			if _, err := s.RunRetention(); err != nil {
				t.Errorf("retention: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	rg.Wait()
	if read.Load() != int64(total) {
		t.Fatalf("read %d of %d", read.Load(), total)
	}
	verifyConsistent(t, s)
	st := s.Stats()
	if st.DispatchLag != 0 || st.Appends != uint64(total) {
		t.Fatalf("stats %+v", st)
	}
	mustClose(t, s)
}

func TestCloseDeadline(t *testing.T) {
	forEachMode(t, testCloseDeadline)
}

func testCloseDeadline(t *testing.T, o Options) {
	s := mustOpen(t, "/d", o)
	for i := 0; i < 10; i++ {
		appendOne(t, s, msg("T", 0, i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Close(ctx)
	// Either the dispatcher had caught up (clean) or the close reports
	// the deadline; a second Close returns the same answer.
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("close: %v", err)
	}
	if err2 := s.Close(context.Background()); fmt.Sprint(err2) != fmt.Sprint(err) {
		t.Fatalf("second close %v != %v", err2, err)
	}
}
