package clock

import "time"

// Offset is the system clock with its wall time shifted by D: Now is
// time.Now().Add(D), as on a machine whose clock runs D ahead (D < 0:
// behind). Timers measure real durations, as the system's do. It stands
// in for a skewed machine in tests (Process, built with the
// mqgate_testhooks tag).
type Offset struct {
	D time.Duration
}

func (o Offset) Now() time.Time { return time.Now().Add(o.D) }

func (Offset) NewTimer(d time.Duration) Timer { return Real{}.NewTimer(d) }
