package commitlog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

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
	type answer struct {
		e    Entry
		body string
	}
	answers := make([][]answer, workers)
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
				answers[w] = append(answers[w], answer{ents[0], body})
			}
		}(w)
	}
	wg.Wait()

	seen := make(map[int64]string)
	n, c := 0, 0
	for w := range answers {
		c += cancelled[w]
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
	if n == 0 {
		t.Fatal("no append was answered")
	}
	t.Logf("%d appends answered, %d given up", n, c)
}
