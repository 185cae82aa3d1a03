package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

func TestPutLookupRotateReopen(t *testing.T) {
	o := memOpts(8, 16)
	x := mustOpen(t, o)
	// 50 records, hash = i%5: spans 4 files.
	for i := int64(0); i < 50; i++ {
		if err := x.Put(uint64(i%5), i*100, 10, 1000+i); err != nil {
			t.Fatal(err)
		}
		x.SetEnd(i*100 + 10)
	}
	check := func(x *Index, wantN int) {
		hits, err := x.Lookup(3, 0, 1<<62, 100)
		if err != nil || len(hits) != wantN {
			t.Fatalf("hits %d %v", len(hits), err)
		}
		for i, h := range hits {
			if (h.Phys/100)%5 != 3 || i > 0 && h.Phys >= hits[i-1].Phys {
				t.Fatalf("hit %+v not newest-first for hash 3", h)
			}
		}
		if hits, _ := x.Lookup(3, 1010, 1020, 100); len(hits) != 2 {
			t.Fatalf("time range: %d", len(hits))
		}
	}
	check(x, 10)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	x = mustOpen(t, o)
	if x.End() != 49*100+10 {
		t.Fatalf("end %d", x.End())
	}
	check(x, 10)
	x.Close()
	// Reopen with a shorter log: entries past it are dropped.
	o.LogEnd = 4500
	x = mustOpen(t, o)
	check(x, 9)
	if x.End() > 4500 {
		t.Fatalf("end %d past log end", x.End())
	}
	if err := x.RemoveBelow(3300); err != nil {
		t.Fatal(err)
	}
	if hits, _ := x.Lookup(3, 0, 1<<62, 100); len(hits) >= 9 {
		t.Fatalf("retention kept %d", len(hits))
	}
	x.Close()
}

// TestPutAllIsPutInOrder: PutAll of a run of keys (across rotations)
// leaves the index Put of each would have, file for file.
func TestPutAllIsPutInOrder(t *testing.T) {
	var keys []Key
	for i := int64(0); i < 70; i++ {
		keys = append(keys, Key{Hash: uint64(i*7) % 9, Phys: i * 100, Size: 10 + int32(i%3), StoreTime: 1000 + i})
	}
	one, all := memOpts(8, 16), memOpts(8, 16)
	x, y := mustOpen(t, one), mustOpen(t, all)
	for _, k := range keys {
		if err := x.Put(k.Hash, k.Phys, k.Size, k.StoreTime); err != nil {
			t.Fatal(err)
		}
	}
	// In uneven batches, some of them across a rotation.
	for i := 0; i < len(keys); {
		n := min(1+i%11, len(keys)-i)
		y.PutAll(keys[i : i+n])
		i += n
	}
	for _, ix := range []*Index{x, y} {
		ix.SetEnd(70 * 100)
		if err := ix.Sync(); err != nil {
			t.Fatal(err)
		}
		ix.Close()
	}
	for h := uint64(0); h < 9; h++ {
		a, errA := mustOpen(t, one).Lookup(h, 0, 1<<62, 100)
		b, errB := mustOpen(t, all).Lookup(h, 0, 1<<62, 100)
		if errA != nil || errB != nil || !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("hash %d: Put gives %v (%v), PutAll %v (%v)", h, a, errA, b, errB)
		}
	}
	for _, o := range []Options{one, all} {
		names, err := o.FS.List(o.Dir)
		if err != nil || len(names) < 4 {
			t.Fatalf("%d index files (%v): want the keys across rotations", len(names), err)
		}
	}
	na, _ := one.FS.List(one.Dir)
	nb, _ := all.FS.List(all.Dir)
	for i := range na {
		ba, _ := vfs.ReadFile(one.FS, one.Dir+"/"+na[i])
		bb, _ := vfs.ReadFile(all.FS, all.Dir+"/"+nb[i])
		if na[i] != nb[i] || !slices.Equal(ba, bb) {
			t.Fatalf("file %s / %s differs", na[i], nb[i])
		}
	}
}

func TestDamagedFileIsDropped(t *testing.T) {
	o := memOpts(8, 16)
	names := writeIndex(t, o, 40, func(int64) uint64 { return 7 })
	f, _ := o.FS.OpenRW("/x/" + names[1])
	f.WriteAt([]byte{0xff}, 17) // header byte: CRC fails
	f.Close()
	x := mustOpen(t, o)
	// Only the first file survives; End says where re-indexing starts.
	if x.End() != 160 {
		t.Fatalf("end %d, want 160", x.End())
	}
	if hits, _ := x.Lookup(7, 0, 1<<62, 100); len(hits) != 16 {
		t.Fatalf("hits %d", len(hits))
	}
	x.Close()
}

