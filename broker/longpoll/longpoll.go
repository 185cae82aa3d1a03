package longpoll

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// DefaultMaxParked bounds parked waiters in total.
const DefaultMaxParked = 100000

// Hub wakes waiters by key.
//
// Two kinds of waiter share a key:
//   - Watch: woken by every Notify (a classic or offset-API pull waiting
//     on its own queue and offset: no two are alike);
//   - WatchOne: one of a class of interchangeable waiters (POP receives of
//     one group with one filter on one topic or queue: what one of them
//     can take, any of them can). A Notify wakes only the longest-waiting
//     member of each class; a woken member that finds messages hands the
//     wake on to the next (Waiter.Leave), one that finds none ends the chain,
//     since none of its class would find any either. An arrival therefore
//     costs one or two wake-ups per class instead of one per parked
//     receive.
type Hub struct {
	mu     sync.Mutex
	keys   map[string]*waitSet
	parked atomic.Int64
	woken  atomic.Int64
	max    int64
	closed chan struct{}
	once   sync.Once
	onPark func() // SetOnPark
}

type waitSet struct {
	// all: the Watch waiters' channel, closed by the next Notify; nil
	// when none waits.
	all  chan struct{}
	nAll int
	// classes: the WatchOne waiters of each class, longest waiting first.
	classes map[string]*queue
}

func (ws *waitSet) empty() bool { return ws.nAll == 0 && len(ws.classes) == 0 }

// queue is a class's waiters, a doubly linked FIFO.
type queue struct{ head, tail *Waiter }

// Waiter is a WatchOne registration.
type Waiter struct {
	h          *Hub
	key, class string
	ch         chan struct{} // buffered 1: a wake is never lost
	prev, next *Waiter
	// under h.mu: queued until woken or released; woken says a wake was
	// delivered to ch.
	queued, woken, released bool
}

// New returns a hub allowing max parked waiters (≤ 0: DefaultMaxParked).
func New(max int) *Hub {
	if max <= 0 {
		max = DefaultMaxParked
	}
	return &Hub{keys: make(map[string]*waitSet), max: int64(max), closed: make(chan struct{})}
}

// SetOnPark installs f, called each time a waiter is admitted (before it
// parks), outside the hub's lock; it must not block. Set it before the hub
// is used.
func (h *Hub) SetOnPark(f func()) { h.onPark = f }

func (h *Hub) admit() error {
	if h.parked.Add(1) > h.max {
		h.parked.Add(-1)
		return mqerr.Errorf(mqerr.KindTooManyRequests, "polling full: %d receives are already waiting", h.max)
	}
	if h.onPark != nil {
		h.onPark()
	}
	return nil
}

// set returns key's wait set, creating it. h.mu held.
func (h *Hub) set(key string) *waitSet {
	ws := h.keys[key]
	if ws == nil {
		ws = &waitSet{}
		h.keys[key] = ws
	}
	return ws
}

// Watch registers interest in key and returns a channel closed at the next
// Notify(key) (or Close). Call release when done waiting. Too many waiters
// ⇒ KindTooManyRequests.
func (h *Hub) Watch(key string) (<-chan struct{}, func(), error) {
	if err := h.admit(); err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	ws := h.set(key)
	if ws.all == nil {
		ws.all = make(chan struct{})
	}
	ws.nAll++
	ch := ws.all
	h.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.parked.Add(-1)
			h.mu.Lock()
			// A Notify since the watch has replaced or dropped the channel
			// and forgotten its waiters.
			if cur := h.keys[key]; cur != nil && cur.all == ch {
				if cur.nAll--; cur.nAll == 0 {
					cur.all = nil
					if cur.empty() {
						delete(h.keys, key)
					}
				}
			}
			h.mu.Unlock()
		})
	}
	return ch, release, nil
}

