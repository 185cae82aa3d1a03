package admission

import (
	"context"
	"testing"
	"time"
)

func TestBudgetTryAcquire(t *testing.T) {
	b := NewBudget(100)
	if !b.TryAcquire(60) || !b.TryAcquire(40) {
		t.Fatal("reservations within the budget refused")
	}
	if b.TryAcquire(1) {
		t.Fatal("a reservation over the budget was taken")
	}
	if b.Refused() != 1 {
		t.Fatalf("refused = %d, want 1", b.Refused())
	}
	b.Release(60)
	if !b.TryAcquire(50) {
		t.Fatal("released room not reusable")
	}
	b.Release(50)
	b.Release(40)
	if b.InUse() != 0 {
		t.Fatalf("in use %d after releasing everything", b.InUse())
	}
	// Larger than the budget: admitted alone.
	if !b.TryAcquire(1000) {
		t.Fatal("an oversized reservation refused on an empty budget")
	}
	if b.TryAcquire(1) {
		t.Fatal("an oversized reservation left room")
	}
	b.Release(1000)
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}

func TestBudgetAcquireWaitsAndGivesUp(t *testing.T) {
	b := NewBudget(10)
	if !b.Acquire(context.Background(), 10) {
		t.Fatal("first reservation refused")
	}
	got := make(chan bool)
	go func() { got <- b.Acquire(context.Background(), 5) }()
	select {
	case <-got:
		t.Fatal("a reservation over the budget did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(10)
	if !<-got {
		t.Fatal("the waiting reservation failed after room was made")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- b.Acquire(ctx, 10) }()
	cancel()
	if <-got {
		t.Fatal("a cancelled wait reserved")
	}
	if b.InUse() != 5 {
		t.Fatalf("in use %d, want 5", b.InUse())
	}
}

func TestLogLimiter(t *testing.T) {
	l := NewLogLimiter(time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	if ok, n := l.Allow(); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for range 5 {
		if ok, _ := l.Allow(); ok {
			t.Fatal("a line within the interval was allowed")
		}
	}
	now = now.Add(time.Second)
	if ok, n := l.Allow(); !ok || n != 5 {
		t.Fatalf("after the interval: %v, suppressed %d, want true 5", ok, n)
	}
}
