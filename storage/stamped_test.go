package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// stampedBatch is the i-th batch of a replicated workload: a few
// messages over two topics, with the store time the proposer fixed.
func stampedBatch(i int) (Stamp, []*message.Message) {
	var ms []*message.Message
	for j := range 1 + i%4 {
		ms = append(ms, msg([]string{"ta", "tb"}[(i+j)%2], int32(j%3), i*10+j))
	}
	return Stamp{StoreTime: 1_700_000_000_000 + int64(i/3), StoreHost: "10.0.0.1:8081"}, ms
}

func applyStamped(t *testing.T, s *Store, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		st, ms := stampedBatch(i)
		res, err := s.AppendStamped(context.Background(), st, ms...)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		for _, e := range res.Entries {
			if e.StoreTime != st.StoreTime {
				t.Fatalf("batch %d: store time %d, want %d", i, e.StoreTime, st.StoreTime)
			}
		}
	}
}

func sameLogFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, fb := logFiles(t, vfs.Default, a), logFiles(t, vfs.Default, b)
	if len(fa) != len(fb) {
		t.Fatalf("%d segments against %d", len(fa), len(fb))
	}
	for name, da := range fa {
		if db, ok := fb[name]; !ok || !bytes.Equal(da, db) {
			t.Fatalf("segment %s differs (%d against %d bytes)", name, len(da), len(fb[name]))
		}
	}
}

func stampedOpts(mode FlushMode, host string) Options {
	o := testOpts(vfs.Default)
	o.FlushMode, o.StoreHost, o.StagingDir = mode, host, "off"
	return o
}

// Stores applying the same stamped appends in the same order hold the
// same bytes, whatever their flush mode or own store host.
func TestAppendStampedIdentical(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	sa := mustOpen(t, a, stampedOpts(FlushAsync, "node-a:1"))
	sb := mustOpen(t, b, stampedOpts(FlushSync, "node-b:2"))
	applyStamped(t, sa, 0, 300)
	applyStamped(t, sb, 0, 300)
	waitAll(t, sa)
	waitAll(t, sb)
	for _, topic := range []string{"ta", "tb"} {
		for q := int32(0); q < 3; q++ {
			alo, ahi := sa.QueueRange(topic, q)
			blo, bhi := sb.QueueRange(topic, q)
			if alo != blo || ahi != bhi || ahi == 0 {
				t.Fatalf("%s/%d: [%d,%d) against [%d,%d)", topic, q, alo, ahi, blo, bhi)
			}
		}
	}
	mustClose(t, sa)
	mustClose(t, sb)
	sameLogFiles(t, a, b)
	if len(logFiles(t, vfs.Default, a)) < 2 {
		t.Fatal("the workload should span segments")
	}
}

func TestAppendStampedRejectsNoTime(t *testing.T) {
	s := mustOpen(t, t.TempDir(), stampedOpts(FlushAsync, ""))
	defer mustClose(t, s)
	if _, err := s.AppendStamped(context.Background(), Stamp{}, msg("t", 0, 0)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
}

// A replica that crashed after applying past its last recorded position
// reopens cut there, applies the rest again, and ends byte-identical to
// one that never stopped; nothing is counted twice.
func TestOpenCutReapply(t *testing.T) {
	t.Run("no-staging", func(t *testing.T) { testOpenCutReapply(t, "off") })
	if vfs.IsTmpfs("/dev/shm") {
		// The crash leaves records in the ring: Open writes them to the
		// log, then cuts.
		t.Run("staging", func(t *testing.T) { testOpenCutReapply(t, "/dev/shm") })
	}
}

func testOpenCutReapply(t *testing.T, staging string) {
	stampedOpts := func(mode FlushMode, host string) Options {
		o := stampedOpts(mode, host)
		o.StagingDir = staging
		return o
	}
	for _, cutBatch := range []int{0, 37, 120} {
		ref, dir := t.TempDir(), t.TempDir()
		sr := mustOpen(t, ref, stampedOpts(FlushAsync, ""))
		applyStamped(t, sr, 0, 200)
		mustClose(t, sr)

		s := mustOpen(t, dir, stampedOpts(FlushAsync, ""))
		applyStamped(t, s, 0, cutBatch)
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		_, end := s.LogRange()
		applyStamped(t, s, cutBatch, 160)
		waitAll(t, s)
		if cutBatch == 37 {
			if err := s.checkpoint(false); err != nil { // views checkpointed past the cut
				t.Fatal(err)
			}
		}
		s.crash()

		if _, err := OpenCut(dir, stampedOpts(FlushAsync, ""), end+1<<30); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut past the end: %v, want ErrCorrupt", err)
		}
		s, err := OpenCut(dir, stampedOpts(FlushAsync, ""), end)
		if err != nil {
			t.Fatal(err)
		}
		if _, w := s.LogRange(); w != end {
			t.Fatalf("log ends at %d after the cut, want %d", w, end)
		}
		applyStamped(t, s, cutBatch, 200)
		waitAll(t, s)
		for _, topic := range []string{"ta", "tb"} {
			for q := int32(0); q < 3; q++ {
				got := readAllQueue(t, s, topic, q)
				for i, m := range got {
					if m.QueueOffset != int64(i) {
						t.Fatalf("cut at batch %d: %s/%d: offset %d at %d", cutBatch, topic, q, m.QueueOffset, i)
					}
				}
			}
		}
		mustClose(t, s)
		sameLogFiles(t, ref, dir)
	}
}

// A cut exactly at a segment's base removes that segment and every later
// one; the log goes on from there in a new segment of the same name.
func TestOpenCutAtSegmentBase(t *testing.T) {
	ref, dir := t.TempDir(), t.TempDir()
	one := func(s *Store, i int) int64 {
		st, ms := stampedBatch(i)
		res, err := s.AppendStamped(context.Background(), st, ms[0])
		if err != nil {
			t.Fatal(err)
		}
		return res.End
	}
	sr := mustOpen(t, ref, stampedOpts(FlushAsync, ""))
	for i := range 300 {
		one(sr, i)
	}
	mustClose(t, sr)

	s := mustOpen(t, dir, stampedOpts(FlushAsync, ""))
	ends := map[int64]int{}
	for i := range 300 {
		ends[one(s, i)] = i
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.crash()
	var base int64 = -1
	for name := range logFiles(t, vfs.Default, dir) {
		var b int64
		fmt.Sscanf(strings.TrimSuffix(name, ".log"), "%d", &b)
		if _, ok := ends[b]; ok && b > 0 && (base < 0 || b < base) {
			base = b
		}
	}
	if base < 0 {
		t.Fatal("no segment starts after a record")
	}
	s, err := OpenCut(dir, stampedOpts(FlushAsync, ""), base)
	if err != nil {
		t.Fatal(err)
	}
	if _, w := s.LogRange(); w != base {
		t.Fatalf("log ends at %d, want %d", w, base)
	}
	if n := len(logFiles(t, vfs.Default, dir)); n != 1 {
		t.Fatalf("%d segments after a cut at the second one's base", n)
	}
	for i := ends[base] + 1; i < 300; i++ {
		one(s, i)
	}
	mustClose(t, s)
	sameLogFiles(t, ref, dir)
}
