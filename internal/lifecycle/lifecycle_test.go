package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

var evMu sync.Mutex

func record(events *[]string, e string) {
	evMu.Lock()
	*events = append(*events, e)
	evMu.Unlock()
}

func snapshot(events *[]string) []string {
	evMu.Lock()
	defer evMu.Unlock()
	return slices.Clone(*events)
}

func comp(name string, events *[]string, startErr error, stop func(ctx context.Context) error) Component {
	return Func{
		ComponentName: name,
		StartFn: func(context.Context) error {
			record(events, "start "+name)
			return startErr
		},
		StopFn: func(ctx context.Context) error {
			record(events, "stop "+name)
			if stop != nil {
				return stop(ctx)
			}
			return nil
		},
	}
}

func TestOwnerOrderAndCleanReport(t *testing.T) {
	var ev []string
	o := NewOwner(nil)
	o.Add(comp("store", &ev, nil, nil))
	o.Add(comp("broker", &ev, nil, nil))
	o.Add(comp("grpc", &ev, nil, nil))
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rep := o.Shutdown(ctx)
	want := []string{"start store", "start broker", "start grpc", "stop grpc", "stop broker", "stop store"}
	if !slices.Equal(snapshot(&ev), want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	if !rep.Healthy() || len(rep.Components) != 3 {
		t.Fatalf("report %+v", rep)
	}
	if again := o.Shutdown(ctx); !again.Repeated || len(again.Components) != 0 {
		t.Fatalf("second shutdown did work: %+v", again)
	}
}

func TestOwnerStartFailureStopsStarted(t *testing.T) {
	var ev []string
	o := NewOwner(nil)
	o.Add(comp("a", &ev, nil, nil))
	o.Add(comp("b", &ev, errors.New("boom"), nil))
	o.Add(comp("c", &ev, nil, nil))
	err := o.Start(context.Background())
	if err == nil || err.Error() != "start b: boom" {
		t.Fatalf("err = %v", err)
	}
	want := []string{"start a", "start b", "stop a"}
	if !slices.Equal(snapshot(&ev), want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
}

func TestOwnerHungComponentDoesNotHoldDeadline(t *testing.T) {
	var ev []string
	hang := make(chan struct{})
	defer close(hang)
	o := NewOwner(nil)
	o.Add(comp("store", &ev, nil, nil))
	o.Add(comp("stuck", &ev, nil, func(context.Context) error { <-hang; return nil }))
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rep := o.Shutdown(ctx)
	if rep.Healthy() {
		t.Fatal("report healthy with a hung component")
	}
	if rep.Components[0].Name != "stuck" || rep.Components[0].Outcome != OutcomeTimedOut {
		t.Fatalf("stuck: %+v", rep.Components[0])
	}
	// The store was still asked to stop, with the expired context.
	if rep.Components[1].Name != "store" || rep.Components[1].Outcome != OutcomeClean {
		t.Fatalf("store: %+v", rep.Components[1])
	}
	if !slices.Contains(snapshot(&ev), "stop store") {
		t.Fatal("store was not stopped")
	}
}

func TestOwnerFailedStop(t *testing.T) {
	var ev []string
	o := NewOwner(nil)
	o.Add(comp("x", &ev, nil, func(context.Context) error { return errors.New("close: disk gone") }))
	_ = o.Start(context.Background())
	rep := o.Shutdown(context.Background())
	if rep.Healthy() || rep.Components[0].Outcome != OutcomeFailed || rep.Components[0].Error != "close: disk gone" {
		t.Fatalf("%+v", rep)
	}
}

func TestGroupRefusesAfterShutdownAndNamesStragglers(t *testing.T) {
	g := NewGroup(context.Background())
	block := make(chan struct{})
	if err := g.Go("polite", func(ctx context.Context) { <-ctx.Done() }); err != nil {
		t.Fatal(err)
	}
	if err := g.Go("rude", func(context.Context) { <-block }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := g.Shutdown(ctx)
	var sr *StillRunningError
	if !errors.As(err, &sr) || !slices.Equal(sr.Names, []string{"rude"}) {
		t.Fatalf("err = %v", err)
	}
	if err := g.Go("late", func(context.Context) {}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Go after shutdown: %v", err)
	}
	close(block)
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}
