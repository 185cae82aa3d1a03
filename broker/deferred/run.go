package deferred

import (
	"context"
	"time"

	"github.com/mqgate/mqgate/internal/clock"
)

// Run is the owner loop of a stage: it hands every pending message that is
// due to handle (at most batch at a time, earliest first), then sleeps
// until the next one is due or kick fires, until ctx ends. handle must
// resolve or reschedule what it gets; what it leaves alone comes back
// after a short park (a failed publish is retried).
func (s *Stage) Run(ctx context.Context, clk clock.Clock, kick <-chan struct{}, batch int, handle func(ctx context.Context, p Pending, now int64)) {
	for {
		now := clk.Now().UnixMilli()
		due, next := s.Due(now, batch)
		for _, p := range due {
			handle(ctx, p, now)
		}
		if len(due) == batch {
			continue
		}
		var tc <-chan time.Time
		var t clock.Timer
		if next > 0 {
			t = clock.At(clk, time.UnixMilli(next))
			tc = t.C()
		}
		select {
		case <-ctx.Done():
		case <-kick:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}
