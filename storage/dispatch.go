package storage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
	"github.com/mqgate/mqgate/storage/message"
)

// dispatcher is the reput loop: it reads the commit log from its position
// up to the visible limit (written in async mode, durable in sync mode, so
// a sync-mode reader never sees a record that a crash could take back) and
// appends consume-queue entries and index keys. It owns its position and
// the views' write side; it publishes progress through pos and wakes
// waiters and the arrival hook after each batch.
type dispatcher struct {
	s      *Store
	pos    atomic.Int64
	last   atomic.Int64 // last store time seen
	notify chan struct{}
	buf    []byte

	// The queue entries of the current step, one slot per queue in the
	// order first touched; slots and their entry slices are reused.
	pending []pendingQ
	slot    map[*consumequeue.Queue]int // index into pending

	lastStore int64
	indexed   int64 // records below this position are in the index (memory)

	// The feed's records taken so far (fbuf.recs[fi:] not yet applied),
	// the log path's key arena, its topic names and their key prefixes.
	fbuf   feedBuf
	fi     int
	keys   []uint64
	topics map[string]string
	tk     topicKeys
	// ikeys: index keys of this step's records, added at its end
	// (flushIndex).
	ikeys []index.Key

	mu      sync.Mutex
	ch      chan struct{} // closed after the next step; made only when someone waits
	failErr error

	stopCh chan struct{}
	done   chan struct{}
}

type pendingQ struct {
	q     *consumequeue.Queue
	first int64 // queue offset of ents[0]; -1 while nothing is staged
	ents  []consumequeue.Entry
}

// maxKeptEntries bounds the entry slice a pending slot keeps between steps.
const maxKeptEntries = 4096

const dispatchChunk = 1 << 20

func newDispatcher(s *Store, start int64, notify chan struct{}) *dispatcher {
	d := &dispatcher{s: s, notify: notify, stopCh: make(chan struct{}), done: make(chan struct{}),
		buf: make([]byte, dispatchChunk+s.opts.MaxRecordSize), slot: map[*consumequeue.Queue]int{}, topics: map[string]string{}}
	d.pos.Store(start)
	d.indexed = s.idx.End()
	return d
}

func (d *dispatcher) lastStoreTime() int64 { return d.last.Load() }

func (d *dispatcher) limit() int64 {
	if d.s.opts.FlushMode == FlushSync {
		return d.s.log.Durable()
	}
	return d.s.log.Written()
}

