package longpoll

import (
	"runtime"
	"sync"
	"testing"
	"time"

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

func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestNotifyWakesOnePerClass(t *testing.T) {
	h := New(0)
	var a, b []*Waiter
	for i := 0; i < 3; i++ {
		w, err := h.WatchOne("t", "g\x00*")
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, w)
	}
	for i := 0; i < 2; i++ {
		w, _ := h.WatchOne("t", "g2\x00*")
		b = append(b, w)
	}
	all, rAll, _ := h.Watch("t")
	other, _ := h.WatchOne("u", "g\x00*")
	if h.Parked() != 7 {
		t.Fatalf("parked %d", h.Parked())
	}

	h.Notify("t")
	if !woken(a[0]) || woken(a[1]) || woken(a[2]) || !woken(b[0]) || woken(b[1]) || woken(other) {
		t.Fatal("a notify must wake the longest-waiting member of each class, and nobody else")
	}
	select {
	case <-all:
	default:
		t.Fatal("a Watch waiter is woken by every notify")
	}
	if h.Woken() != 3 {
		t.Fatalf("woken %d, want 3", h.Woken())
	}
	rAll()
	if !a[0].Release() {
		t.Fatal("Release reports whether a wake was delivered")
	}
	if b[1].Release() {
		t.Fatal("an unwoken waiter's Release reports no wake")
	}

	// A member that took messages passes the wake on; a released member
	// is skipped.
	h.pass("t", "g\x00*")
	if !woken(a[1]) || woken(a[2]) {
		t.Fatal("pass must wake the next member")
	}
	if !a[1].Release() {
		t.Fatal("a passed wake is a wake")
	}
	h.pass("t", "g\x00*")
	if !woken(a[2]) {
		t.Fatal("pass must wake the last member")
	}
	h.pass("t", "g\x00*") // nobody left: no-op
	h.pass("t", "nobody")
	a[2].Release()
	a[2].Release() // idempotent
	if h.Parked() != 2 {
		t.Fatalf("parked %d, want 2 (b[0], other)", h.Parked())
	}
	h.pass("t", "g2\x00*") // b[1] released: nobody to wake
	if woken(b[1]) || h.Woken() != 5 {
		t.Fatalf("woken %d, want 5", h.Woken())
	}

	// Close wakes every member of every class.
	h.Close()
	if !woken(other) {
		t.Fatal("close must wake everyone")
	}
	for _, w := range []*Waiter{b[0], other} {
		w.Release()
	}
	if h.Parked() != 0 || len(h.keys) != 0 {
		t.Fatalf("parked %d, keys %d after everything was released", h.Parked(), len(h.keys))
	}
}

func TestWatchOneReleaseForgetsKeys(t *testing.T) {
	h := New(2)
	w1, _ := h.WatchOne("t", "c")
	w2, _ := h.WatchOne("t", "c")
	if _, err := h.WatchOne("t", "c"); mqerr.KindOf(err) != mqerr.KindTooManyRequests {
		t.Fatalf("third watch: %v", err)
	}
	w2.Release() // the tail
	w1.Release() // the head, now alone
	if len(h.keys) != 0 {
		t.Fatalf("keys %v after release", h.keys)
	}
	h.Notify("t")
	if woken(w1) || woken(w2) || h.Woken() != 0 {
		t.Fatal("released waiters must not be woken")
	}
	// The middle of a queue.
	ws := make([]*Waiter, 2)
	ws[0], _ = h.WatchOne("t", "c")
	ws[1], _ = h.WatchOne("t", "c")
	ws[0].Release()
	h.Notify("t")
	if !woken(ws[1]) {
		t.Fatal("the remaining member must be woken")
	}
	ws[1].Release()
	if len(h.keys) != 0 || h.Parked() != 0 {
		t.Fatal("hub not empty")
	}
}

// TestHubConcurrentClasses: receives of two classes park, look and leave
// concurrently, as pop.Receive does. Each round, with every receive
// parked, makes one to four messages visible with a single notify; a
// receive that took one returns to its client, which sends the next
// receive only in the next round, so a round's messages all reach
// receives only if the wake is passed on. The hub must end empty.
func TestHubConcurrentClasses(t *testing.T) {
	h := New(0)
	const (
		perClass = 6
		rounds   = 400
	)
	classes := []string{"g1", "g2"}
	var mu sync.Mutex
	avail := map[string]int{}    // messages visible to each class
	var drained chan struct{}    // closed when a round's messages are all taken
	round := make(chan struct{}) // closed when the next round starts
	take := func(class string) (bool, chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		if avail[class] == 0 {
			return false, nil
		}
		avail[class]--
		if avail["g1"] == 0 && avail["g2"] == 0 {
			close(drained)
		}
		return true, round
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range classes {
		for i := 0; i < perClass; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					w, err := h.WatchOne("t", c)
					if err != nil {
						t.Error(err)
						return
					}
					if ok, next := take(c); ok {
						w.Leave(true) // more may be there
						select {
						case <-next: // the client's next receive
						case <-stop:
							return
						}
						continue
					}
					select {
					case <-w.C():
						w.Release()
					case <-stop:
						w.Leave(false)
						return
					}
				}
			}()
		}
	}
	for i := 0; i < rounds; i++ {
		for h.Parked() != int64(len(classes)*perClass) {
			runtime.Gosched()
		}
		mu.Lock()
		for _, c := range classes {
			avail[c] = i%4 + 1
		}
		drained = make(chan struct{})
		d := drained
		mu.Unlock()
		h.Notify("t")
		select {
		case <-d:
		case <-time.After(30 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("round %d: messages stranded with receives parked: %v left", i, avail)
		}
		mu.Lock()
		prev := round
		round = make(chan struct{})
		mu.Unlock()
		close(prev) // the takers' clients send their next receives
	}
	close(stop)
	wg.Wait()
	if h.Parked() != 0 || len(h.keys) != 0 {
		t.Fatalf("parked %d, keys %d at the end", h.Parked(), len(h.keys))
	}
}

// OnPark runs once for each admitted waiter, of either kind, and not for
// one refused because polling is full.
func TestOnPark(t *testing.T) {
	h := New(2)
	n := 0
	h.SetOnPark(func() { n++ })
	_, release, err := h.Watch("t")
	if err != nil {
		t.Fatal(err)
	}
	w, err := h.WatchOne("t", "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Watch("t"); err == nil {
		t.Fatal("a third waiter admitted with room for two")
	}
	if n != 2 {
		t.Fatalf("OnPark ran %d times, want 2", n)
	}
	release()
	w.Leave(false)
	if h.Parked() != 0 {
		t.Fatalf("parked %d after both left", h.Parked())
	}
}
