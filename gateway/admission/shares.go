package admission

import (
	"context"
	"sync"
	"sync/atomic"
)

// Shares is a budget divided among keys (a user, a client address): the
// keys together hold at most Max, and each key at most Share of it, so
// that one key cannot take the whole budget from the others. Units are
// whatever the caller counts (bytes of requests, connections).
//
// Reservations of a key are counted in units, not in calls: a caller may
// reserve in several parts and release in several parts, as long as it
// releases what it reserved. Keys that hold nothing are forgotten in
// batches (maxIdleKeys), so that a key reserving and releasing in turn
// does not add and remove its entry each time.
type Shares[K comparable] struct {
	max, share int64

	mu    sync.Mutex
	cond  *sync.Cond
	inUse int64
	keys  map[K]*keyUse
	idle  int // entries holding nothing and awaited by nobody

	refused atomic.Int64
}

type keyUse struct {
	inUse   int64
	waiters int
}

// maxIdleKeys is how many keys holding nothing are remembered before they
// are forgotten together.
const maxIdleKeys = 1024

// NewShares returns a budget of total divided into shares of at most
// share per key (0 < share ≤ total; a larger share is total).
func NewShares[K comparable](total, share int64) *Shares[K] {
	s := &Shares[K]{max: total, share: min(max(share, 1), total), keys: make(map[K]*keyUse)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Max is the whole budget.
func (s *Shares[K]) Max() int64 { return s.max }

// Share is what one key may hold at most. A reservation larger than that
// is reserved as Share.
func (s *Shares[K]) Share() int64 { return s.share }

// InUse is what all keys hold now.
func (s *Shares[K]) InUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse
}

// Held is what key holds now.
func (s *Shares[K]) Held(key K) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		return k.inUse
	}
	return 0
}

// Keys is the number of keys holding or waiting for something.
func (s *Shares[K]) Keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys) - s.idle
}

// Refused counts the reservations refused (TryAcquire) or abandoned
// (Acquire).
func (s *Shares[K]) Refused() int64 { return s.refused.Load() }

func (s *Shares[K]) clamp(n int64) int64 { return max(0, min(n, s.share)) }

// fits reports whether n more fit for k; mu held.
func (s *Shares[K]) fits(k *keyUse, n int64) bool {
	return s.inUse+n <= s.max && k.inUse+n <= s.share
}

// key returns key's entry, no longer idle if it was; mu held.
func (s *Shares[K]) key(key K) *keyUse {
	k := s.keys[key]
	if k == nil {
		k = &keyUse{}
		s.keys[key] = k
	} else if k.inUse == 0 && k.waiters == 0 {
		s.idle--
	}
	return k
}

// rest notes k idle when it holds nothing and nobody waits for it, and
// forgets the idle keys once there are maxIdleKeys of them; mu held.
func (s *Shares[K]) rest(k *keyUse) {
	if k.inUse != 0 || k.waiters != 0 {
		return
	}
	s.idle++
	if s.idle < maxIdleKeys {
		return
	}
	for key, k := range s.keys {
		if k.inUse == 0 && k.waiters == 0 {
			delete(s.keys, key)
		}
	}
	s.idle = 0
}

// take reserves n for k; mu held.
func (s *Shares[K]) take(k *keyUse, n int64) {
	k.inUse += n
	s.inUse += n
}

// TryAcquire reserves n (at most Share) for key if it fits now: within
// key's share and the whole budget. Release the same amount.
func (s *Shares[K]) TryAcquire(key K, n int64) bool {
	n = s.clamp(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(key)
	if !s.fits(k, n) {
		s.rest(k)
		s.refused.Add(1)
		return false
	}
	s.take(k, n)
	return true
}

// Acquire reserves n (at most Share) for key, waiting for room until ctx
// ends; it reports whether it reserved. Release the same amount.
func (s *Shares[K]) Acquire(ctx context.Context, key K, n int64) bool {
	n = s.clamp(n)
	s.mu.Lock()
	k := s.key(key)
	if s.fits(k, n) {
		s.take(k, n)
		s.mu.Unlock()
		return true
	}
	k.waiters++
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.fits(k, n) {
		if ctx.Err() != nil {
			k.waiters--
			s.rest(k)
			s.refused.Add(1)
			return false
		}
		s.cond.Wait()
	}
	k.waiters--
	s.take(k, n)
	return true
}

// Release returns n reserved for key by TryAcquire or Acquire (in one
// part or several).
func (s *Shares[K]) Release(key K, n int64) {
	n = s.clamp(n)
	if n == 0 {
		return
	}
	s.mu.Lock()
	if k := s.keys[key]; k != nil && k.inUse > 0 {
		n = min(n, k.inUse)
		k.inUse -= n
		s.inUse -= n
		s.rest(k)
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}