// TestSyncConcurrentWithPutAndRotation: Sync runs its fsyncs without the
// index lock while Put keeps indexing and files rotate; after a reopen
// every entry is still found.
func TestSyncConcurrentWithPutAndRotation(t *testing.T) {
	o := memOpts(2048, 64)
	x := mustOpen(t, o)
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := x.Sync(); err != nil {
				errc <- err
				return
			}
		}
	}()
	const n = 3000
	putRange(t, x, 0, n)
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	syncReopenAndFind(t, x, o, n)
}

// A Sync whose snapshot predates a rotation writes that older state of
// the now sealed file; the next Sync must write the sealed file whole
// over it (an earlier design once lost the sealed file's last entries
// this way).
func TestSyncSnapshotOlderThanRotation(t *testing.T) {
	o := memOpts(2048, 64)
	x := mustOpen(t, o)
	putRange(t, x, 0, 60)
	snapped, resume := make(chan struct{}), make(chan struct{})
	testHookSyncSnapped = func() { close(snapped); <-resume }
	defer func() { testHookSyncSnapped = nil }()
	errc := make(chan error, 1)
	go func() { errc <- x.Sync() }() // snapshot at 60 entries
	<-snapped
	putRange(t, x, 60, 65) // the 65th Put seals the file at 64
	close(resume)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	testHookSyncSnapped = nil
	syncReopenAndFind(t, x, o, 65)
}

// TestRotationDoesNoIO: a file filling up seals it in memory (Put neither
// writes nor fsyncs, so it cannot stall the dispatcher on the disk);
// lookups find its entries meanwhile, and the next Sync writes it, after
// which it is read from the file.
func TestRotationDoesNoIO(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem(), nil)
	o := Options{FS: efs, Dir: "/x", Slots: 8, Capacity: 16, LogEnd: 1 << 40}
	x := mustOpen(t, o)
	var ops []string
	var mu sync.Mutex
	efs.SetInject(func(op vfs.Op, path string) error {
		mu.Lock()
		ops = append(ops, op.String()+" "+path)
		mu.Unlock()
		return errors.New("injected")
	})
	const n = 50 // three files sealed, one active
	putRange(t, x, 0, n)
	if len(ops) != 0 {
		t.Fatalf("Put did I/O: %v", ops)
	}
	find := func(when string) {
		t.Helper()
		for i := int64(0); i < n; i++ {
			if hits, err := x.Lookup(uint64(i), 0, 1<<62, 2); err != nil || len(hits) != 1 || hits[0].Phys != i*10 {
				t.Fatalf("%s: entry %d: %v %v", when, i, hits, err)
			}
		}
	}
	find("before Sync")
	if err := x.Sync(); err == nil {
		t.Fatal("Sync succeeded with every operation failing")
	}
	find("after a failed Sync")
	efs.SetInject(nil)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.mu.RLock()
	for _, f := range x.sealed {
		if f.inMemory() {
			t.Errorf("sealed file %s still in memory after Sync", f.path)
		}
	}
	x.mu.RUnlock()
	find("after Sync (sealed files read from disk)")
	syncReopenAndFind(t, x, o, n)
}

// TestCrashBeforeSealedFileWritten: a crash after rotations that no Sync
// has written loses only what the caller re-indexes from End(): the last
// Sync's state of the file then active.
func TestCrashBeforeSealedFileWritten(t *testing.T) {
	o := memOpts(8, 16)
	x := mustOpen(t, o)
	putRange(t, x, 0, 10)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	putRange(t, x, 10, 40) // two rotations, nothing written
	x.Close()              // the crash: no Sync
	x = mustOpen(t, o)
	if x.End() != 100 {
		t.Fatalf("end %d after the crash, want 100 (the synced 10 entries)", x.End())
	}
	putRange(t, x, 10, 40) // the caller re-indexes from End()
	syncReopenAndFind(t, x, o, 40)
}

