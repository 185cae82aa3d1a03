package peer

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
)

// BenchmarkReplicatedVsSingleSyncAppend alternates one-message appends
// through the leader of 3 in-process members (raft log fsynced by every
// member; stores async, as a member runs them) with appends to one store
// in sync mode (fsync per append round), in the same run, and reports
// each one's time per append and their ratio (replicated/single).
func BenchmarkReplicatedVsSingleSyncAppend(b *testing.B) {
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
	var rep, one time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m := testMsg(i)
		t0 := time.Now()
		if _, err := l.rep.Append(ctx, m); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := single.Append(ctx, m)
		if err != nil || res.Durability != storage.DurabilityLocal {
			b.Fatalf("single append: %+v %v", res, err)
		}
		rep += t1.Sub(t0)
		one += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(rep.Nanoseconds())/n, "replicated-ns/append")
	b.ReportMetric(float64(one.Nanoseconds())/n, "single-sync-ns/append")
	b.ReportMetric(float64(rep)/float64(one), "ratio")
}
