package admission

import (
	"sync"
	"sync/atomic"
)

// Gate tracks whether the gateway still accepts new work.
type Gate struct {
	draining atomic.Bool
	once     sync.Once
	ch       chan struct{}
	inflight atomic.Int64
	rejected atomic.Int64
}

// NewGate returns an accepting gate.
func NewGate() *Gate { return &Gate{ch: make(chan struct{})} }

// StartDrain switches to Draining; it is idempotent.
func (g *Gate) StartDrain() {
	g.once.Do(func() {
		g.draining.Store(true)
		close(g.ch)
	})
}

// IsDraining reports whether new work must be refused.
func (g *Gate) IsDraining() bool { return g.draining.Load() }

// Draining is closed when draining starts; long polls and streams select
// on it to finish early.
func (g *Gate) Draining() <-chan struct{} { return g.ch }

// Enter counts a call in flight and reports false (without counting) when
// draining. Every true must be paired with Leave.
func (g *Gate) Enter() bool {
	if g.draining.Load() {
		g.rejected.Add(1)
		return false
	}
	g.inflight.Add(1)
	return true
}

// Leave ends a call counted by Enter.
func (g *Gate) Leave() { g.inflight.Add(-1) }

// InFlight is the number of calls between Enter and Leave.
func (g *Gate) InFlight() int64 { return g.inflight.Load() }

// Rejected counts the calls Enter refused because of the drain.
func (g *Gate) Rejected() int64 { return g.rejected.Load() }
