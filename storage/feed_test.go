package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// feedWorkload appends, from 4 goroutines, records of 3 topics and 4
// queues with and without tags, message ids and KEYS (spaces doubled,
// leading and trailing), some large enough to roll segments, and deletes
// one topic midway; it returns after everything is dispatched (with a
// staging ring, an answered append may not be written out yet, so
// waitAll's Written is not enough).
func feedWorkload(t *testing.T, s *Store) {
	t.Helper()
	topics := []string{"FeedA", "FeedB", "FeedC"}
	var mu sync.Mutex
	end := int64(0)
	round := func(r int) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					n := r*1000 + g*100 + i
					m := &message.Message{Topic: topics[n%3], QueueID: int32(n % 4), BornTime: int64(n), BornHost: "h:1",
						Body: []byte(strings.Repeat("x", 10+n%7*1000))}
					if n%5 != 0 {
						m.Set(message.PropUniqKey, fmt.Sprintf("id-%d", n))
					}
					if n%3 != 1 {
						m.Set(message.PropTags, fmt.Sprintf("tag%d", n%4))
					}
					switch n % 4 {
					case 0:
						m.Set(message.PropKeys, fmt.Sprintf("k%d  shared ", n))
					case 1:
						m.Set(message.PropKeys, " solo")
					}
					batch := []*message.Message{m}
					if i%10 == 0 { // a batch of two, across topics
						m2 := *m
						m2.Topic = topics[(n+1)%3]
						batch = append(batch, &m2)
					}
					res, err := s.Append(context.Background(), batch...)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					end = max(end, res.End)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	round(0)
	if err := s.DeleteTopic(context.Background(), "FeedB"); err != nil {
		t.Fatal(err)
	}
	round(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDispatched(ctx, end); err != nil {
		t.Fatal(err)
	}
}

// verifyIndexed checks that every data record of the log is found by its
// message id and by each of its KEYS through the index.
func verifyIndexed(t *testing.T, s *Store) {
	t.Helper()
	want := map[uint64]map[int64]bool{} // index key -> positions
	add := func(h uint64, phys int64) {
		if want[h] == nil {
			want[h] = map[int64]bool{}
		}
		want[h][phys] = true
	}
	n := 0
	for _, m := range scanLog(t, s) {
		if m.Flags&message.FlagControl != 0 {
			continue
		}
		n++
		if id := m.UniqKey(); id != "" {
			add(indexKey(keyKindID, m.Topic, id), m.PhysOffset)
		}
		for _, k := range m.Keys() {
			add(indexKey(keyKindKey, m.Topic, k), m.PhysOffset)
		}
	}
	if n == 0 {
		t.Fatal("no records")
	}
	for h, ps := range want {
		hits, err := s.idx.Lookup(h, 0, 1<<62, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, hit := range hits {
			delete(ps, hit.Phys)
		}
		for p := range ps {
			t.Fatalf("record at %d: index key %#x not in the index", p, h)
		}
	}
}

// The dispatcher builds the same queues and index from the writer's feed
// as from the log: with the feed, without it, and with a feed so small
// that it keeps dropping records and the dispatcher switches between the
// two; in both flush modes, and with a staging ring. Each store is checked
// against its own log, then reopened with its queues and index removed,
// so the replay rebuilds them from the log.
func TestFeedAndLogDispatchAgree(t *testing.T) {
	type setup struct {
		name string
		mode storeMode
		os   bool // the OS file system: async mode then has a staging ring
	}
	var setups []setup
	for _, m := range storeModes {
		setups = append(setups, setup{"mem-" + m.name, m, false})
	}
	setups = append(setups, setup{"os-async", storeMode{"async", FlushAsync, false}, true})
	for _, setup := range setups {
		for _, tc := range []struct {
			name    string
			feedMax int
			fed     bool // some records dispatched from the feed
			read    bool // some records dispatched from the log
		}{
			{"feed", 0, true, false},
			{"log", -1, false, true},
			{"gaps", 3, true, true},
		} {
			t.Run(setup.name+"/"+tc.name, func(t *testing.T) {
				var fs vfs.FS = vfs.NewMem()
				dir := "/s"
				if setup.os {
					fs, dir = vfs.Default, t.TempDir()
				}
				o := testOpts(fs)
				if setup.os {
					o.FlushMode = setup.mode.mode
				} else {
					o = setup.mode.apply(t, o)
				}
				o.SegmentSize = 64 << 10
				o.feedMax = tc.feedMax
				if setup.os && o.Defaults().StagingDir == "" {
					t.Skip("no staging ring here (no tmpfs at /dev/shm)")
				}
				s := mustOpen(t, dir, o)
				feedWorkload(t, s)
				verifyConsistent(t, s)
				verifyIndexed(t, s)
				st := s.Stats()
				if (st.DispatchFed > 0) != tc.fed || (st.DispatchRead > 0) != tc.read {
					t.Fatalf("records dispatched from the feed %d, from the log %d", st.DispatchFed, st.DispatchRead)
				}
				if got, want := st.DispatchFed+st.DispatchRead, uint64(len(scanLog(t, s))); got != want {
					t.Fatalf("dispatched %d records, the log has %d", got, want)
				}
				mustClose(t, s)
				for _, d := range []string{"consumequeue", "index"} {
					if err := fs.RemoveAll(filepath.Join(dir, d)); err != nil {
						t.Fatal(err)
					}
				}
				s = mustOpen(t, dir, o)
				defer mustClose(t, s)
				if st := s.Stats(); st.DispatchRead == 0 || st.DispatchFed != 0 {
					t.Fatalf("replay: records from the feed %d, from the log %d", st.DispatchFed, st.DispatchRead)
				}
				verifyConsistent(t, s)
				verifyIndexed(t, s)
			})
		}
	}
}
