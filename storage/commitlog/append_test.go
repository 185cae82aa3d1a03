package commitlog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TestAppendRequestsReused: appends reuse their request (and its
// completion channel) once answered, while appends given up on their
// context leave theirs with the writer. Under concurrent appends, some of
// them cancelled while queued or being written, every answered append must
// get its own records' entries: each one reads back as the record it
// appended, and no two answers share a position.
func TestAppendRequestsReused(t *testing.T) {
	// Writes yield a few times, so appenders queue up and cancel while the
	// writer is inside a write.
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpWrite {
			for i := 0; i < 3; i++ {
				runtime.Gosched()
			}
		}
		return nil
	})
	l, _ := openLog(t, Options{FS: fs, Dir: "/log", SegmentSize: 1 << 20, MaxRecordSize: 4 << 10}, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	defer func() {
		if !t.Failed() { // a stuck writer would keep Close waiting
			l.Close()
		}
	}()

	const workers, perWorker = 8, 300
	answers := make([][]answered, workers)
	cancelled := make([]int, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				body := fmt.Sprintf("w%d-i%d", w, i)
				d, crc, err := message.Encode(nil, &message.Message{Topic: "T", QueueID: int32(w), Body: []byte(body)})
				if err != nil {
					t.Error(err)
					return
				}
				// An answer that never comes (a request signalled twice
				// blocks the writer) fails the test instead of hanging it.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				giveUp := i%3 == 0
				if giveUp {
					// Give up while the append is queued or being written.
					go func() {
						runtime.Gosched()
						cancel()
					}()
				}
				ents, _, err := l.Append(ctx, []Record{{Data: d, CRC: crc, Topic: "T", QueueID: int32(w)}})
				cancel()
				if err != nil {
					if !giveUp || !errors.Is(err, context.Canceled) {
						t.Errorf("append %s: %v", body, err)
						return
					}
					cancelled[w]++
					continue
				}
				if len(ents) != 1 {
					t.Errorf("append %s: %d entries, want 1", body, len(ents))
					return
				}
				answers[w] = append(answers[w], answered{ents[0], body})
			}
		}(w)
	}
	wg.Wait()

	n := checkAnswers(t, l, answers)
	c := 0
	for _, k := range cancelled {
		c += k
	}
	if n == 0 {
		t.Fatal("no append was answered")
	}
	t.Logf("%d appends answered, %d given up", n, c)
}

// answered is one answered append of the concurrent append tests.
type answered struct {
	e    Entry
	body string
}

// checkAnswers fails unless every answer reads back as its own record at
// a position no other answer got; it returns the number of answers.
func checkAnswers(t *testing.T, l *Log, answers [][]answered) int {
	t.Helper()
	seen := make(map[int64]string)
	n := 0
	for w := range answers {
		for _, a := range answers[w] {
			n++
			if other, dup := seen[a.e.PhysOffset]; dup {
				t.Fatalf("%s and %s were both answered with position %d", other, a.body, a.e.PhysOffset)
			}
			seen[a.e.PhysOffset] = a.body
			b, err := l.Read(a.e.PhysOffset, int(a.e.Size))
			if err != nil {
				t.Fatalf("%s at %d: %v", a.body, a.e.PhysOffset, err)
			}
			m, err := message.Decode(b, 4<<10)
			if err != nil || string(m.Body) != a.body || m.QueueOffset != a.e.QueueOffset {
				t.Fatalf("%s answered with position %d, which holds %q at queue offset %d (answer %d): %v",
					a.body, a.e.PhysOffset, m.Body, m.QueueOffset, a.e.QueueOffset, err)
			}
		}
	}
	return n
}

