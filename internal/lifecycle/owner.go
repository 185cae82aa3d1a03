package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Component is one unit the Owner starts and stops.
//
// Start must return once the component is usable (a listener is bound, a
// store is open); background work goes into a Group. Stop must respect ctx:
// when its deadline passes, the component gives up waiting and returns.
type Component interface {
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Func adapts two functions into a Component.
type Func struct {
	ComponentName string
	StartFn       func(ctx context.Context) error
	StopFn        func(ctx context.Context) error
}

func (f Func) Name() string { return f.ComponentName }

func (f Func) Start(ctx context.Context) error {
	if f.StartFn == nil {
		return nil
	}
	return f.StartFn(ctx)
}

func (f Func) Stop(ctx context.Context) error {
	if f.StopFn == nil {
		return nil
	}
	return f.StopFn(ctx)
}

// Owner starts components in registration order and stops them in reverse.
type Owner struct {
	log *slog.Logger

	mu       sync.Mutex
	comps    []Component
	started  int // components [0, started) are running
	shutdown bool
}

// NewOwner returns an empty owner.
func NewOwner(log *slog.Logger) *Owner {
	if log == nil {
		log = slog.Default()
	}
	return &Owner{log: log}
}

// Add registers a component; it starts after those added before it.
func (o *Owner) Add(c Component) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.comps = append(o.comps, c)
}

// Start starts every component in order. When one fails, the ones already
// started are stopped (in reverse, against ctx) and the error names the
// failing component.
func (o *Owner) Start(ctx context.Context) error {
	o.mu.Lock()
	comps := append([]Component(nil), o.comps...)
	o.mu.Unlock()
	for i, c := range comps {
		if err := ctx.Err(); err != nil {
			o.Shutdown(ctx)
			return fmt.Errorf("start aborted before %s: %w", c.Name(), err)
		}
		t0 := time.Now()
		if err := c.Start(ctx); err != nil {
			rep := o.Shutdown(ctx)
			if !rep.Healthy() {
				o.log.Error("cleanup after failed start was not clean", "report", rep)
			}
			return fmt.Errorf("start %s: %w", c.Name(), err)
		}
		o.mu.Lock()
		o.started = i + 1
		o.mu.Unlock()
		o.log.Debug("component started", "component", c.Name(), "elapsed", time.Since(t0))
	}
	return nil
}

// Shutdown stops the started components in reverse order, every one against
// the same ctx (so the first signal's deadline holds for all of them). A
// component whose Stop does not return before the deadline is reported as
// timed out and the next one is stopped with the already-expired ctx, so a
// hung component cannot hold the process past the deadline. Shutdown runs
// once; later calls return an empty report.
func (o *Owner) Shutdown(ctx context.Context) Report {
	o.mu.Lock()
	if o.shutdown {
		o.mu.Unlock()
		return Report{Repeated: true}
	}
	o.shutdown = true
	comps := append([]Component(nil), o.comps[:o.started]...)
	o.mu.Unlock()

	start := time.Now()
	rep := Report{}
	if dl, ok := ctx.Deadline(); ok {
		rep.Deadline = dl
	}
	// After the deadline, components still get a short shared grace to
	// report their own outcome (a Stop that returns at once on an expired
	// context is clean, not timed out); a hung one costs at most this much.
	var graceEnd time.Time
	for i := len(comps) - 1; i >= 0; i-- {
		rep.Components = append(rep.Components, stopOne(ctx, comps[i], &graceEnd))
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// PostDeadlineGrace is the time, shared by all components, that Shutdown
// waits past the deadline for Stop calls to return; each component gets at
// least MinStopWait of it even when the shared grace is spent.
const (
	PostDeadlineGrace = 100 * time.Millisecond
	MinStopWait       = 5 * time.Millisecond
)

func stopOne(ctx context.Context, c Component, graceEnd *time.Time) ComponentReport {
	t0 := time.Now()
	cr := ComponentReport{Name: c.Name()}
	done := make(chan error, 1)
	go func() { done <- c.Stop(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		if graceEnd.IsZero() {
			*graceEnd = time.Now().Add(PostDeadlineGrace)
		}
		wait := max(time.Until(*graceEnd), MinStopWait)
		timer := time.NewTimer(wait)
		select {
		case err = <-done:
		case <-timer.C:
			err = fmt.Errorf("did not stop before the deadline: %w", ctx.Err())
			cr.Outcome = OutcomeTimedOut
		}
		timer.Stop()
	}
	cr.Elapsed = time.Since(t0)
	if err != nil {
		cr.Error = err.Error()
		var sr *StillRunningError
		if errors.As(err, &sr) {
			cr.StillRunning = sr.Names
		}
		if cr.Outcome == "" {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				cr.Outcome = OutcomeTimedOut
			} else {
				cr.Outcome = OutcomeFailed
			}
		}
	} else {
		cr.Outcome = OutcomeClean
	}
	return cr
}

// Outcome of one component's stop.
type Outcome string

const (
	OutcomeClean    Outcome = "clean"
	OutcomeTimedOut Outcome = "timed-out"
	OutcomeFailed   Outcome = "failed"
)

// ComponentReport describes how one component stopped.
type ComponentReport struct {
	Name         string        `json:"name"`
	Outcome      Outcome       `json:"outcome"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	Error        string        `json:"error,omitempty"`
	StillRunning []string      `json:"still_running,omitempty"`
}

// Report is the result of a shutdown, in stop order.
type Report struct {
	Deadline   time.Time         `json:"deadline,omitzero"`
	Elapsed    time.Duration     `json:"elapsed_ns"`
	Components []ComponentReport `json:"components"`
	// Repeated is set on the report of a second Shutdown call, which does
	// nothing.
	Repeated bool `json:"repeated,omitempty"`
}

// Healthy reports whether every component stopped cleanly.
func (r Report) Healthy() bool {
	for _, c := range r.Components {
		if c.Outcome != OutcomeClean {
			return false
		}
	}
	return true
}

// LogValue renders the report for log/slog.
func (r Report) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Bool("healthy", r.Healthy()),
		slog.Duration("elapsed", r.Elapsed),
	}
	if !r.Deadline.IsZero() {
		attrs = append(attrs, slog.Time("deadline", r.Deadline))
	}
	for _, c := range r.Components {
		ca := []any{slog.String("outcome", string(c.Outcome)), slog.Duration("elapsed", c.Elapsed)}
		if c.Error != "" {
			ca = append(ca, slog.String("error", c.Error))
		}
		if len(c.StillRunning) > 0 {
			ca = append(ca, slog.Any("still_running", c.StillRunning))
		}
		attrs = append(attrs, slog.Group(c.Name, ca...))
	}
	return slog.GroupValue(attrs...)
}
