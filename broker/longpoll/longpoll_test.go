package longpoll

import (
	"testing"

	"github.com/mqgate/mqgate/broker/mqerr"
)

func TestWatchNotify(t *testing.T) {
	h := New(10)
	a, ra, _ := h.Watch("t1")
	b, rb, _ := h.Watch("t2")
	h.Notify("t1")
	select {
	case <-a:
	default:
		t.Fatal("t1 waiter not woken")
	}
	select {
	case <-b:
		t.Fatal("t2 waiter woken by t1")
	default:
	}
	ra()
	rb()
	if h.Parked() != 0 {
		t.Fatalf("parked = %d", h.Parked())
	}
	// A watch after a notify waits for the next one.
	c, rc, _ := h.Watch("t1")
	defer rc()
	select {
	case <-c:
		t.Fatal("stale notification")
	default:
	}
}

func TestPollingFull(t *testing.T) {
	h := New(2)
	_, r1, _ := h.Watch("k")
	_, r2, _ := h.Watch("k")
	if _, _, err := h.Watch("k"); mqerr.KindOf(err) != mqerr.KindTooManyRequests {
		t.Fatalf("third watch: %v", err)
	}
	r1()
	r1() // release is idempotent
	if _, r3, err := h.Watch("k"); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		r3()
	}
	r2()
}

func TestCloseWakesAll(t *testing.T) {
	h := New(0)
	a, ra, _ := h.Watch("x")
	defer ra()
	h.Close()
	<-a
	<-h.Closed()
}