// TestAppendDurableRequests: the sync-mode append (AppendDurable) under
// concurrent appenders, some of them giving up on their context or on a
// deadline while queued, being written, or waiting for the fsync. Writes
// and fsyncs yield (fsyncs sometimes stall briefly), so every state is
// hit. Every answer with entries reads back as its own record at its own
// position; an answer that says durable is durable; after a final Sync
// every answered record is durable; requests are never finished twice
// (that would block the writer or the syncer on a full channel).
func TestAppendDurableRequests(t *testing.T) {
	var syncs sync.Mutex
	nsync := 0
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpWrite:
			for i := 0; i < 3; i++ {
				runtime.Gosched()
			}
		case vfs.OpSync:
			syncs.Lock()
			nsync++
			stall := nsync%5 == 0
			syncs.Unlock()
			if stall {
				time.Sleep(300 * time.Microsecond) // a slow disk, not a wait for a condition
			}
			runtime.Gosched()
		}
		return nil
	})
	l, _ := openLog(t, Options{FS: fs, Dir: "/log", SegmentSize: 1 << 20, MaxRecordSize: 4 << 10, SyncMode: true},
		Recovery{From: -1, CleanEnd: -1})
	l.Start()

	const workers, perWorker = 8, 200
	answers := make([][]answered, workers)
	var notDurable, cancelled int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				body := fmt.Sprintf("w%d-i%d", w, i)
				d, crc, err := message.Encode(nil, &message.Message{Topic: "T", QueueID: int32(w), Body: []byte(body)})
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var deadline time.Time
				switch i % 4 {
				case 0: // give up on the context while queued, written or syncing
					go func() {
						runtime.Gosched()
						cancel()
					}()
				case 1: // a deadline that often passes before the fsync
					deadline = time.Now().Add(time.Duration(i%7) * 50 * time.Microsecond)
				default:
					deadline = time.Now().Add(10 * time.Second)
				}
				ents, end, durable, err := l.AppendDurable(ctx, []Record{{Data: d, CRC: crc, Topic: "T", QueueID: int32(w)}}, deadline)
				cancel()
				if err != nil {
					if i%4 != 0 || !errors.Is(err, context.Canceled) || ents != nil {
						t.Errorf("append %s: %v (entries %v)", body, err, ents)
						return
					}
					mu.Lock()
					cancelled++
					mu.Unlock()
					continue
				}
				if len(ents) != 1 || end != ents[0].PhysOffset+int64(ents[0].Size) {
					t.Errorf("append %s: entries %v end %d", body, ents, end)
					return
				}
				if durable && l.Durable() < end {
					t.Errorf("append %s answered durable at end %d, durable is %d", body, end, l.Durable())
					return
				}
				if !durable {
					mu.Lock()
					notDurable++
					mu.Unlock()
				}
				answers[w] = append(answers[w], answered{ents[0], body})
			}
		}(w)
	}
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	n := checkAnswers(t, l, answers)
	if l.Durable() < l.Written() {
		t.Fatalf("durable %d below written %d after Sync", l.Durable(), l.Written())
	}
	if n == 0 || notDurable == 0 {
		t.Fatalf("%d appends answered, %d of them not durable: the test did not reach the timeout path", n, notDurable)
	}
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	t.Logf("%d appends answered (%d before their fsync), %d given up", n, notDurable, cancelled)
}

// TestAppendDurableStop: appends waiting for an fsync when the log stops
// without one (abandon, as in a crash test) are answered not durable, at
// once, with their entries.
func TestAppendDurableStop(t *testing.T) {
	release := make(chan struct{})
	var stalled sync.Once
	stalling := make(chan struct{})
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			stalled.Do(func() { close(stalling) })
			<-release
		}
		return nil
	})
	l, _ := openLog(t, Options{FS: fs, Dir: "/log", SegmentSize: 1 << 20, MaxRecordSize: 4 << 10, SyncMode: true},
		Recovery{From: -1, CleanEnd: -1})
	l.Start()
	type result struct {
		ents    []Entry
		durable bool
		err     error
	}
	res := make(chan result, 2)
	var size int64
	appendAsync := func(i int) {
		d, crc, _ := message.Encode(nil, &message.Message{Topic: "T", Body: []byte(fmt.Sprint("m", i))})
		size = int64(len(d))
		go func() {
			ents, _, durable, err := l.AppendDurable(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}}, time.Time{})
			res <- result{ents, durable, err}
		}()
	}
	appendAsync(0)
	<-stalling // the fsync covering the first append has started
	appendAsync(1)
	for l.Written() < 2*size { // the writer writes while the syncer stalls
		runtime.Gosched()
	}
	// The second append waits for an fsync the log may stop without.
	stopped := make(chan error, 1)
	go func() { stopped <- l.Stop(true) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		r := <-res
		if r.err != nil || len(r.ents) != 1 {
			t.Fatalf("append answered %+v", r)
		}
		if !r.durable && l.Durable() >= r.ents[0].PhysOffset+int64(r.ents[0].Size) {
			t.Fatalf("answered not durable, but it is")
		}
	}
	l.Close()
}