// TestOpenDropsFilesAfterAnUnsealedOne: an unsealed file followed by
// another (not something Sync leaves, which writes files in order) is
// complete only up to its header's end: the later files are dropped and
// re-indexing starts there.
func TestOpenDropsFilesAfterAnUnsealedOne(t *testing.T) {
	o := memOpts(8, 16)
	names := writeIndex(t, o, 40, func(i int64) uint64 { return uint64(i) })
	if len(names) != 3 {
		t.Fatalf("files %v", names)
	}
	// Unseal the second file, as if its sealing write never happened, and
	// say it ends after its 5th entry.
	f, _ := o.FS.OpenRW("/x/" + names[1])
	var hb [headerSize]byte
	f.ReadAt(hb[:], 0)
	h, err := decodeHeader(hb[:])
	if err != nil {
		t.Fatal(err)
	}
	h.sealed, h.count, h.end = false, 5, 210
	h.encode(hb[:])
	f.WriteAt(hb[:], 0)
	f.Close()
	x := mustOpen(t, o)
	if x.End() != 210 {
		t.Fatalf("end %d, want 210", x.End())
	}
	left, _ := o.FS.List("/x")
	if slices.Contains(left, names[2]) {
		t.Fatalf("file after the unsealed one kept: %v", left)
	}
	for i := int64(0); i < 40; i++ {
		hits, err := x.Lookup(uint64(i), 0, 1<<62, 2)
		if want := i < 21; err != nil || (len(hits) == 1) != want {
			t.Fatalf("entry %d: %v %v (want found: %v)", i, hits, err, want)
		}
	}
	x.Close()
}

// TestSealedChainLoopIsCorrupt: a sealed file's entries are not covered by
// its header CRC, so a damaged "previous entry" link can point forward or
// at itself. Lookup must report the file corrupt instead of walking the
// loop forever (while holding the index lock every Put needs), and the
// next Open must drop the file so that it is rebuilt from the log.
func TestSealedChainLoopIsCorrupt(t *testing.T) {
	o := memOpts(8, 16)
	names := writeIndex(t, o, 20, func(int64) uint64 { return 7 })
	f, _ := o.FS.OpenRW("/x/" + names[0]) // the sealed file: 16 entries of hash 7
	// Entry 16 (the chain's head) links to itself; entry 3 links forward to 12.
	for _, l := range []struct{ entry, prev uint32 }{{16, 16}, {3, 12}} {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], l.prev)
		f.WriteAt(b[:], headerSize+int64(o.Slots)*4+int64(l.entry-1)*entrySize+20)
	}
	f.Close()
	x := mustOpen(t, o)
	done := make(chan error, 1)
	go func() {
		_, err := x.Lookup(7, 0, 1<<62, 100) // matches: the loop stops at 100 (duplicate) hits
		if err == nil {
			_, err = x.Lookup(7, 3, 3, 100) // inside the file's time span, but entry 16 (time 15) does not match: nothing stops the loop
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, serr.ErrCorrupt) {
			t.Fatalf("lookup over a looping chain: %v, want ErrCorrupt", err)
		}
		x.Close()
		// The next open drops the damaged file and every later one (the
		// caller re-indexes from End()), and the marker with them.
		x = mustOpen(t, o)
		if x.End() != 0 {
			t.Fatalf("end %d after reopen, want 0: the damaged file was kept", x.End())
		}
		for i := int64(0); i < 20; i++ {
			x.Put(7, i*10, 10, i)
			x.SetEnd(i*10 + 10)
		}
		if hits, err := x.Lookup(7, 0, 1<<62, 100); err != nil || len(hits) != 20 {
			t.Fatalf("after rebuild: %d hits, %v", len(hits), err)
		}
		x.Close()
		left, _ := o.FS.List("/x")
		for _, n := range left {
			if strings.HasSuffix(n, damagedSuffix) {
				t.Fatalf("marker %s left after the rebuild", n)
			}
		}
	case <-time.After(10 * time.Second):
		// (no Close: the looping Lookup holds the index lock)
		t.Fatal("lookup still walking a looping chain after 10 s")
	}
}

