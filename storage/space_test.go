package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// fakeNow is a clock a test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestDiskReserve: new messages are admitted (CheckSpace) while more than
// the reserve is free and refused with ErrDiskFull once less is, while
// the store's other appends (what consumers write) go on into the
// reserve; when space returns, CheckSpace admits again without a restart.
func TestDiskReserve(t *testing.T) {
	forEachMode(t, testDiskReserve)
}

func testDiskReserve(t *testing.T, o Options) {
	mem := o.FS.(*vfs.MemFS)
	clk := &fakeNow{t: time.Unix(1_700_000_000, 0)}
	o.Now = clk.now
	const reserve = 64 << 10
	o.DiskReserve, o.DiskReservePercent = reserve, -1
	s := mustOpen(t, "/d", o)
	for i := range 20 {
		appendOne(t, s, msg("T", 0, i))
	}
	waitAll(t, s)
	u, _ := mem.Usage("/d")
	mem.SetCapacity(int64(u.Total-u.Free) + reserve + 20<<10)
	clk.advance(spaceMaxAge)
	s.Space() // the background loop's look a second later
	admitted := 0
	for ; ; admitted++ {
		if admitted == 10000 {
			t.Fatalf("%d messages admitted: the reserve never refused (%+v)", admitted, s.Space())
		}
		clk.advance(spaceMinGap)
		if err := s.CheckSpace(); err != nil {
			if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "below its reserve of 64.0 KiB") {
				t.Fatalf("refusal: %v", err)
			}
			break
		}
		appendOne(t, s, msg("T", 0, 20+admitted))
	}
	if admitted == 0 {
		t.Fatalf("nothing admitted above the reserve: %+v", s.Space())
	}
	sp := s.Space()
	if !sp.Low() || sp.Refused != 1 || sp.Reserve != reserve || sp.Free >= reserve {
		t.Fatalf("space after the refusal: %+v", sp)
	}
	// What consumers write goes on: the reserve holds it (records like
	// the POP journal's, with no keys to index).
	for i := range 100 {
		rec := &message.Message{Topic: "sys", BornTime: int64(i), BornHost: "h:1", Body: []byte(fmt.Sprintf("journal-%d", i))}
		if _, err := s.Append(context.Background(), rec); err != nil {
			t.Fatalf("append %d into the reserve: %v (%+v)", i, err, s.Space())
		}
	}
	clk.advance(spaceMinGap)
	if err := s.CheckSpace(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("still below the reserve: %v", err)
	}
	mem.SetCapacity(0) // an operator made room
	clk.advance(spaceMinGap)
	if err := s.CheckSpace(); err != nil {
		t.Fatalf("space returned, still refused: %v (%+v)", err, s.Space())
	}
	appendOne(t, s, msg("T", 0, 20+admitted))
	verifyConsistent(t, s)
	mustClose(t, s)
}

// usageCounter counts the looks at the file system's free space.
type usageCounter struct {
	vfs.FS
	n atomic.Int64
}

func (c *usageCounter) Usage(dir string) (vfs.DiskUsage, error) {
	c.n.Add(1)
	return c.FS.Usage(dir)
}

// TestDiskReserveLooks: CheckSpace answers from the last look at the
// file system while what was appended since cannot have used the
// headroom above the reserve up, and looks again (at most every
// spaceMinGap) once it may have; the background loop looks every
// spaceMaxAge (here: Space, which it calls).
func TestDiskReserveLooks(t *testing.T) {
	mem := vfs.NewMem()
	fs := &usageCounter{FS: mem}
	o := testOpts(fs)
	o.StagingDir = "off"
	clk := &fakeNow{t: time.Unix(1_700_000_000, 0)}
	o.Now = clk.now
	o.DiskReserve, o.DiskReservePercent = 64<<10, -1
	o.noSpaceLooks = true // counted here: Space stands for the background loop's
	mem.SetCapacity(1 << 20)
	s := mustOpen(t, "/d", o)
	looks := func() int64 { return fs.n.Load() }
	check := func(wantLooks int64) {
		t.Helper()
		if err := s.CheckSpace(); err != nil {
			t.Fatal(err)
		}
		if got := looks(); got != wantLooks {
			t.Fatalf("%d looks at the free space, want %d", got, wantLooks)
		}
	}
	n := looks() // Open looked
	for range 100 {
		check(n)
	}
	appendOne(t, s, msg("T", 0, 0)) // far less than the headroom
	clk.advance(spaceMaxAge)
	check(n)
	// 4 KiB of headroom: the reserve is the rest of what is free.
	s.opts.DiskReserve = int64(s.space.last.Load().Free) - 4<<10
	s.Space()
	if got := looks(); got != n+1 {
		t.Fatalf("Space a second after the last look: %d looks, want %d", got, n+1)
	}
	for from, i := s.Stats().AppendBytes, 1; s.Stats().AppendBytes-from <= 4<<10; i++ {
		appendOne(t, s, msg("T", 0, i))
	}
	check(n + 1) // within spaceMinGap of the last look
	clk.advance(spaceMinGap)
	if err := s.CheckSpace(); err != nil && !errors.Is(err, ErrDiskFull) {
		t.Fatal(err)
	}
	if got := looks(); got != n+2 {
		t.Fatalf("%d looks at the free space after the headroom was appended, want %d", got, n+2)
	}
	mustClose(t, s)
}

