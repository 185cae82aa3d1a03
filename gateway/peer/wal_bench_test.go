package peer

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// walBenchPayload is the size of an entry's data: three 1 KiB messages
// in one raft entry.
const walBenchPayload = 3 << 10

// BenchmarkWALLayout compares the raft-log layouts of a member hosting
// several data groups on this machine's disk (the test's temp dir),
// with etcd's WAL created as openWAL creates it. A round is every group
// writing k entries and a hard state, as a leader's Ready carries them,
// and ends when all are written:
//
//   - pergroup: one WAL per group, each saved by its own goroutine, as
//     each group's raft loop saves its own (one fsync each, as wal.Save
//     does for a Ready with entries);
//   - shared: one WAL; the round's G·k entries and a hard state are
//     saved together, with one fsync, by the benchmark's goroutine;
//   - writer: one WAL behind a writer goroutine, as a shared log would
//     be built: each group's goroutine hands its entries to the writer
//     and waits for its answer, and the writer saves what is waiting
//     with one fsync (group commit), so a round takes from 1 to G
//     fsyncs;
//   - gather: the same, but the writer waits for every group's entries
//     and saves them with one fsync, as if the groups' Readies always
//     came together.
//
// shared is the least a shared WAL can cost; writer and gather add the
// handing over. All three record one hard state a save, where a shared
// log would record one a group. The group goroutines of pergroup,
// writer and gather are woken for each round, as raft loops are for
// each Ready.
//
// Every iteration runs one round of each layout, the first of them
// rotating, so all see the same state of the disk; ns/op is the four
// rounds. For each layout it reports the wall time of a round, the CPU
// time of the process (getrusage, user+sys) over its rounds per round
// and per entry, and the fsyncs per round (the WALs' own count of their
// fsyncs checks the layouts'), and the ratios to pergroup of wall time
// and CPU. groups=1 is the reference: there pergroup and shared write
// the same, so their ratios are the cost of waking a goroutine, and
// writer's and gather's that of handing over.
func BenchmarkWALLayout(b *testing.B) {
	for _, g := range []int{3, 1} {
		for _, k := range []int{1, 4} {
			b.Run(fmt.Sprintf("groups=%d/k=%d", g, k), func(b *testing.B) { benchWALLayout(b, g, k) })
		}
	}
}

// benchWAL is one raft log of the benchmark and the index it is at.
type benchWAL struct {
	w    *wal.WAL
	last uint64
}

// createBenchWAL creates a WAL in dir as openWAL does for a new group.
func createBenchWAL(b *testing.B, dir string) *benchWAL {
	w, err := wal.Create(zap.NewNop(), dir, []byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return &benchWAL{w: w}
}

// next builds the next n entries of l and the hard state a leader's
// Ready carries with them.
func (l *benchWAL) next(n int, data []byte) walSave {
	ents := make([]*raftpb.Entry, n)
	for i := range ents {
		l.last++
		ents[i] = &raftpb.Entry{Term: new(uint64(1)), Index: new(l.last),
			Type: raftpb.EntryType_EntryNormal.Enum(), Data: data}
	}
	st := &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(l.last - uint64(n))}
	return walSave{st, ents}
}

// walSave is a save of a hard state and entries.
type walSave struct {
	st   *raftpb.HardState
	ents []*raftpb.Entry
}

// walSubmit is a group's save handed to the writer.
type walSubmit struct {
	walSave
	done chan error
}

// walLayoutTotals is what the rounds of one layout took.
type walLayoutTotals struct {
	wall, cpu time.Duration
	syncs     int
}

// benchGroups starts a goroutine per group that runs save on what in
// gives it and answers on the channel returned; close in to stop them.
func benchGroups(in []chan walSave, save func(g int, s walSave) error) <-chan error {
	done := make(chan error, len(in))
	for g, c := range in {
		go func() {
			for s := range c {
				done <- save(g, s)
			}
		}()
	}
	return done
}

