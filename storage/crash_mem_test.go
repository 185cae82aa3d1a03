package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

type acked struct {
	e   AppendEntry
	msg *message.Message
}

// TestCrashFS: concurrent appenders, a power loss at a random moment
// (unsynced bytes and names dropped, torn tails kept at random), reopen:
// in sync mode every acknowledged record is present and byte-identical;
// in both modes the store is consistent and keeps working.
func TestCrashFS(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	for _, mode := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(mode) + 42))
			fs := vfs.NewMem()
			// Records written into the pre-zeroed log tail (sync mode) may
			// reach the disk in part before their fsync.
			fs.SetTearOverwrites(func(name string) bool { return strings.Contains(name, "/commitlog/") })
			o := testOpts(fs)
			o.FlushMode = mode
			o.CheckpointInterval = 3 * time.Millisecond
			var all []acked
			for round := 0; round < rounds; round++ {
				s := mustOpen(t, "/d", o)
				// Everything acknowledged durable so far must still be there.
				for _, a := range all {
					m, err := s.ReadMessage(a.e.PhysOffset, a.e.Size)
					if err != nil {
						t.Fatalf("round %d: acked record at %d lost: %v (recovery %+v)", round, a.e.PhysOffset, err, s.Recovery())
					}
					if !sameMessage(m, a.msg) || m.QueueOffset != a.e.QueueOffset {
						t.Fatalf("round %d: acked record at %d differs", round, a.e.PhysOffset)
					}
				}
				verifyConsistent(t, s)
				var mu sync.Mutex
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for g := 0; g < 4; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						for i := 0; ctx.Err() == nil; i++ {
							m := msg(fmt.Sprintf("T%d", g%2), int32(i%3), round*100000+g*10000+i)
							res, err := s.Append(ctx, m)
							if err != nil {
								if errors.Is(err, ErrClosed) || ctx.Err() != nil {
									return
								}
								t.Errorf("append: %v", err)
								return
							}
							if res.Durability == DurabilityLocal {
								mu.Lock()
								all = append(all, acked{res.Entries[0], m})
								mu.Unlock()
							}
						}
					}(g)
				}
				time.Sleep(time.Duration(1+rng.Intn(15)) * time.Millisecond) // a random moment, not a wait for a condition
				mu.Lock()
				clone := fs.CrashClone(rng)
				// Only acks recorded before the crash are promised.
				n := len(all)
				mu.Unlock()
				cancel()
				wg.Wait()
				s.crash()
				mu.Lock()
				all = all[:n]
				mu.Unlock()
				fs = clone
				o.FS = fs
			}
			s := mustOpen(t, "/d", o)
			if mode == FlushSync && len(all) == 0 {
				t.Fatal("no appends acknowledged")
			}
			verifyConsistent(t, s)
			mustClose(t, s)
		})
	}
}
