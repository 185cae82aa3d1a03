package commitlog

import "time"

// anchorSpan bounds how long store times derived from the monotonic clock
// may miss a step of the wall clock.
const anchorSpan = 100 * time.Millisecond

// storeClock gives a batch its store time. A custom clock (Options.Now) is
// called as it is. The system clock is read through time.Now, two clock
// reads, only every anchorSpan; between those reads a store time is the
// anchor's wall time plus the monotonic time since it, one read. With one
// append per batch, as when appenders write their own records, that was a
// clock read per append. Owned by the writer role.
type storeClock struct {
	now    func() time.Time // nil: system clock
	anchor time.Time        // wall and monotonic reading, re-read every anchorSpan
}

// millis is the current time in Unix milliseconds.
func (c *storeClock) millis() int64 {
	if c.now != nil {
		return c.now().UnixMilli()
	}
	since := time.Since(c.anchor) // monotonic only: anchor carries a monotonic reading
	if c.anchor.IsZero() || since < 0 || since >= anchorSpan {
		c.anchor = time.Now()
		since = 0
	}
	return (c.anchor.UnixNano() + int64(since)) / int64(time.Millisecond)
}