func benchWALLayout(b *testing.B, groups, k int) {
	dir := b.TempDir()
	data := make([]byte, walBenchPayload)
	rand.Read(data)
	// wal.Save fsyncs when raft.MustSync says so: every save here, as
	// each carries entries.
	mustSync := raft.MustSync(&raftpb.HardState{Term: new(uint64(1))}, &raftpb.HardState{}, k)

	own := make([]*benchWAL, groups)
	for g := range groups {
		own[g] = createBenchWAL(b, filepath.Join(dir, "groups", fmt.Sprint(g), "raft"))
	}
	shared := createBenchWAL(b, filepath.Join(dir, "shared", "raft"))

	// A writer saves what is waiting on its queue (all of the groups'
	// saves when all is set), then answers each; it counts its fsyncs.
	writer := func(dir string, all bool) (*benchWAL, chan walSubmit, *int) {
		l := createBenchWAL(b, dir)
		q := make(chan walSubmit, groups)
		syncs := new(int)
		go func() {
			for s := range q {
				batch := []walSubmit{s}
				ents := append([]*raftpb.Entry(nil), s.ents...)
				for all && len(batch) < groups {
					s := <-q
					batch = append(batch, s)
					ents = append(ents, s.ents...)
				}
			more:
				for !all {
					select {
					case s, ok := <-q:
						if !ok {
							break more
						}
						batch = append(batch, s)
						ents = append(ents, s.ents...)
					default:
						break more
					}
				}
				err := l.w.Save(s.st, ents)
				if mustSync {
					*syncs++
				}
				for _, s := range batch {
					s.done <- err
				}
			}
		}()
		return l, q, syncs
	}
	wl, wq, writerSyncs := writer(filepath.Join(dir, "writer", "raft"), false)
	gl, gq, gatherSyncs := writer(filepath.Join(dir, "gather", "raft"), true)

	// handOver starts a goroutine per group that hands its saves to q.
	handOver := func(q chan walSubmit) ([]chan walSave, <-chan error) {
		in := make([]chan walSave, groups)
		replies := make([]chan error, groups)
		for g := range groups {
			in[g], replies[g] = make(chan walSave), make(chan error, 1)
		}
		return in, benchGroups(in, func(g int, s walSave) error {
			q <- walSubmit{s, replies[g]}
			return <-replies[g]
		})
	}
	pgIn := make([]chan walSave, groups)
	for g := range groups {
		pgIn[g] = make(chan walSave)
	}
	pgDone := benchGroups(pgIn, func(g int, s walSave) error { return own[g].w.Save(s.st, s.ents) })
	wrIn, wrDone := handOver(wq)
	gaIn, gaDone := handOver(gq)
	defer func() {
		for g := range groups {
			close(pgIn[g])
			close(wrIn[g])
			close(gaIn[g])
		}
		close(wq)
		close(gq)
	}()

	saves := make([]walSave, groups)
	groupRound := func(t *walLayoutTotals, in []chan walSave, done <-chan error) {
		c0, t0 := processCPU(), time.Now()
		for g := range groups {
			in[g] <- saves[g]
		}
		var err error
		for range groups {
			if e := <-done; e != nil {
				err = e
			}
		}
		t.wall += time.Since(t0)
		t.cpu += processCPU() - c0
		if err != nil {
			b.Fatal(err)
		}
	}
	var pg, sh, wr, ga walLayoutTotals
	rounds := []func(){
		func() {
			for g := range groups {
				saves[g] = own[g].next(k, data)
			}
			groupRound(&pg, pgIn, pgDone)
			if mustSync {
				pg.syncs += groups
			}
		},
		func() {
			s := shared.next(groups*k, data)
			c0, t0 := processCPU(), time.Now()
			err := shared.w.Save(s.st, s.ents)
			sh.wall += time.Since(t0)
			sh.cpu += processCPU() - c0
			if err != nil {
				b.Fatal(err)
			}
			if mustSync {
				sh.syncs++
			}
		},
		func() {
			for g := range groups {
				saves[g] = wl.next(k, data)
			}
			groupRound(&wr, wrIn, wrDone)
		},
		func() {
			for g := range groups {
				saves[g] = gl.next(k, data)
			}
			groupRound(&ga, gaIn, gaDone)
		},
	}

	fsyncs0 := walFsyncs(b)
	for i := 0; b.Loop(); i++ {
		for j := range rounds {
			rounds[(i+j)%len(rounds)]()
		}
	}
	b.StopTimer()
	// The writers are idle: every round has been answered.
	wr.syncs, ga.syncs = *writerSyncs, *gatherSyncs
	if got, want := walFsyncs(b)-fsyncs0, pg.syncs+sh.syncs+wr.syncs+ga.syncs; got != want {
		b.Errorf("the WALs fsynced %d times, the rounds count %d", got, want)
	}

	n, entries := float64(b.N), float64(b.N*groups*k)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, l := range []struct {
		name string
		t    walLayoutTotals
	}{{"pergroup", pg}, {"shared", sh}, {"writer", wr}, {"gather", ga}} {
		b.ReportMetric(us(l.t.wall)/n, l.name+"-us/round")
		b.ReportMetric(us(l.t.cpu)/n, l.name+"-cpu-us/round")
		b.ReportMetric(us(l.t.cpu)/entries, l.name+"-cpu-us/entry")
		b.ReportMetric(float64(l.t.syncs)/n, l.name+"-fsyncs/round")
		if l.name != "pergroup" {
			b.ReportMetric(float64(l.t.wall)/float64(pg.wall), l.name+"/pergroup-wall")
			b.ReportMetric(float64(l.t.cpu)/float64(pg.cpu), l.name+"/pergroup-cpu")
		}
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walFsyncs is how many fsyncs etcd's WALs in this process have made
// (their etcd_disk_wal_fsync_duration_seconds histogram).
func walFsyncs(b *testing.B) int {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_disk_wal_fsync_duration_seconds" {
			n := 0
			for _, m := range mf.GetMetric() {
				n += int(m.GetHistogram().GetSampleCount())
			}
			return n
		}
	}
	b.Fatal("no etcd_disk_wal_fsync_duration_seconds metric")
	return 0
}
