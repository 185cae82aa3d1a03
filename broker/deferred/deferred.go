package deferred

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what a stage needs from the store.
type Store interface {
	Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error)
	ReadQueue(topic string, queueID int32, fromOffset int64, max int) ([]storage.QueueEntry, error)
	ReadMessage(physOffset int64, size int32) (*message.Message, error)
	QueueRange(topic string, queueID int32) (min, max int64)
	OffsetForTime(topic string, queueID int32, unixMs int64) (int64, error)
	LogRange() (min, written int64)
	WaitDispatched(ctx context.Context, pos int64) error
}

// Blobs persists the low-water time.
type Blobs interface {
	SaveBlob(name string, data []byte) error
	LoadBlob(name string) ([]byte, bool, error)
}

// Op is a resolution.
type Op uint8

const (
	OpFired      Op = iota + 1 // delay: published to its topic
	OpRecalled                 // delay: cancelled by the producer
	OpCommitted                // transaction: published to its topic
	OpRolledBack               // transaction: discarded by the producer
	OpDiscarded                // transaction: discarded after unanswered checks
)

func (o Op) String() string {
	switch o {
	case OpFired:
		return "fired"
	case OpRecalled:
		return "recalled"
	case OpCommitted:
		return "committed"
	case OpRolledBack:
		return "rolled back"
	case OpDiscarded:
		return "discarded"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Pending is one staged message not yet resolved.
type Pending struct {
	Offset    int64 // in the stage topic
	Phys      int64
	Size      int32
	StoreTime int64 // unix ms
	// Due is when the owner must act (delivery time, next check).
	Due int64
	// Checks counts transaction checks made.
	Checks int
}

// Resolved remembers a recent resolution (idempotent EndTransaction).
type Resolved struct {
	Op Op
	At int64
}

// Stage is one stage topic with its ops topic.
type Stage struct {
	name, stageTopic, opsTopic, blob string
	store                            Store
	blobs                            Blobs
	log                              *slog.Logger

	mu       sync.Mutex
	pending  map[int64]*Pending
	byDue    dueHeap            // lazy: entries whose pending is gone or rescheduled are skipped
	resolved map[int64]Resolved // bounded: recent resolutions only
	order    []int64            // resolution order, for trimming
}

// MaxRemembered bounds the remembered resolutions.
const MaxRemembered = 100000

// clockMargin tolerates store clocks that step back a little.
const clockMargin = int64(time.Minute / time.Millisecond)

// Open loads a stage: scans the stage and ops topics from the persisted
// low-water time and rebuilds the pending set. due computes a pending
// message's due time from its record.
func Open(ctx context.Context, name, stageTopic, opsTopic string, st Store, blobs Blobs, log *slog.Logger, due func(m *message.Message) int64) (*Stage, error) {
	s := &Stage{name: name, stageTopic: stageTopic, opsTopic: opsTopic, blob: name + "-low-water", store: st, blobs: blobs,
		log: log, pending: make(map[int64]*Pending), resolved: make(map[int64]Resolved)}
	low := int64(0)
	if b, ok, err := blobs.LoadBlob(s.blob); err != nil {
		return nil, fmt.Errorf("%s low-water mark: %w", name, err)
	} else if ok {
		if len(b) != 8 {
			return nil, fmt.Errorf("%s low-water mark is damaged (%d bytes)", name, len(b))
		}
		low = int64(binary.BigEndian.Uint64(b)) - clockMargin
	}
	_, written := st.LogRange()
	if err := st.WaitDispatched(ctx, written); err != nil {
		return nil, err
	}
	err := s.scan(stageTopic, low, func(e storage.QueueEntry, m *message.Message) {
		s.pending[e.QueueOffset] = &Pending{Offset: e.QueueOffset, Phys: e.PhysOffset, Size: e.Size, StoreTime: m.StoreTime, Due: due(m)}
	})
	defer func() {
		for _, p := range s.pending {
			heap.Push(&s.byDue, dueEntry{p.Due, p.Offset})
		}
	}()
	if err != nil {
		return nil, err
	}
	err = s.scan(opsTopic, low, func(e storage.QueueEntry, m *message.Message) {
		op, off, ok := decodeOp(m.Body)
		if !ok {
			s.log.Warn("staged: undecodable ops record skipped", "stage", name, "offset", e.QueueOffset)
			return
		}
		delete(s.pending, off)
		s.remember(off, Resolved{Op: op, At: m.StoreTime})
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("staged: recovered", "stage", name, "pending", len(s.pending))
	return s, nil
}

func (s *Stage) scan(topic string, fromTime int64, fn func(storage.QueueEntry, *message.Message)) error {
	from, err := s.store.OffsetForTime(topic, 0, fromTime)
	if err != nil {
		return fmt.Errorf("%s: locating %s by time: %w", s.name, topic, err)
	}
	for {
		ents, err := s.store.ReadQueue(topic, 0, from, 512)
		if errors.Is(err, storage.ErrOffsetMoved) {
			from, _ = s.store.QueueRange(topic, 0)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: reading %s: %w", s.name, topic, err)
		}
		if len(ents) == 0 {
			return nil
		}
		for _, e := range ents {
			from = e.QueueOffset + 1
			m, err := s.store.ReadMessage(e.PhysOffset, e.Size)
			if err != nil {
				return fmt.Errorf("%s: reading %s offset %d: %w", s.name, topic, e.QueueOffset, err)
			}
			fn(e, m)
		}
	}
}

func encodeOp(op Op, off int64) []byte {
	b := []byte{1, byte(op)}
	return binary.AppendVarint(b, off)
}

func decodeOp(b []byte) (Op, int64, bool) {
	if len(b) < 3 || b[0] != 1 || b[1] < byte(OpFired) || b[1] > byte(OpDiscarded) {
		return 0, 0, false
	}
	off, n := binary.Varint(b[2:])
	if n <= 0 || 2+n != len(b) || off < 0 {
		return 0, 0, false
	}
	return Op(b[1]), off, true
}

// Put stages record (its Topic and QueueID are set to the stage topic)
// and returns its stage offset once appended. due is when the owner must
// act on it. The result carries the store's durability status.
func (s *Stage) Put(ctx context.Context, record *message.Message, due int64) (int64, storage.AppendResult, error) {
	record.Topic, record.QueueID = s.stageTopic, 0
	res, err := s.store.Append(ctx, record)
	if err != nil {
		return 0, res, err
	}
	e := res.Entries[0]
	s.mu.Lock()
	s.pending[e.QueueOffset] = &Pending{Offset: e.QueueOffset, Phys: e.PhysOffset, Size: e.Size, StoreTime: e.StoreTime, Due: due}
	heap.Push(&s.byDue, dueEntry{due, e.QueueOffset})
	s.mu.Unlock()
	return e.QueueOffset, res, nil
}

// Get returns a pending message's record.
func (s *Stage) Get(off int64) (*Pending, *message.Message, error) {
	s.mu.Lock()
	p := s.pending[off]
	var cp Pending
	if p != nil {
		cp = *p
	}
	s.mu.Unlock()
	if p == nil {
		return nil, nil, nil
	}
	m, err := s.store.ReadMessage(cp.Phys, cp.Size)
	if err != nil {
		return nil, nil, err
	}
	return &cp, m, nil
}

// ErrNotPending is returned when resolving an offset that is not pending.
var ErrNotPending = errors.New("not pending")

// Resolve records op for off, appending publish (may be empty) in the same
// atomic batch, and forgets it. It fails with ErrNotPending (wrapped, with
// the earlier resolution when remembered) if off is not pending; concurrent
// resolutions of one offset: exactly one wins.
func (s *Stage) Resolve(ctx context.Context, off int64, op Op, publish ...*message.Message) (storage.AppendResult, error) {
	s.mu.Lock()
	p := s.pending[off]
	if p == nil {
		r, ok := s.resolved[off]
		s.mu.Unlock()
		if ok {
			return storage.AppendResult{}, &NotPendingError{Offset: off, Previous: r, Known: true}
		}
		return storage.AppendResult{}, &NotPendingError{Offset: off}
	}
	delete(s.pending, off) // claimed: concurrent resolvers see not-pending
	s.mu.Unlock()
	rec := &message.Message{Topic: s.opsTopic, QueueID: 0, Body: encodeOp(op, off)}
	res, err := s.store.Append(ctx, append(publish, rec)...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.pending[off] = p // nothing was written: still pending
		heap.Push(&s.byDue, dueEntry{p.Due, off})
		return res, err
	}
	s.remember(off, Resolved{Op: op, At: res.Entries[len(res.Entries)-1].StoreTime})
	return res, nil
}

// NotPendingError says a staged message is not (or no longer) pending.
type NotPendingError struct {
	Offset   int64
	Previous Resolved
	Known    bool
}

func (e *NotPendingError) Error() string {
	if e.Known {
		return fmt.Sprintf("staged message %d was already %s", e.Offset, e.Previous.Op)
	}
	return fmt.Sprintf("staged message %d is unknown", e.Offset)
}

func (e *NotPendingError) Is(target error) bool { return target == ErrNotPending }

func (s *Stage) remember(off int64, r Resolved) {
	if _, ok := s.resolved[off]; !ok {
		s.order = append(s.order, off)
	}
	s.resolved[off] = r
	for len(s.order) > MaxRemembered {
		delete(s.resolved, s.order[0])
		s.order = s.order[1:]
	}
}

// Due returns pending messages with Due ≤ now, earliest first (at most
// n), and the earliest Due of the rest (0 if none). Returned messages stay
// pending; the caller resolves or reschedules them.
func (s *Stage) Due(now int64, n int) ([]Pending, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Pending
	for len(s.byDue) > 0 && len(out) < n {
		top := s.byDue[0]
		p := s.pending[top.off]
		if p == nil || p.Due != top.due {
			heap.Pop(&s.byDue) // stale
			continue
		}
		if top.due > now {
			break
		}
		heap.Pop(&s.byDue)
		out = append(out, *p)
		// Keep it findable: the caller reschedules or resolves it.
		p.Due = now + parkedFor
		heap.Push(&s.byDue, dueEntry{p.Due, p.Offset})
	}
	for len(s.byDue) > 0 {
		top := s.byDue[0]
		if p := s.pending[top.off]; p == nil || p.Due != top.due {
			heap.Pop(&s.byDue)
			continue
		}
		return out, top.due
	}
	return out, 0
}

// parkedFor is how long a message handed out by Due stays out of later
// Due calls unless the caller reschedules it (a failed publish retries
// after this).
const parkedFor = 5000

type dueEntry struct {
	due int64
	off int64
}

type dueHeap []dueEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].off < h[j].off
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Reschedule sets a pending message's due time and check count.
func (s *Stage) Reschedule(off int64, due int64, checks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pending[off]; p != nil {
		p.Due, p.Checks = due, checks
		heap.Push(&s.byDue, dueEntry{due, off})
	}
}

// Len is the number of pending messages.
func (s *Stage) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// SaveLowWater persists the store time of the oldest pending message (or
// now), bounding the scan at the next start.
func (s *Stage) SaveLowWater(now int64) error {
	s.mu.Lock()
	low := now
	for _, p := range s.pending {
		if p.StoreTime < low {
			low = p.StoreTime
		}
	}
	s.mu.Unlock()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(low))
	return s.blobs.SaveBlob(s.blob, b[:])
}

// Outcome returns how a no-longer-pending message was resolved, when it is
// still remembered.
func (s *Stage) Outcome(off int64) (Resolved, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resolved[off]
	return r, ok
}
