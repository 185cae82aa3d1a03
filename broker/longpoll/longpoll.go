package longpoll

import (
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// DefaultMaxParked bounds parked waiters in total (spec §5.8.1 upstream cap).
const DefaultMaxParked = 100000

// Hub wakes waiters by key.
type Hub struct {
	mu     sync.Mutex
	keys   map[string]*waitSet
	parked atomic.Int64
	max    int64
	closed chan struct{}
	once   sync.Once
}

type waitSet struct {
	ch chan struct{}
	n  int
}

// New returns a hub allowing max parked waiters (≤ 0: DefaultMaxParked).
func New(max int) *Hub {
	if max <= 0 {
		max = DefaultMaxParked
	}
	return &Hub{keys: make(map[string]*waitSet), max: int64(max), closed: make(chan struct{})}
}

// Watch registers interest in key and returns a channel closed at the next
// Notify(key) (or Close). Call release when done waiting. Too many waiters
// ⇒ KindTooManyRequests.
func (h *Hub) Watch(key string) (<-chan struct{}, func(), error) {
	if h.parked.Add(1) > h.max {
		h.parked.Add(-1)
		return nil, nil, mqerr.Errorf(mqerr.KindTooManyRequests, "polling full: %d receives are already waiting", h.max)
	}
	h.mu.Lock()
	ws := h.keys[key]
	if ws == nil {
		ws = &waitSet{ch: make(chan struct{})}
		h.keys[key] = ws
	}
	ws.n++
	ch := ws.ch
	h.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.parked.Add(-1)
			h.mu.Lock()
			if cur := h.keys[key]; cur == ws {
				if ws.n--; ws.n == 0 {
					delete(h.keys, key)
				}
			}
			h.mu.Unlock()
		})
	}
	return ch, release, nil
}

// Notify wakes every current waiter of key. Cheap when nobody waits.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	ws := h.keys[key]
	if ws != nil {
		delete(h.keys, key)
	}
	h.mu.Unlock()
	if ws != nil {
		close(ws.ch)
	}
}

// Parked is the number of registered waiters.
func (h *Hub) Parked() int64 { return h.parked.Load() }

// Closed is closed by Close: waiters should stop waiting (drain).
func (h *Hub) Closed() <-chan struct{} { return h.closed }

// Close wakes everyone for good.
func (h *Hub) Close() {
	h.once.Do(func() {
		close(h.closed)
		h.mu.Lock()
		keys := h.keys
		h.keys = make(map[string]*waitSet)
		h.mu.Unlock()
		for _, ws := range keys {
			close(ws.ch)
		}
	})
}