// WatchOne registers a waiter of class under key (see Hub). Wait on C;
// then Release to look again, or Leave when done. Too many waiters ⇒
// KindTooManyRequests.
func (h *Hub) WatchOne(key, class string) (*Waiter, error) {
	if err := h.admit(); err != nil {
		return nil, err
	}
	w := &Waiter{h: h, key: key, class: class, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.set(key)
	if ws.classes == nil {
		ws.classes = make(map[string]*queue)
	}
	q := ws.classes[class]
	if q == nil {
		q = &queue{}
		ws.classes[class] = q
	}
	w.prev, w.queued = q.tail, true
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	return w, nil
}

// C receives once the waiter is woken.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Release ends the registration (idempotent) and reports whether a wake
// was delivered to it; for a member that will look again (a new
// registration). One that is done waiting calls Leave.
func (w *Waiter) Release() (woken bool) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if !w.released {
		w.released = true
		h.parked.Add(-1)
		if w.queued {
			h.unlink(w)
		}
	}
	return w.woken
}

// Leave ends the registration of a member that is done waiting and wakes
// the next member of its class when a wake was delivered to it or more
// is true (it took messages and more may be visible, or it failed):
// someone else must look in its stead.
func (w *Waiter) Leave(more bool) {
	if w.Release() || more {
		w.h.pass(w.key, w.class)
	}
}

// unlink removes w from its class queue. h.mu held, w queued.
func (h *Hub) unlink(w *Waiter) {
	ws := h.keys[w.key]
	q := ws.classes[w.class]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	if q.head == nil {
		delete(ws.classes, w.class)
		if ws.empty() {
			delete(h.keys, w.key)
		}
	}
}

// wakeHead wakes the longest-waiting member of q. h.mu held.
func (h *Hub) wakeHead(q *queue) {
	w := q.head
	h.unlink(w)
	w.woken = true
	w.ch <- struct{}{} // buffered, and each waiter is woken at most once
	h.woken.Add(1)
}

// Notify wakes every Watch waiter of key and the longest-waiting member of
// each WatchOne class. Cheap when nobody waits.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	ws := h.keys[key]
	if ws == nil {
		h.mu.Unlock()
		return
	}
	all := ws.all
	h.woken.Add(int64(ws.nAll))
	ws.all, ws.nAll = nil, 0
	for _, q := range ws.classes {
		h.wakeHead(q) // may delete the class: allowed while ranging
	}
	if ws.empty() && h.keys[key] == ws {
		delete(h.keys, key)
	}
	h.mu.Unlock()
	if all != nil {
		close(all)
	}
}

// pass wakes the longest-waiting member of class under key, if any: the
// caller took messages and more may be there for its class.
func (h *Hub) pass(key, class string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ws := h.keys[key]; ws != nil {
		if q := ws.classes[class]; q != nil {
			h.wakeHead(q)
		}
	}
}

// QueueKey is the key of one queue of a topic, for waiters that read that
// queue only (pulls): an arrival notifies its topic and its queue.
func QueueKey(topic string, queue int32) string {
	return topic + "\x00" + strconv.Itoa(int(queue))
}

// Parked is the number of registered waiters.
func (h *Hub) Parked() int64 { return h.parked.Load() }

// Woken counts the waiters a Notify or a passed wake (Waiter.Leave) has woken so far.
func (h *Hub) Woken() int64 { return h.woken.Load() }

// Closed is closed by Close: waiters should stop waiting (drain).
func (h *Hub) Closed() <-chan struct{} { return h.closed }

// Close wakes everyone for good; waiters also watch Closed.
func (h *Hub) Close() {
	h.once.Do(func() {
		close(h.closed)
		h.mu.Lock()
		keys := h.keys
		h.keys = make(map[string]*waitSet)
		var alls []chan struct{}
		for _, ws := range keys {
			if ws.all != nil {
				alls = append(alls, ws.all)
			}
			for _, q := range ws.classes {
				for w := q.head; w != nil; w = w.next {
					w.queued, w.woken = false, true
					w.ch <- struct{}{}
				}
			}
		}
		h.mu.Unlock()
		for _, ch := range alls {
			close(ch)
		}
	})
}
