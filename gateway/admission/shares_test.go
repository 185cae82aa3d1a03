package admission

import (
	"context"
	"testing"
	"time"
)

func TestSharesBoundEachKeyAndTheWhole(t *testing.T) {
	s := NewShares[string](100, 60)
	if !s.TryAcquire("a", 60) {
		t.Fatal("a reservation within the share refused")
	}
	if s.TryAcquire("a", 1) {
		t.Fatal("a key took more than its share")
	}
	if !s.TryAcquire("b", 40) {
		t.Fatal("another key was refused room the first left")
	}
	if s.TryAcquire("c", 1) {
		t.Fatal("a reservation over the whole budget was taken")
	}
	if s.Refused() != 2 || s.Held("a") != 60 || s.Held("b") != 40 || s.InUse() != 100 {
		t.Fatalf("refused %d, a %d, b %d, in use %d", s.Refused(), s.Held("a"), s.Held("b"), s.InUse())
	}
	// Released in parts; a key holding nothing is forgotten.
	s.Release("a", 20)
	s.Release("a", 40)
	s.Release("b", 40)
	if s.InUse() != 0 || s.Keys() != 0 {
		t.Fatalf("in use %d, %d keys after releasing everything", s.InUse(), s.Keys())
	}
	// Idle keys are forgotten in batches.
	for i := range maxIdleKeys + 10 {
		key := string(rune('A' + i))
		if !s.TryAcquire(key, 1) {
			t.Fatal("refused")
		}
		s.Release(key, 1)
	}
	if n := len(s.keys); n > maxIdleKeys {
		t.Fatalf("%d keys remembered", n)
	}
	// Larger than a share: reserved as the share.
	if !s.TryAcquire("a", 1000) || s.Held("a") != 60 {
		t.Fatalf("an oversized reservation holds %d", s.Held("a"))
	}
	s.Release("a", 1000)
	if s.InUse() != 0 || s.Keys() != 0 {
		t.Fatalf("in use %d, %d keys", s.InUse(), s.Keys())
	}
}

func TestSharesAcquireWaitsForItsKeyAndGivesUp(t *testing.T) {
	s := NewShares[string](100, 50)
	if !s.Acquire(context.Background(), "a", 50) {
		t.Fatal("first reservation refused")
	}
	got := make(chan bool)
	go func() { got <- s.Acquire(context.Background(), "a", 10) }()
	// Another key is not held up by a's waiter.
	if !s.Acquire(context.Background(), "b", 50) {
		t.Fatal("another key waited for a's share")
	}
	select {
	case <-got:
		t.Fatal("a reservation over its key's share did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	s.Release("b", 50) // room in the whole, none in a's share
	select {
	case <-got:
		t.Fatal("a reservation over its key's share took room")
	case <-time.After(20 * time.Millisecond):
	}
	s.Release("a", 50)
	if !<-got {
		t.Fatal("the waiting reservation failed after its key made room")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- s.Acquire(ctx, "a", 45) }()
	cancel()
	if <-got {
		t.Fatal("a cancelled wait reserved")
	}
	if s.Held("a") != 10 || s.InUse() != 10 {
		t.Fatalf("a holds %d, in use %d, want 10", s.Held("a"), s.InUse())
	}
	s.Release("a", 10)
	if s.Keys() != 0 {
		t.Fatalf("%d keys left after the waits ended", s.Keys())
	}
}