// catchUp dispatches synchronously up to end (used by Open).
func (d *dispatcher) catchUp(end int64) error {
	for d.pos.Load() < end {
		if err := d.step(end); err != nil {
			return err
		}
		// Replay runs before the background loop's checkpoints: sealed
		// index files are written as they fill, so that re-indexing a
		// long log holds one in memory, not all of them.
		if d.s.idx.Unwritten() > 0 {
			if err := d.s.idx.Sync(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *dispatcher) run() {
	defer close(d.done)
	backoff := 10 * time.Millisecond
	for {
		lim := d.limit()
		if d.pos.Load() < lim {
			lim = d.gather(lim)
			err := d.step(lim)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				// An I/O error (disk full): drop the partial batch and retry;
				// entries already written are skipped on the retry.
				d.resetPending()
				d.s.logger.Warn("storage: dispatch failed, retrying", "err", err, "at", d.pos.Load(), "in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-d.stopCh:
					t.Stop()
					return
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 10 * time.Millisecond
			if err != nil {
				d.s.logger.Error("storage: dispatcher stopped", "err", err, "at", d.pos.Load())
				d.mu.Lock()
				d.failErr = err
				d.mu.Unlock()
				d.wake()
				<-d.stopCh
				return
			}
			continue
		}
		select {
		case <-d.notify:
		case <-d.stopCh:
			return
		}
	}
}

// gather yields while the log keeps growing (a few times at most), so a
// step covers more records: fewer, larger queue writes under load.
func (d *dispatcher) gather(lim int64) int64 {
	for i := 0; i < 4 && lim-d.pos.Load() < dispatchChunk/4; i++ {
		runtime.Gosched()
		n := d.limit()
		if n == lim {
			break
		}
		lim = n
	}
	return lim
}

func (d *dispatcher) stop() {
	select {
	case <-d.stopCh:
	default:
		close(d.stopCh)
	}
	<-d.done
}

// step dispatches one chunk of the log below lim: from the feed if it
// has the record at the position, otherwise from the log up to the next
// record the feed has.
func (d *dispatcher) step(lim int64) error {
	pos := d.pos.Load()
	end, err := d.stepFed(pos, lim)
	if err == nil && end == pos {
		next := lim
		if r := d.fed(pos); r != nil && r.phys > pos {
			next = min(next, r.phys)
		}
		end, err = d.stepLog(pos, next)
	}
	if err != nil {
		// What the step indexed before the failure stays indexed (indexed
		// says so).
		d.flushIndex()
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	d.s.idx.SetEnd(end)
	d.pos.Store(end)
	d.last.Store(d.lastStore)
	d.wake()
	return nil
}

// fed returns the feed's first record at or past pos, or nil.
func (d *dispatcher) fed(pos int64) *record {
	for {
		for d.fi < len(d.fbuf.recs) {
			if r := &d.fbuf.recs[d.fi]; r.phys >= pos {
				return r
			}
			d.fi++ // behind the position: dispatched from the log
		}
		if d.s.feed == nil {
			return nil
		}
		d.fbuf, d.fi = d.s.feed.take(d.fbuf), 0
		if len(d.fbuf.recs) == 0 {
			return nil
		}
	}
}

// stepFed applies the feed's records from pos on while they follow each
// other and end below lim, up to a chunk's worth, and returns where it
// stopped.
func (d *dispatcher) stepFed(pos, lim int64) (int64, error) {
	p, n := pos, uint64(0)
	for p-pos < dispatchChunk {
		r := d.fed(p)
		if r == nil || r.phys != p || p+int64(r.size) > lim {
			break
		}
		if err := d.apply(r, d.fbuf.keys); err != nil {
			return pos, err
		}
		d.fi++
		p += int64(r.size)
		n++
	}
	d.s.c.dispatchFed.Add(n)
	return p, nil
}

// stepLog reads and applies the log's records from pos below lim, up to
// a chunk's worth, and returns where it stopped.
func (d *dispatcher) stepLog(pos, lim int64) (int64, error) {
	// Up to a chunk plus the largest record (d.buf's size), so a record
	// larger than a chunk still fits in one view.
	b, release, err := d.s.log.View(pos, d.buf, min(lim, pos+int64(len(d.buf))))
	if err != nil {
		return pos, err
	}
	defer release()
	p, n := 0, uint64(0)
	for p < len(b) {
		size, err := message.PeekSize(b[p:], d.s.opts.MaxRecordSize)
		if err != nil {
			return pos, fmt.Errorf("%w: dispatch at %d: %w", ErrCorrupt, pos+int64(p), err)
		}
		if p+size > len(b) {
			break
		}
		v, err := message.ParseView(b[p : p+size])
		if err != nil {
			return pos, fmt.Errorf("%w: dispatch at %d: %w", ErrCorrupt, pos+int64(p), err)
		}
		if v.PhysOffset != pos+int64(p) {
			return pos, fmt.Errorf("%w: dispatch at %d: record claims %d", ErrCorrupt, pos+int64(p), v.PhysOffset)
		}
		r, keys := describe(&v, d.topic(v.Topic), d.keys[:0], &d.tk)
		d.keys = keys
		if err := d.apply(&r, keys); err != nil {
			return pos, err
		}
		p += size
		n++
	}
	if p == 0 {
		return pos, fmt.Errorf("%w: dispatch at %d: no complete record below %d", ErrCorrupt, pos, lim)
	}
	d.s.c.dispatchRead.Add(n)
	return pos + int64(p), nil
}

// topic returns b as a string, the same one for the same name while the
// dispatcher has seen few names.
func (d *dispatcher) topic(b []byte) string {
	if t, ok := d.topics[string(b)]; ok {
		return t
	}
	if len(d.topics) >= maxTopicNames {
		clear(d.topics)
	}
	t := string(b)
	d.topics[t] = t
	return t
}

const maxTopicNames = 1024

// waitCh returns a channel closed after the next step (or the failure
// that stopped the dispatcher).
func (d *dispatcher) waitCh() (<-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failErr != nil {
		return nil, d.failErr
	}
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	return d.ch, nil
}

// wake releases the callers of wait blocked on the current channel.
func (d *dispatcher) wake() {
	d.mu.Lock()
	if d.ch != nil {
		close(d.ch)
		d.ch = nil
	}
	d.mu.Unlock()
}

func (d *dispatcher) apply(r *record, keys []uint64) error {
	if r.store > d.lastStore {
		d.lastStore = r.store
	}
	switch r.kind {
	case recControl:
		return nil
	case recDeleteTopic:
		if err := d.flush(); err != nil {
			return err
		}
		if err := d.s.cqs.DeleteTopic(r.topic); err != nil {
			return err
		}
		if r.phys >= d.indexed {
			d.ikeys = append(d.ikeys, index.Key{Hash: deletionKey(r.topic), Phys: r.phys, Size: r.size, StoreTime: r.store})
			d.indexed = r.phys + int64(r.size)
		}
		d.s.dels.note(r.topic, r.phys)
		return nil
	}
	pq, err := d.pendingFor(r.topic, r.queue)
	if err != nil {
		return err
	}
	q := pq.q
	e := consumequeue.Entry{PhysOffset: r.phys, Size: r.size, TagHash: r.tag, StoreTime: r.store}
	switch {
	case pq.first >= 0 && r.qoff == pq.first+int64(len(pq.ents)):
		pq.ents = append(pq.ents, e)
	case pq.first >= 0:
		return fmt.Errorf("%w: queue %s/%d: record at %d has queue offset %d, expected %d",
			ErrCorrupt, r.topic, r.queue, r.phys, r.qoff, pq.first+int64(len(pq.ents)))
	case r.qoff < q.Next():
		// Already in the queue (replay over entries that recovery kept).
	case r.qoff == q.Next() || q.Min() == q.Next():
		pq.first = r.qoff
		pq.ents = append(pq.ents, e)
	default:
		return fmt.Errorf("%w: queue %s/%d: record at %d has queue offset %d past the queue end %d",
			ErrCorrupt, r.topic, r.queue, r.phys, r.qoff, q.Next())
	}
	if r.phys >= d.indexed {
		d.index(r, keys[r.k0:r.k1])
		d.indexed = r.phys + int64(r.size)
	}
	return nil
}

// keyPrefix hashes the part of an index key before the key itself: kind
// ("I" for the message id, "K" for each of KEYS), the topic and a NUL.
func keyPrefix[T string | []byte](kind string, topic T) uint64 {
	h := message.FNV64a(message.FNVOffset, kind)
	h = message.FNV64a(h, topic)
	return message.FNV64a(h, "\x00")
}

// indexKey hashes one index key (keyPrefix, then the key).
func indexKey[T string | []byte](kind string, topic, key T) uint64 {
	return message.FNV64a(keyPrefix(kind, topic), key)
}

const (
	keyKindID       = "I"
	keyKindKey      = "K"
	keyKindDeletion = "D" // a topic's deletion record: the topic, no key
)

// deletionKey is the index key of topic's deletion records.
func deletionKey(topic string) uint64 { return indexKey(keyKindDeletion, topic, "") }

// index queues r's keys for the index; flushIndex adds them.
func (d *dispatcher) index(r *record, keys []uint64) {
	if r.hasID {
		d.ikeys = append(d.ikeys, index.Key{Hash: r.id, Phys: r.phys, Size: r.size, StoreTime: r.store})
	}
	for _, k := range keys {
		d.ikeys = append(d.ikeys, index.Key{Hash: k, Phys: r.phys, Size: r.size, StoreTime: r.store})
	}
}

// flushIndex adds the keys queued so far to the index: with the queue
// entries (flush), and after a failed step too, since indexed has passed
// their records.
func (d *dispatcher) flushIndex() {
	if len(d.ikeys) == 0 {
		return
	}
	d.s.idx.PutAll(d.ikeys)
	if cap(d.ikeys) > maxKeptEntries {
		d.ikeys = nil
	} else {
		d.ikeys = d.ikeys[:0]
	}
}

// scanSlots: up to this many queues in a step, a record finds its queue's
// slot by comparing names, without the queue set's lock and maps.
const scanSlots = 8

// pendingFor returns the slot of the current step for the queue (topic,
// id), taking a free one (and creating the queue) if it has none.
func (d *dispatcher) pendingFor(topic string, id int32) (*pendingQ, error) {
	if len(d.pending) <= scanSlots {
		for i := range d.pending {
			if pq := &d.pending[i]; pq.q.ID == id && pq.q.Topic == topic {
				return pq, nil
			}
		}
	}
	q := d.s.cqs.Get(topic, id)
	if q == nil {
		var err error
		if q, err = d.s.cqs.Ensure(topic, id); err != nil {
			return nil, err
		}
	}
	if i, ok := d.slot[q]; ok {
		return &d.pending[i], nil
	}
	i := len(d.pending)
	d.slot[q] = i
	if i < cap(d.pending) {
		d.pending = d.pending[:i+1]
	} else {
		d.pending = append(d.pending, pendingQ{})
	}
	pq := &d.pending[i]
	pq.q, pq.first, pq.ents = q, -1, pq.ents[:0]
	return pq, nil
}

// resetPending frees every slot (their entry slices are kept for reuse).
func (d *dispatcher) resetPending() {
	for i := range d.pending {
		pq := &d.pending[i]
		pq.q = nil
		if cap(pq.ents) > maxKeptEntries {
			pq.ents = nil
		}
	}
	d.pending = d.pending[:0]
	clear(d.slot)
}

// flush writes pending queue entries and calls the arrival hook.
func (d *dispatcher) flush() error {
	d.flushIndex()
	hook := d.s.hook.Load()
	for i := range d.pending {
		pq := &d.pending[i]
		if len(pq.ents) == 0 {
			continue
		}
		if err := pq.q.Append(pq.first, pq.ents); err != nil {
			return err
		}
		if hook != nil {
			(*hook)(pq.q.Topic, pq.q.ID, pq.q.Next())
		}
	}
	d.resetPending()
	return nil
}

func (d *dispatcher) wait(ctx context.Context, pos int64) error {
	for {
		if d.pos.Load() >= pos {
			return nil
		}
		ch, err := d.waitCh()
		if err != nil {
			return err
		}
		if d.pos.Load() >= pos {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("storage: wait dispatched %d (at %d): %w", pos, d.pos.Load(), ctx.Err())
		case <-d.done:
			if d.pos.Load() >= pos {
				return nil
			}
			return ErrClosed
		}
	}
}
