package peer

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// BenchmarkReplicatedVsSingleSyncAppend alternates rounds of one-message
// appends through the leader of 3 in-process members (raft log fsynced
// by every member; their stores async, as members run them) with rounds
// of appends to one store in sync mode (an fsync per append round), in
// the same run, and reports each one's time per round and the ratio
// (replicated/single). Rounds are one append (appenders=1) or that many
// concurrent appends.
func BenchmarkReplicatedVsSingleSyncAppend(b *testing.B) {
	for _, k := range []int{1, 8} {
		b.Run(fmt.Sprintf("appenders=%d", k), func(b *testing.B) { benchReplicated(b, k) })
	}
}

func benchReplicated(b *testing.B, k int) {
	c := newTestCluster(b, 3, 0)
	l := c.leader()
	o := storeOpts()
	o.FlushMode = storage.FlushSync
	single, err := storage.Open(filepath.Join(b.TempDir(), "single"), o)
	if err != nil {
		b.Fatal(err)
	}
	defer single.Close(context.Background())
	ctx := context.Background()
	round := func(app func(*message.Message) error, base int) {
		var wg sync.WaitGroup
		errs := make(chan error, k)
		for j := range k {
			wg.Go(func() {
				if err := app(testMsg(base + j)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	replicated := func(m *message.Message) error { _, err := l.rep.Append(ctx, m); return err }
	one := func(m *message.Message) error {
		res, err := single.Append(ctx, m)
		if err == nil && res.Durability != storage.DurabilityLocal {
			err = fmt.Errorf("single append not durable: %+v", res)
		}
		return err
	}
	var rep, sgl time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		round(replicated, i*k)
		t1 := time.Now()
		round(one, i*k)
		rep += t1.Sub(t0)
		sgl += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(rep.Nanoseconds())/n, "replicated-ns/round")
	b.ReportMetric(float64(sgl.Nanoseconds())/n, "single-sync-ns/round")
	b.ReportMetric(float64(rep)/float64(sgl), "ratio")
}

// BenchmarkCommitHold alternates rounds of appends through the leader of
// 3 in-process members (16 appenders, 100 appends each) with the
// leader's commit-only appends held back (sendAll) and sent at once, in
// the same run, and reports, for each, the process CPU (all three
// members) per append, the raft messages the leader sends per entry and
// the appends an entry carries, and the ratio of CPU per append (held
// over sent at once).
func BenchmarkCommitHold(b *testing.B) {
	c := newTestCluster(b, 3, 0)
	l := c.leader()
	ctx := context.Background()
	const appenders, each = 16, 100
	type totals struct {
		cpu           time.Duration
		msgs, entries uint64
	}
	var held, atOnce totals
	base := 0
	round := func(t *totals, off bool) {
		commitHoldOff.Store(off)
		defer commitHoldOff.Store(false)
		st0, err := l.node.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		c0 := processCPU()
		var wg sync.WaitGroup
		for j := range appenders {
			from := base + j*each
			wg.Go(func() {
				for i := range each {
					if _, err := l.rep.Append(ctx, testMsg(from+i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		base += appenders * each
		t.cpu += processCPU() - c0
		st, err := l.node.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.msgs += st.Work.MessagesSent - st0.Work.MessagesSent
		t.entries += st.Work.Proposals - st0.Work.Proposals
	}
	for b.Loop() {
		round(&held, false)
		round(&atOnce, true)
	}
	n := float64(b.N * appenders * each)
	b.ReportMetric(float64(held.cpu.Nanoseconds())/1e3/n, "held-cpu-µs/append")
	b.ReportMetric(float64(atOnce.cpu.Nanoseconds())/1e3/n, "at-once-cpu-µs/append")
	b.ReportMetric(float64(held.cpu)/float64(atOnce.cpu), "cpu-ratio")
	b.ReportMetric(float64(held.msgs)/float64(held.entries), "held-msgs/entry")
	b.ReportMetric(float64(atOnce.msgs)/float64(atOnce.entries), "at-once-msgs/entry")
	b.ReportMetric(n/float64(held.entries), "held-appends/entry")
	b.ReportMetric(n/float64(atOnce.entries), "at-once-appends/entry")
}