// writeIndex indexes n records (record i at position i*10, store time i,
// key hash hash(i)) into a new index, syncs and closes it, and returns
// the names of its files in order.
func writeIndex(tb testing.TB, o Options, n int64, hash func(i int64) uint64) []string {
	tb.Helper()
	x, err := Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	for i := int64(0); i < n; i++ {
		if err := x.Put(hash(i), i*10, 10, i); err != nil {
			tb.Fatal(err)
		}
		x.SetEnd(i*10 + 10)
	}
	if err := x.Sync(); err != nil {
		tb.Fatal(err)
	}
	x.Close()
	names, err := o.FS.List(o.Dir)
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// syncReopenAndFind syncs and closes x, reopens the index and checks that
// each of the first n records (record i: key hash i at position i*10) is
// found exactly once.
func syncReopenAndFind(t *testing.T, x *Index, o Options, n int64) {
	t.Helper()
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	x = mustOpen(t, o)
	defer x.Close()
	for i := int64(0); i < n; i++ {
		if hits, err := x.Lookup(uint64(i), 0, 1<<62, 2); err != nil || len(hits) != 1 || hits[0].Phys != i*10 {
			t.Fatalf("entry %d after reopen: %v %v", i, hits, err)
		}
	}
}

// memOpts are the options of an index in "/x" of a new in-memory file
// system, over a log that ends far past every test's records.
func memOpts(slots, capacity int) Options {
	return Options{FS: vfs.NewMem(), Dir: "/x", Slots: slots, Capacity: capacity, LogEnd: 1 << 40}
}

func mustOpen(t testing.TB, o Options) *Index {
	t.Helper()
	x, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// putRange indexes records [from, to): record i has key hash i, log
// position i*10 and store time i.
func putRange(t testing.TB, x *Index, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := x.Put(uint64(i), i*10, 10, i); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		x.SetEnd(i*10 + 10)
	}
}

// recordKeys are the keys of one record at phys: its id and two more.
func recordKeys(phys int64) []Key {
	var ks []Key
	for h := uint64(0); h < 3; h++ {
		ks = append(ks, Key{Hash: uint64(phys)*10 + h, Phys: phys, Size: 10, StoreTime: 1000 + phys})
	}
	return ks
}

// The keys of one record stay in one file: a rotation comes before a
// record that does not fit, so the file sealed there ends past all of
// its entries, and a replay from End() after a crash that lost the next
// file finds each key once.
func TestRotationKeepsARecordsKeysTogether(t *testing.T) {
	o := memOpts(8, 4)
	x := mustOpen(t, o)
	x.PutAll(recordKeys(0))   // 3 of 4 entries
	x.PutAll(recordKeys(100)) // does not fit: rotates at 100
	x.SetEnd(110)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	// The crash lost the file started at 100.
	if err := o.FS.Remove(o.Dir + "/00000000000000000100.idx"); err != nil {
		t.Fatal(err)
	}
	x = mustOpen(t, o)
	if x.End() != 100 {
		t.Fatalf("end %d, want 100: the sealed file ends where the record it left out begins", x.End())
	}
	x.PutAll(recordKeys(100)) // the replay
	x.SetEnd(110)
	for h := uint64(1000); h < 1003; h++ {
		if hits, err := x.Lookup(h, 0, 1<<62, 10); err != nil || len(hits) != 1 {
			t.Fatalf("key %d: %v %v, want one hit", h, hits, err)
		}
	}
	x.Close()
}

// A Sync between a step's PutAll and its SetEnd writes entries past the
// file's end; reopened, the file drops them, as the caller indexes the
// records from End() again.
func TestEntriesPastTheEndAreDroppedOnOpen(t *testing.T) {
	o := memOpts(8, 16)
	x := mustOpen(t, o)
	x.PutAll(recordKeys(0))
	x.SetEnd(10)
	x.PutAll(recordKeys(10)) // its SetEnd never comes
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	x = mustOpen(t, o)
	if x.End() != 10 {
		t.Fatalf("end %d, want 10", x.End())
	}
	x.PutAll(recordKeys(10))
	x.SetEnd(20)
	for _, h := range []uint64{0, 1, 2, 100, 101, 102} {
		if hits, err := x.Lookup(h, 0, 1<<62, 10); err != nil || len(hits) != 1 {
			t.Fatalf("key %d: %v %v, want one hit", h, hits, err)
		}
	}
	x.Close()
}

// An index that never indexed a key (a store with no keyed message yet),
// synced and closed, opens again as it was: its file holds a header and
// no slot table (nothing was ever written there), which is not damage.
func TestEmptyIndexReopensClean(t *testing.T) {
	o := memOpts(4096, 16)
	var warned bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&warned, &slog.HandlerOptions{Level: slog.LevelWarn}))
	x := mustOpen(t, o)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	names, err := o.FS.List("/x")
	if err != nil || len(names) != 1 {
		t.Fatalf("files after the first sync: %v %v", names, err)
	}
	x = mustOpen(t, o)
	if warned.Len() > 0 {
		t.Fatalf("reopening an empty index warned: %s", warned.String())
	}
	if again, _ := o.FS.List("/x"); len(again) != 1 || again[0] != names[0] {
		t.Fatalf("files after reopening: %v, want %v", again, names)
	}
	if err := x.Put(9, 0, 10, 1000); err != nil {
		t.Fatal(err)
	}
	x.SetEnd(10)
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	x = mustOpen(t, o)
	defer x.Close()
	if hits, err := x.Lookup(9, 0, 1<<62, 10); err != nil || len(hits) != 1 || warned.Len() > 0 {
		t.Fatalf("after a key and a reopen: hits %v, %v, warnings %q", hits, err, warned.String())
	}
}
