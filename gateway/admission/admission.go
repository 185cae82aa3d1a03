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

// Admit reports whether a new call may start: false once draining, and
// the refusal is counted (Rejected). Calls already running are not
// tracked here; the listeners' graceful stops wait for them.
func (g *Gate) Admit() bool {
	if g.draining.Load() {
		g.rejected.Add(1)
		return false
	}
	return true
}

// Rejected counts the calls Admit refused because of the drain.
func (g *Gate) Rejected() int64 { return g.rejected.Load() }
