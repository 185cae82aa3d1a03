package storage

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TestTornTail truncates or corrupts the last segment at random byte
// positions after a crash; recovery must keep exactly the valid prefix:
// every record that ends before the damage, nothing from the damaged
// record on, and queues that agree with the log. (A corrupted record that
// valid records follow is damage, not a torn tail: Open refuses it.)
func TestTornTail(t *testing.T) {
	forEachMode(t, testTornTail)
}

func testTornTail(t *testing.T, o Options) {
	rng := rand.New(rand.NewSource(7))
	fs := o.FS.(*vfs.MemFS)
	s := mustOpen(t, "/d", o)
	var ents []AppendEntry
	var msgs []*message.Message
	for i := 0; i < 400; i++ {
		m := msg("T", int32(i%4), i)
		m.Body = append(m.Body, bytes.Repeat([]byte{'p'}, rng.Intn(300))...)
		ents = append(ents, appendOne(t, s, m))
		msgs = append(msgs, m)
	}
	waitAll(t, s)
	if o.FlushMode == FlushAsync {
		// Answered before their fsync: make them durable before the
		// power loss below.
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	s.crash()
	base := fs.CrashClone(nil)
	all, _ := base.List("/d/commitlog")
	var names []string // the segments (a staging ring's id file is there too)
	for _, n := range all {
		if strings.HasSuffix(n, ".log") {
			names = append(names, n)
		}
	}
	last := filepath.Join("/d/commitlog", names[len(names)-1])
	// A durable tail of zeros past the log, as a file system can leave
	// after a power loss: damage falls inside it too, and the file is
	// longer than the log.
	size, _, _ := base.Stat(last)
	if f, err := base.OpenRW(last); err != nil {
		t.Fatal(err)
	} else {
		f.WriteAt(make([]byte, 16<<10), size)
		f.Sync()
		f.Close()
	}
	size, _, _ = base.Stat(last)
	segBase, err := strconv.ParseInt(strings.TrimSuffix(names[len(names)-1], ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if logEnd := ents[len(ents)-1].PhysOffset + int64(ents[len(ents)-1].Size); segBase+size <= logEnd {
		t.Fatalf("no zero tail: segment %d size %d, log end %d", segBase, size, logEnd)
	}
	// Recovery validates from the checkpoint's flushed position: keep the
	// last segment past it whichever checkpoint the background loop wrote
	// last (one after the last append would vouch for the whole log).
	if cp, err := loadCheckpoint(base, "/d"); err == nil && cp.Flushed > segBase {
		cp.Flushed, cp.Dispatched = segBase, min(cp.Dispatched, segBase)
		if err := writeCheckpoint(base, "/d", cp); err != nil {
			t.Fatal(err)
		}
	}
	iters := 120
	if testing.Short() {
		iters = 40
		if o.FlushMode == FlushAsync {
			iters = 20 // the damage is the same, the write path the only difference
		}
	}
	for it := 0; it < iters; it++ {
		c := base.CrashClone(nil)
		p := rng.Int63n(size) // file offset of the damage
		corrupt := it%2 == 1
		f, err := c.OpenRW(last)
		if err != nil {
			t.Fatal(err)
		}
		if corrupt {
			var b [1]byte
			f.ReadAt(b[:], p)
			b[0] ^= byte(1 + rng.Intn(255))
			f.WriteAt(b[:], p)
		} else {
			f.Truncate(p)
		}
		f.Sync()
		f.Close()
		// Expected: records ending at or before the damage (for a
		// corruption, records ending at or before the damaged byte's
		// record start).
		damage := segBase + p
		keep := 0
		for keep < len(ents) {
			e := ents[keep]
			end := e.PhysOffset + int64(e.Size)
			if corrupt && end > damage || !corrupt && end > damage {
				break
			}
			keep++
		}
		oc := o
		oc.FS = c
		if corrupt && keep < len(ents)-1 {
			// Valid records follow the damaged one: not a torn tail.
			_, err := Open("/d", oc)
			if d, ok := errors.AsType[*DamageError](err); !ok || d.Pos != ents[keep].PhysOffset {
				t.Fatalf("iter %d: damage at %d in record %d of %d: open: %v", it, damage, keep, len(ents), err)
			}
			continue
		}
		s := mustOpen(t, "/d", oc)
		_, w := s.LogRange()
		wantEnd := segBase
		if keep > 0 {
			wantEnd = ents[keep-1].PhysOffset + int64(ents[keep-1].Size)
		}
		if w != wantEnd {
			t.Fatalf("iter %d (corrupt=%v at %d): log end %d, want %d", it, corrupt, damage, w, wantEnd)
		}
		for i := 0; i < keep; i++ {
			m, err := s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
			if err != nil || !sameMessage(m, msgs[i]) {
				t.Fatalf("iter %d: record %d: %v", it, i, err)
			}
		}
		if keep < len(ents) {
			if _, err := s.ReadMessage(ents[keep].PhysOffset, ents[keep].Size); err == nil {
				t.Fatalf("iter %d: damaged record %d still readable", it, keep)
			}
		}
		verifyConsistent(t, s)
		var total int64
		for q := int32(0); q < 4; q++ {
			_, hi := s.QueueRange("T", q)
			total += hi
		}
		if total != int64(keep) {
			t.Fatalf("iter %d: queues hold %d entries, want %d", it, total, keep)
		}
		// The store keeps working after the cut.
		if _, err := s.Append(context.Background(), msg("T", 0, 9999)); err != nil {
			t.Fatal(err)
		}
		verifyConsistent(t, s)
		mustClose(t, s)
	}
}
