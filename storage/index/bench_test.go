package index

import (
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// BenchmarkPutWithSync: the dispatcher's side of the index on a real
// disk. Puts of random key hashes while another goroutine Syncs every
// 100 ms and as soon as a file is sealed, as the store checkpoints (every
// second, and on a seal); files of 65,536 entries, so that a run rotates many times.
// max-put-ms is the longest single Put: the dispatcher's stall, which
// delays every consumer's view of new messages.
//
//	go test -run '^$' -bench PutWithSync -benchtime 2000000x ./storage/index/
func BenchmarkPutWithSync(b *testing.B) {
	sealed := make(chan struct{}, 1)
	onSeal := func() {
		select {
		case sealed <- struct{}{}:
		default:
		}
	}
	x, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), Capacity: 1 << 16, LogEnd: 1 << 62, OnSeal: onSeal})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-t.C:
			case <-sealed:
			}
			if err := x.Sync(); err != nil {
				done <- err
				return
			}
		}
	}()
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := x.Put(uint64(i)*0x9E3779B97F4A7C15, int64(i)*1100, 1100, int64(i)); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(t0))
	}
	b.StopTimer()
	close(stop)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-put-ms")
}
