package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"syscall"
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
// (unsynced bytes and names dropped, torn tails kept at random, the
// staging ring gone), reopen: every record acknowledged as durable (sync
// mode) is present and byte-identical; in every mode the store is
// consistent and keeps working.
func TestCrashFS(t *testing.T) {
	seed := int64(42)
	forEachMode(t, func(t *testing.T, o Options) {
		seed++
		testCrashFS(t, o, seed)
	})
}

func testCrashFS(t *testing.T, o Options, seed int64) {
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	mode := o.FlushMode
	rng := rand.New(rand.NewSource(seed))
	fs := o.FS.(*vfs.MemFS)
	// Overwrites of bytes already on the disk (a record written
	// over a torn or zero tail) may reach it in part before
	// their fsync.
	fs.SetTearOverwrites(func(name string) bool { return strings.Contains(name, "/commitlog/") })
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
}

// TestCrashProcess: concurrent appenders, then the process dies after a
// random number of acknowledgements (the store abandoned mid-flight, the file system, page
// cache and staging ring kept, as a kill -9 leaves them), reopen: every
// acknowledged record is present and byte-identical, whatever its
// durability, and the store is consistent and keeps working. With a
// staging ring, every other round fails the writes to the log, so that
// the ring holds answered records the reopen must write into the log.
func TestCrashProcess(t *testing.T) {
	seed := int64(7)
	forEachMode(t, func(t *testing.T, o Options) {
		seed++
		testCrashProcess(t, o, seed)
	})
}

func testCrashProcess(t *testing.T, o Options, seed int64) {
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	rng := rand.New(rand.NewSource(seed))
	o.CheckpointInterval = 3 * time.Millisecond
	efs := vfs.NewErrorFS(o.FS, nil)
	o.FS = efs
	var all []acked
	staged, stalled := 0, 0
	for round := 0; round <= rounds; round++ {
		efs.SetInject(nil)
		s := mustOpen(t, "/d", o)
		if s.Recovery().StagedBytes > 0 {
			staged++
		}
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
		if round == rounds {
			mustClose(t, s)
			break
		}
		// A failed round: every write to the log fails, so the first
		// write out of the ring fails the log (it stops taking appends)
		// and whatever was answered before is in the ring only.
		failing := s.log.Staging() && round%2 == 0
		if failing {
			efs.SetInject(func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.HasSuffix(path, ".log") {
					return syscall.EIO
				}
				return nil
			})
		}
		before := len(all)
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		target := len(all) + 50 + rng.Intn(500)
		reached := make(chan struct{})
		var reachOnce sync.Once
		reach := func() { reachOnce.Do(func() { close(reached) }) }
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					mu.Lock()
					done := len(all) >= target+200 // bounds the records every later round checks
					mu.Unlock()
					if done {
						return
					}
					m := msg(fmt.Sprintf("T%d", g%2), int32(i%3), round*100000+g*10000+i)
					res, err := s.Append(ctx, m)
					if err != nil {
						if errors.Is(err, ErrClosed) || ctx.Err() != nil {
							return
						}
						if failing && errors.Is(err, ErrNotWritable) {
							reach()
							return
						}
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					all = append(all, acked{res.Entries[0], m})
					if len(all) == target {
						reach()
					}
					mu.Unlock()
				}
			}(g)
		}
		<-reached
		s.crash() // appenders still running: the ones answered are promised
		cancel()
		wg.Wait()
		if failing && len(all) > before {
			stalled++ // answered records the log never got: the next Open must find them in the ring
		}
	}
	if len(all) == 0 {
		t.Fatal("no appends acknowledged")
	}
	t.Logf("%d acknowledged records; %d of %d reopens wrote records from the staging ring into the log", len(all), staged, rounds)
	if staged < stalled {
		t.Fatalf("%d reopens wrote records from the staging ring, want at least the %d after a failed write out of it", staged, stalled)
	}
	if o.FlushMode == FlushAsync && o.StagingDir != "off" && stalled == 0 {
		t.Fatal("no round ran with the staging ring")
	}
}
