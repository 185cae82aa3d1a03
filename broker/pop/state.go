package pop

import (
	"container/heap"
	"sync"
)

// flight is one message of one (group, topic) that was delivered and not
// yet acknowledged, or (flagHeld) read but held back behind its FIFO
// message group. It lives in its queue's flights map and, unless held, in
// the subscription's deadline heap.
type flight struct {
	queue  int32
	offset int64
	phys   int64
	size   int32
	epoch  uint32 // deliveries so far; the current delivery's attempt
	// gen versions the record: it grows with every change a client can
	// see (redelivery, ChangeInvisibleDuration, release) and orders journal
	// replay; a handle is valid only for the gen it was issued with.
	gen       uint32
	visibleAt int64 // unix ms: deadline while in flight, due time after
	flags     uint8
	msgGroup  string
	client    string // auto-renewing client
	renewFrom int64  // unix ms the current delivery began: renewals count from it; handles issued before it are stale
	renewN    uint8
	// pend (memory only) marks a flight whose change is being recorded in
	// the journal by the operation that set it (see pending.go); every
	// other operation leaves the flight alone until it is settled. A
	// pending flight is never in the deadline heap.
	pend pendKind
	hidx int // index in sub.due, -1 when not there
}

func (f *flight) held() bool { return f.flags&flagHeld != 0 }

// fstate is the part of a flight a delivery or a change rewrites.
type fstate struct {
	epoch, gen uint32
	visibleAt  int64
	flags      uint8
	client     string
	renewFrom  int64
	renewN     uint8
}

func (f *flight) state() fstate {
	return fstate{epoch: f.epoch, gen: f.gen, visibleAt: f.visibleAt, flags: f.flags, client: f.client, renewFrom: f.renewFrom, renewN: f.renewN}
}

func (f *flight) setState(st fstate) {
	f.epoch, f.gen, f.visibleAt, f.flags, f.client, f.renewFrom, f.renewN = st.epoch, st.gen, st.visibleAt, st.flags, st.client, st.renewFrom, st.renewN
}

// qstate is one queue of a subscription.
type qstate struct {
	// next is the first offset never read for this group; every offset
	// below it is done or in flights.
	next    int64
	flights map[int64]*flight
	// resets counts offset resets of the queue, so a receive that failed
	// to record its reads knows whether it may still move next back.
	resets uint32
}

// sub is the POP state of one (group, topic).
type sub struct {
	// Fixed at creation.
	group string
	topic string
	key   string // long-poll key
	gh    uint32 // NameHash(group)
	th    uint32 // NameHash(topic)
	// since (memory only) is the log end when the sub was made (or
	// recovered): a deletion record of its topic at or past it is one
	// this sub predates, and a snapshot leaves the sub out (snapshot.go).
	since int64

	// mu guards everything below it, the flights included, but the
	// scheduler's fields at the end.
	mu     sync.Mutex
	queues map[int32]*qstate
	due    flightHeap
	rr     int32

	// FIFO: flights of each message group that are in flight or due (at
	// most one is delivered at a time), and the held ones in offset order.
	active map[string]int
	held   map[string][]*flight

	// attempts remembers the flights a FIFO receive delivered, by the
	// client's attempt id, so a retried receive gets them again.
	attempts     map[string][]*flight
	attemptOrder []string

	// resetAt: unix ms of the last offset reset. A delivery made in that
	// millisecond (or earlier, the clock having stepped back) is dated a
	// millisecond after it, so handles issued before the reset are older
	// than every delivery made since (see Service.Reset).
	resetAt int64

	// The scheduler's, guarded by Service.schedMu.
	wakeAt int64
	sidx   int
}

func newSub(group, topic string) *sub {
	return &sub{group: group, topic: topic, key: pollKey(topic), gh: NameHash(group), th: NameHash(topic),
		queues: make(map[int32]*qstate), active: make(map[string]int), held: make(map[string][]*flight),
		attempts: make(map[string][]*flight), sidx: -1}
}

func pollKey(topic string) string { return topic }

func (s *sub) q(id int32) *qstate {
	q := s.queues[id]
	if q == nil {
		q = &qstate{next: -1, flights: make(map[int64]*flight)}
		s.queues[id] = q
	}
	return q
}

// add inserts a new flight (into the deadline heap unless it is held or
// pending).
func (s *sub) add(f *flight) {
	s.q(f.queue).flights[f.offset] = f
	if f.held() {
		s.held[f.msgGroup] = insertHeld(s.held[f.msgGroup], f)
		f.hidx = -1
		return
	}
	if f.fifo() {
		s.active[f.msgGroup]++
	}
	if f.pend != 0 {
		f.hidx = -1
		return
	}
	heap.Push(&s.due, f)
}

