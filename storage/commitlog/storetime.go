package commitlog

import "time"

// anchorSpan bounds how long store times derived from the monotonic clock
// may miss a step of the wall clock.
const anchorSpan = 100 * time.Millisecond

// storeClock gives a batch its store time. A custom clock (Options.Now) is
// called as it is. The system clock is read through time.Now, two clock
// reads, only every anchorSpan; between those reads a store time is the
// anchor's wall time plus the monotonic time since it. That monotonic
// reading is the appender's own when it passed one (AppendAt: the store
// reads the clock for its latency figure anyway), else one clock read.
// With one append per batch, as when appenders write their own records,
// each read saved is one per append. Owned by the writer role.
type storeClock struct {
	now      func() time.Time // nil: system clock
	epoch    time.Time        // origin of monotonic readings (Options.Epoch)
	anchored bool
	at       time.Duration // the anchor: a monotonic reading since epoch
	wallNs   int64         // and the wall clock then, Unix ns
}

// millis is the store time in Unix milliseconds for the monotonic reading
// at (time since epoch), or for now if at is not positive.
func (c *storeClock) millis(at time.Duration) int64 {
	if c.now != nil {
		return c.now().UnixMilli()
	}
	if at <= 0 {
		at = time.Since(c.epoch) // monotonic only: epoch carries a monotonic reading
	}
	if !c.anchored || at-c.at >= anchorSpan {
		t := time.Now()
		c.anchored, c.at, c.wallNs = true, t.Sub(c.epoch), t.UnixNano()
	}
	// An appender's reading may precede the anchor (taken by a later
	// append): the difference is then negative, and still exact.
	return (c.wallNs + int64(at-c.at)) / int64(time.Millisecond)
}