// TestDiskReserveLooksEverySecond: the store looks at its free space once
// a second by itself, so a disk filled by others is seen without a send.
func TestDiskReserveLooksEverySecond(t *testing.T) {
	mem := vfs.NewMem()
	fs := &usageCounter{FS: mem}
	o := testOpts(fs)
	o.StagingDir = "off"
	s := mustOpen(t, "/d", o)
	defer mustClose(t, s)
	n := fs.n.Load()
	deadline := time.Now().Add(10 * time.Second)
	for fs.n.Load() == n {
		if time.Now().After(deadline) {
			t.Fatal("the store did not look at its free space by itself within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiskReserveCountsReservedBlocks: the blocks the log holds reserved
// ahead of its records with a staging ring (a whole segment by the
// reserver where the disk has plenty of room, the writer's own chunks
// elsewhere) are room for new messages, though the file system counts
// them as used.
func TestDiskReserveCountsReservedBlocks(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int64 // the reserver reserves a whole segment only with 64 MiB to spare
	}{{"reserver", 1 << 30}, {"writer", 32 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			o := storeModes[2].apply(t, testOpts(mem))
			o.SegmentSize = 1 << 20
			o.DiskReserve, o.DiskReservePercent = 512<<10, -1
			mem.SetCapacity(c.capacity)
			s := mustOpen(t, "/d", o)
			appendOne(t, s, msg("T", 0, 0))
			deadline := time.Now().Add(10 * time.Second)
			for s.log.ReservedAhead() < 512<<10 {
				if time.Now().After(deadline) {
					t.Fatalf("no blocks reserved ahead: %d", s.log.ReservedAhead())
				}
				time.Sleep(time.Millisecond)
			}
			u, _ := mem.Usage("/d")
			mem.SetCapacity(int64(u.Total-u.Free) + 100<<10) // 100 KiB free, and the segment's reserved blocks
			s.look(0)                                        // look again now
			if err := s.CheckSpace(); err != nil {
				t.Fatalf("refused with the segment's blocks reserved: %v (ahead %d)", err, s.log.ReservedAhead())
			}
			if sp := s.Space(); sp.Free < 512<<10 || sp.Low() {
				t.Fatalf("space: %+v", sp)
			}
			mustClose(t, s)
		})
	}
}

// TestDiskReserveOffAndPercent: both parts negative turn the reserve off;
// otherwise the larger of the two counts.
func TestDiskReserveOffAndPercent(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(100 << 20)
	o := testOpts(mem)
	o.StagingDir = "off"
	o.DiskReserve, o.DiskReservePercent = -1, -1
	s := mustOpen(t, "/d", o)
	if sp := s.Space(); sp.Reserve != 0 || sp.Low() || s.CheckSpace() != nil {
		t.Fatalf("reserve off: %+v %v", sp, s.CheckSpace())
	}
	mustClose(t, s)
	for _, c := range []struct {
		bytes   int64
		percent float64
		want    uint64
	}{
		{1 << 20, 10, 10 << 20},
		{20 << 20, 10, 20 << 20},
		{-1, 10, 10 << 20},
		{3 << 20, -1, 3 << 20},
		{0, 0, DefaultDiskReserve}, // the defaults: 1 GiB, more than 5% of 100 MiB
	} {
		o.DiskReserve, o.DiskReservePercent = c.bytes, c.percent
		s := mustOpen(t, "/d", o)
		if sp := s.Space(); sp.Reserve != c.want {
			t.Errorf("reserve %d, %v%%: %d, want %d", c.bytes, c.percent, sp.Reserve, c.want)
		}
		mustClose(t, s)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 2047: "1.9 KiB",
		64 << 20: "64.0 MiB", 8<<20 - 1: "7.9 MiB", 5 << 30: "5.0 GiB", 1<<60 + 1<<59: "1.5 EiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// BenchmarkCheckSpace: the disk-reserve check every send makes, from 16
// goroutines at once, on the OS file system (a look at the free space
// once a second, two atomic loads otherwise). Compare its cpu-ns/check
// (the benchmark loop's own cost included) with BenchmarkAppendAsync's
// cpu-ns/append in the same run.
func BenchmarkCheckSpace(b *testing.B) {
	s := openBench(b, filepath.Join(benchDir(b), "store"), Options{FlushMode: FlushAsync})
	defer s.Close(context.Background())
	b.SetParallelism(16 / max(runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.CheckSpace(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/check")
}
