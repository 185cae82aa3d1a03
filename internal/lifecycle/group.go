package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrStopped is returned by Group.Go once the group has begun shutting down.
var ErrStopped = errors.New("lifecycle: group is shutting down")

// Group runs named goroutines under one cancellable context. It is the only
// way components start background work, so a shutdown can say exactly what
// is still running.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	running map[string]int
	wg      sync.WaitGroup
}

// NewGroup returns a group whose goroutines see a context derived from
// parent (values only: cancellation comes from Shutdown).
func NewGroup(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &Group{ctx: ctx, cancel: cancel, running: make(map[string]int)}
}

// Context is cancelled when Shutdown begins.
func (g *Group) Context() context.Context { return g.ctx }

// Go starts fn in a goroutine named name. It refuses (ErrStopped) once
// Shutdown has begun, so nothing new starts during a drain.
func (g *Group) Go(name string, fn func(ctx context.Context)) error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return fmt.Errorf("%w: not starting %q", ErrStopped, name)
	}
	g.running[name]++
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer func() {
			g.mu.Lock()
			if g.running[name]--; g.running[name] == 0 {
				delete(g.running, name)
			}
			g.mu.Unlock()
			g.wg.Done()
		}()
		fn(g.ctx)
	}()
	return nil
}

// Running lists the names of goroutines still running ("name" or "name×n").
func (g *Group) Running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.running))
	for name, n := range g.running {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", name, n))
		} else {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Shutdown cancels the group context and waits for every goroutine to
// return or for ctx to end. It returns an error naming the goroutines still
// running when ctx ended first.
func (g *Group) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return &StillRunningError{Names: g.Running(), Err: ctx.Err()}
	}
}

// StillRunningError reports goroutines that outlived a shutdown deadline.
type StillRunningError struct {
	Names []string
	Err   error
}

func (e *StillRunningError) Error() string {
	return fmt.Sprintf("goroutines still running at the deadline: %v: %v", e.Names, e.Err)
}

func (e *StillRunningError) Unwrap() error { return e.Err }
