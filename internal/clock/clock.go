package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer firing once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset re-arms the timer to fire after d.
	Reset(d time.Duration)
}

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return &realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r *realTimer) C() <-chan time.Time   { return r.t.C }
func (r *realTimer) Stop() bool            { return r.t.Stop() }
func (r *realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a manually advanced clock for tests.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// changed is closed and replaced whenever a timer is created, so tests
	// can await a goroutine that goes to sleep.
	changed chan struct{}
}

// NewFake returns a fake clock at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t, changed: make(chan struct{})} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves time forward by d, firing due timers in order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due []*fakeTimer
	keep := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	f.timers = keep
	f.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		select {
		case t.c <- now:
		default:
		}
	}
}

// Timers is the number of armed timers.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Changed returns a channel closed when the next timer is armed.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time
	at time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.Stop()
	t.f.mu.Lock()
	t.at = t.f.now.Add(d)
	if d <= 0 {
		now := t.f.now
		t.f.mu.Unlock()
		select {
		case t.c <- now:
		default:
		}
		return
	}
	t.f.timers = append(t.f.timers, t)
	close(t.f.changed)
	t.f.changed = make(chan struct{})
	t.f.mu.Unlock()
}

// At returns a timer that fires at the absolute time at of c (at once
// when at has passed). Unlike NewTimer(at.Sub(Now())), it cannot miss a
// fake clock's advance between reading the time and arming the timer.
func At(c Clock, at time.Time) Timer {
	if f, ok := c.(*Fake); ok {
		return f.newTimerAt(at)
	}
	return c.NewTimer(at.Sub(c.Now()))
}

func (f *Fake) newTimerAt(at time.Time) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	if !at.After(f.now) {
		now := f.now
		f.mu.Unlock()
		t.c <- now
		return t
	}
	t.at = at
	f.timers = append(f.timers, t)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return t
}