// TestDurableRoundsByLeader: the fsyncs that answer durable appends are
// run by the leader goroutine the writer starts, not by the syncer: with
// the syncer stopped, concurrent durable appends are all answered durable
// well before their deadline, and once they are answered the leader ends.
func TestDurableRoundsByLeader(t *testing.T) {
	fs := vfs.NewErrorFS(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			runtime.Gosched() // let appends arrive during the round
		}
		return nil
	})
	l, _ := openLog(t, Options{FS: fs, Dir: "/log", SegmentSize: 1 << 20, MaxRecordSize: 4 << 10, SyncMode: true},
		Recovery{From: -1, CleanEnd: -1})
	l.Start()
	// Stop the syncer; Stop finds it stopped.
	close(l.stopSyncer)
	<-l.syncerDone
	l.stopSyncer = make(chan struct{})

	const workers, perWorker = 8, 100
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				d, crc, err := message.Encode(nil, &message.Message{Topic: "T", QueueID: int32(w), Body: []byte(fmt.Sprint(w, "-", i))})
				if err != nil {
					t.Error(err)
					return
				}
				_, end, durable, err := l.AppendDurable(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T", QueueID: int32(w)}},
					time.Now().Add(20*time.Second))
				if err != nil || !durable || l.Durable() < end {
					t.Errorf("append %d-%d: durable %v (durable position %d, end %d), %v", w, i, durable, l.Durable(), end, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	l.pmu.Lock()
	for l.leading {
		l.leaderGone.Wait()
	}
	left := len(l.pending)
	l.pmu.Unlock()
	if left != 0 {
		t.Fatalf("the leader ended with %d appends pending", left)
	}
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// TestAppendDurableAfterAFailedRound: an append written just after an
// fsync round failed (the log fails between the append's own check and
// the parking of its request) is answered with the failure at once, not
// left waiting for a round that will never cover it.
func TestAppendDurableAfterAFailedRound(t *testing.T) {
	var l *Log
	var fail atomic.Bool
	opts := Options{FS: vfs.NewMem(), Dir: "/log", SegmentSize: 1 << 20, MaxRecordSize: 4 << 10, SyncMode: true,
		OnWrite: func([]Record, []Entry) {
			if fail.Load() {
				l.setFailed(errors.New("injected fsync failure"))
			}
		}}
	l, _ = openLog(t, opts, Recovery{From: -1, CleanEnd: -1})
	l.Start()
	defer l.Close()
	d, crc, _ := message.Encode(nil, &message.Message{Topic: "T", Body: []byte("m")})
	if _, _, durable, err := l.AppendDurable(context.Background(), []Record{{Data: d, CRC: crc, Topic: "T"}}, time.Time{}); err != nil || !durable {
		t.Fatalf("first append: durable %v, %v", durable, err)
	}
	fail.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, durable, err := l.AppendDurable(ctx, []Record{{Data: d, CRC: crc, Topic: "T"}}, time.Time{})
	if durable || !errors.Is(err, serr.ErrNotWritable) {
		t.Fatalf("append after the log failed: durable %v, %v", durable, err)
	}
}
