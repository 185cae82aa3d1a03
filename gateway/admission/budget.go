package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget bounds the bytes of requests a listener holds at once: a request
// reserves its size before it is read or handed on, and releases it when
// its call ends. Memory then stays near the budget however many clients
// send large requests at once; what does not fit waits (Acquire) or is
// refused with a "too many requests" answer (TryAcquire).
type Budget struct {
	max   int64
	mu    sync.Mutex
	cond  *sync.Cond
	inUse int64
	// refused counts TryAcquire refusals and Acquire calls that gave up.
	refused atomic.Int64
}

// NewBudget returns a budget of max bytes (max > 0).
func NewBudget(max int64) *Budget {
	b := &Budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Max is the budget's size.
func (b *Budget) Max() int64 { return b.max }

// InUse is what is reserved now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// Refused counts the reservations refused or abandoned.
func (b *Budget) Refused() int64 { return b.refused.Load() }

// clamp makes a request larger than the whole budget reserve the whole
// budget: it is admitted once nothing else is held.
func (b *Budget) clamp(n int64) int64 { return max(0, min(n, b.max)) }

// TryAcquire reserves n bytes if they fit now. Release the same n.
func (b *Budget) TryAcquire(n int64) bool {
	n = b.clamp(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse+n > b.max {
		b.refused.Add(1)
		return false
	}
	b.inUse += n
	return true
}

// Acquire reserves n bytes, waiting for room until ctx ends; it reports
// whether it reserved them. Release the same n.
func (b *Budget) Acquire(ctx context.Context, n int64) bool {
	n = b.clamp(n)
	b.mu.Lock()
	if b.inUse+n <= b.max {
		b.inUse += n
		b.mu.Unlock()
		return true
	}
	b.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.inUse+n > b.max {
		if ctx.Err() != nil {
			b.refused.Add(1)
			return false
		}
		b.cond.Wait()
	}
	b.inUse += n
	return true
}

// Release returns n bytes reserved by TryAcquire or Acquire.
func (b *Budget) Release(n int64) {
	n = b.clamp(n)
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.inUse -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

// LogLimiter lets through one log line per interval and counts the ones it
// held back, so that a flood of bad input from the network costs the log
// one line per interval. The zero value is not usable; use NewLogLimiter.
type LogLimiter struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// NewLogLimiter returns a limiter allowing one line per every.
func NewLogLimiter(every time.Duration) *LogLimiter {
	return &LogLimiter{every: every, now: time.Now}
}

// Allow reports whether to log a line now and, when it does, how many
// lines were held back since the last one logged.
func (l *LogLimiter) Allow() (ok bool, suppressed int64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	l.last = now
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
