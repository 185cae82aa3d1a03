package storage

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TestReadsAcrossDropBehind: with a log cache of almost nothing, the
// commit log drops every 16 MiB from the page cache (and from the
// readers' mapping) as soon as it is 16 MiB behind, while appenders,
// random readers of earlier messages, a queue follower and the
// dispatcher run. Every read must return the message as appended, from
// memory or from the disk, during the run and after it.
func TestReadsAcrossDropBehind(t *testing.T) {
	if !vfs.IsTmpfs("/dev/shm") {
		t.Skip("no tmpfs at /dev/shm for the staging ring")
	}
	o := Options{
		FlushMode: FlushAsync, LogCacheBytes: 1, SegmentSize: 24 << 20,
		RetentionTime: -1, DiskUsagePercent: -1,
	}
	s := mustOpen(t, t.TempDir(), o)
	arrivals := make(chan struct{}, 1)
	s.SetArrivalHook(func(string, int32, int64) {
		select {
		case arrivals <- struct{}{}:
		default:
		}
	})
	type sent struct {
		pos  int64
		size int32
		body []byte
	}
	var (
		mu   sync.Mutex
		all  []sent
		done atomic.Bool
		wg   sync.WaitGroup
	)
	const writers, perWriter = 4, 800 // 4 x 800 x ~16 KiB: 52 MiB, three drops and two rolls
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				body := bytes.Repeat([]byte{byte(w), byte(i), byte(i >> 8)}, 5400+i%100)
				m := &message.Message{Topic: "T", QueueID: int32(w % 2), BornHost: "h:1", Body: body}
				res, err := s.Append(context.Background(), m)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				all = append(all, sent{res.Entries[0].PhysOffset, res.Entries[0].Size, body})
				mu.Unlock()
			}
		}(w)
	}
	check := func(e sent) bool {
		m, err := s.ReadMessage(e.pos, e.size)
		if err != nil || !bytes.Equal(m.Body, e.body) {
			t.Errorf("message at %d: %v (body equal: %v)", e.pos, err, err == nil && bytes.Equal(m.Body, e.body))
			return false
		}
		return true
	}
	var rg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rg.Add(1)
		go func(seed int64) {
			defer rg.Done()
			rng := rand.New(rand.NewSource(seed))
			for !done.Load() {
				mu.Lock()
				n := len(all)
				var e sent
				if n > 0 {
					e = all[rng.Intn(n)]
				}
				mu.Unlock()
				if n > 0 && !check(e) {
					return
				}
			}
		}(int64(r))
	}
	rg.Add(1)
	go func() { // a follower of queue 0, through the consume queue
		defer rg.Done()
		next, want := int64(0), int64(writers/2*perWriter)
		deadline := time.Now().Add(time.Minute)
		for next < want && time.Now().Before(deadline) {
			ms, n, err := s.ReadMessages("T", 0, next, 32)
			if err != nil {
				t.Errorf("queue 0 at %d: %v", next, err)
				return
			}
			if len(ms) == 0 {
				select {
				case <-arrivals:
				case <-time.After(5 * time.Millisecond): // the hook may fire before the dispatch is visible
				}
			}
			next = n
		}
		if next != want {
			t.Errorf("queue 0 read up to %d of %d", next, want)
		}
	}()
	wg.Wait()
	done.Store(true)
	rg.Wait()
	if len(all) != writers*perWriter {
		t.Fatalf("%d messages appended", len(all))
	}
	for _, e := range all {
		if !check(e) {
			break
		}
	}
	mustClose(t, s)
}