// remove deletes a flight (acked, moved to the DLQ, lost to retention).
// When it was the active flight of a FIFO message group, the group's next
// held flight becomes due at now; remove returns it (nil otherwise).
func (s *sub) remove(f *flight, now int64) *flight {
	q := s.queues[f.queue]
	if q != nil && q.flights[f.offset] == f {
		delete(q.flights, f.offset)
	}
	if f.hidx >= 0 {
		heap.Remove(&s.due, f.hidx)
	}
	if f.held() {
		s.held[f.msgGroup] = removeHeld(s.held[f.msgGroup], f)
		if len(s.held[f.msgGroup]) == 0 {
			delete(s.held, f.msgGroup)
		}
		return nil
	}
	if !f.fifo() {
		return nil
	}
	if s.active[f.msgGroup]--; s.active[f.msgGroup] > 0 {
		return nil
	}
	delete(s.active, f.msgGroup)
	if list := s.held[f.msgGroup]; len(list) > 0 {
		next := list[0]
		s.unhold(next, now)
		return next
	}
	return nil
}

// fifo reports whether the flight belongs to an ordered message group.
func (f *flight) fifo() bool { return f.flags&flagFIFO != 0 && f.msgGroup != "" }

// setDeadline moves a flight (not held) to a new visibleAt; a pending
// flight stays out of the heap until it is settled.
func (s *sub) setDeadline(f *flight, at int64) {
	f.visibleAt = at
	if f.hidx >= 0 {
		heap.Fix(&s.due, f.hidx)
	} else if !f.held() && f.pend == 0 {
		heap.Push(&s.due, f)
	}
}

// unhold turns a held flight into a due one (due once settled, if it is
// pending).
func (s *sub) unhold(f *flight, at int64) {
	s.held[f.msgGroup] = removeHeld(s.held[f.msgGroup], f)
	if len(s.held[f.msgGroup]) == 0 {
		delete(s.held, f.msgGroup)
	}
	f.flags &^= flagHeld
	f.visibleAt = at
	s.active[f.msgGroup]++
	if f.pend == 0 {
		heap.Push(&s.due, f)
	}
}

// unqueue takes a flight out of the deadline heap (it becomes pending).
func (s *sub) unqueue(f *flight) {
	if f.hidx >= 0 {
		heap.Remove(&s.due, f.hidx)
	}
}

// earliest is the next deadline, or 0 with nothing in flight.
func (s *sub) earliest() int64 {
	if len(s.due) == 0 {
		return 0
	}
	return s.due[0].visibleAt
}

func (s *sub) inflight() (n int) {
	for _, q := range s.queues {
		n += len(q.flights)
	}
	return n
}

func insertHeld(list []*flight, f *flight) []*flight {
	i := len(list)
	for i > 0 && (list[i-1].queue > f.queue || list[i-1].queue == f.queue && list[i-1].offset > f.offset) {
		i--
	}
	list = append(list, nil)
	copy(list[i+1:], list[i:])
	list[i] = f
	return list
}

func removeHeld(list []*flight, f *flight) []*flight {
	for i, x := range list {
		if x == f {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// flightHeap orders flights by visibleAt, then queue and offset (so
// redeliveries of one message group come back in order).
type flightHeap []*flight

func (h flightHeap) Len() int { return len(h) }
func (h flightHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.visibleAt != b.visibleAt {
		return a.visibleAt < b.visibleAt
	}
	if a.queue != b.queue {
		return a.queue < b.queue
	}
	return a.offset < b.offset
}
func (h flightHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *flightHeap) Push(x any) {
	f := x.(*flight)
	f.hidx = len(*h)
	*h = append(*h, f)
}
func (h *flightHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.hidx = -1
	return f
}

// subHeap orders subscriptions by the time their waiters must be woken.
type subHeap []*sub

func (h subHeap) Len() int           { return len(h) }
func (h subHeap) Less(i, j int) bool { return h[i].wakeAt < h[j].wakeAt }
func (h subHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sidx = i
	h[j].sidx = j
}
func (h *subHeap) Push(x any) {
	s := x.(*sub)
	s.sidx = len(*h)
	*h = append(*h, s)
}
func (h *subHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.sidx = -1
	return s
}

// maxAttemptIDs bounds the remembered FIFO attempt ids per subscription.
const maxAttemptIDs = 1024

func (s *sub) rememberAttempt(id string, fl []*flight) {
	if id == "" || len(fl) == 0 {
		return
	}
	if _, ok := s.attempts[id]; !ok {
		s.attemptOrder = append(s.attemptOrder, id)
	}
	s.attempts[id] = fl
	for len(s.attemptOrder) > maxAttemptIDs {
		delete(s.attempts, s.attemptOrder[0])
		s.attemptOrder = s.attemptOrder[1:]
	}
}
