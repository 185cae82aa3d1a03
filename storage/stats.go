package storage

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// histBuckets: bucket i counts durations in [2^(i-1), 2^i) microseconds;
// bucket 0 is < 1µs, the last is everything above.
const histBuckets = 26

// Histogram is a snapshot of a latency distribution with power-of-two
// microsecond buckets, ready to be exported to any metrics system.
type Histogram struct {
	// UpperBounds[i] is the exclusive upper bound of Counts[i]; the last
	// bucket is unbounded (UpperBounds has one fewer element).
	UpperBounds []time.Duration
	Counts      []uint64
	Count       uint64
	Sum         time.Duration
}

type histogram struct {
	counts [histBuckets]atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	us := uint64(d / time.Microsecond)
	i := bits.Len64(us)
	if i >= histBuckets {
		i = histBuckets - 1
	}
	h.counts[i].Add(1)
	h.count.Add(1)
	h.sum.Add(int64(d))
}

func (h *histogram) snapshot() Histogram {
	out := Histogram{UpperBounds: make([]time.Duration, histBuckets-1), Counts: make([]uint64, histBuckets)}
	for i := range out.UpperBounds {
		out.UpperBounds[i] = time.Duration(uint64(1)<<i) * time.Microsecond
	}
	for i := range out.Counts {
		out.Counts[i] = h.counts[i].Load()
	}
	out.Count = h.count.Load()
	out.Sum = time.Duration(h.sum.Load())
	return out
}

// Quantile estimates the q-quantile (0..1) as a bucket's upper bound.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	target := uint64(q * float64(h.Count))
	var acc uint64
	for i, c := range h.Counts {
		acc += c
		if acc > target {
			if i < len(h.UpperBounds) {
				return h.UpperBounds[i]
			}
			break
		}
	}
	return h.UpperBounds[len(h.UpperBounds)-1] * 2
}

// Stats is a snapshot of the store's counters, positions and latencies.
type Stats struct {
	Appends       uint64 // records acknowledged
	AppendBytes   uint64
	AppendErrors  uint64 // calls that failed
	FlushTimeouts uint64 // sync-mode calls answered FlushTimeout
	Fsyncs        uint64
	FsyncErrors   uint64
	AppendLatency Histogram // per Append call, including the fsync wait in sync mode
	FsyncLatency  Histogram

	LogMin, Written, Durable, Dispatched int64
	FlushLag                             int64 // Written - Durable (bytes)
	DispatchLag                          int64 // Written - Dispatched (bytes)
	Segments                             int
	Queues                               int
	CheckpointedDispatch                 int64 // dispatch position of the last checkpoint
	// Records the dispatcher took from the writer's feed, and read back
	// from the log (replay, or where the feed had none), since Open.
	DispatchFed, DispatchRead uint64
}

type counters struct {
	appends, appendBytes, appendErrors, flushTimeouts, fsyncs, fsyncErrors atomic.Uint64
	appendLat, fsyncLat                                                    histogram
	dispatchFed, dispatchRead                                              atomic.Uint64
}
