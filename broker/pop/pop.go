package pop

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker/longpoll"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what pop needs from the store.
type Store interface {
	Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error)
	ReadQueue(topic string, queueID int32, fromOffset int64, max int) ([]storage.QueueEntry, error)
	ReadMessage(physOffset int64, size int32) (*message.Message, error)
	// ReadEntries reads the records of ents as ReadMessage would, into
	// msgs[i] or errs[i]; adjacent records with one copy.
	ReadEntries(ents []storage.QueueEntry, msgs []*message.Message, errs []error)
	QueueRange(topic string, queueID int32) (min, max int64)
	LogRange() (min, written int64)
	WaitDispatched(ctx context.Context, pos int64) error
	// DispatchedUpTo is the log position below which every record is in
	// its queue (a topic deletion: applied, and known to LastDeletion).
	DispatchedUpTo() int64
	// LastDeletion is the log position of the topic's newest deletion
	// record dispatched so far, -1 if none: journal records below it are
	// about the deleted topic, not about one of the same name made since.
	LastDeletion(topic string) (int64, error)
}

// Blobs persists the snapshot and the handle key.
type Blobs interface {
	SaveBlob(name string, data []byte) error
	LoadBlob(name string) ([]byte, bool, error)
}

// DLQTopics creates a group's dead-letter topic on first use.
type DLQTopics interface {
	EnsureDLQ(ctx context.Context, group string) (model.Topic, error)
}

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	Hub    *longpoll.Hub
	// SnapshotInterval bounds how much journal a restart replays.
	SnapshotInterval time.Duration
	// RenewInterval is how often auto-renewed deliveries are checked.
	RenewInterval time.Duration
	// MaxHeld bounds FIFO messages held back per subscription.
	MaxHeld int
	// SnapshotOK, when set, is asked after a snapshot's log position is
	// read and before it is written: false drops the snapshot. A replica
	// group's member says false once it stopped leading: from then on its
	// store takes other leaders' records that this memory never saw, and
	// a snapshot claiming them would make the next recovery skip them.
	SnapshotOK func() bool
	// InheritedGrace pushes back, at Open, the deadline of every delivery
	// found in flight: deadlines are wall-clock times of whichever member
	// recorded them, and a member whose clock runs ahead of that one's by
	// up to this much must not make a message visible before the
	// consumer's window ended (cluster mode: the members' maximum clock
	// skew; 0 on a single node).
	InheritedGrace time.Duration
	// Placement is the queues of the store this service's data group
	// holds (zero: every queue): a dead letter goes to the first queue of
	// the dead-letter topic it holds.
	Placement placement.Of
}

// Service is the POP engine. Its locks nest snapMu → mu → sub.mu →
// schedMu, and sub.mu → fence.mu (docs/locks.md).
type Service struct {
	// Fixed at Open (codec is swapped atomically).
	cfg   Config
	log   *slog.Logger
	store Store
	blobs Blobs
	dlq   DLQTopics
	codec atomic.Pointer[HandleCodec]
	clk   clock.Clock
	hub   *longpoll.Hub
	group *lifecycle.Group

	// snapMu makes snapshots one at a time; it guards no field. A
	// snapshot takes fence.mu, mu and each sub.mu under it, one after
	// the other.
	snapMu sync.Mutex

	// fence tracks the records being appended (its own lock, a leaf).
	fence fence

	// mu guards the subscriptions map (not the subs: each has its own).
	mu   sync.Mutex
	subs map[subKey]*sub

	// schedMu guards the wake-up heap and each sub's wakeAt and sidx;
	// schedKick (buffered) tells wakeLoop the heap's head changed.
	schedMu   sync.Mutex
	sched     subHeap
	schedKick chan struct{}
}

type subKey struct{ group, topic string }

const (
	snapshotBlob = "pop-state"
	keyBlob      = KeyBlob
)

// Open loads the handle key (creating it on first start), the last state
// snapshot and replays the journal written since, then starts the
// background work (redelivery wake-ups, auto-renew, snapshots).
func Open(ctx context.Context, cfg Config, st Store, blobs Blobs, dlq DLQTopics) (*Service, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Hub == nil {
		cfg.Hub = longpoll.New(0)
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 10 * time.Second
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = 5 * time.Second
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = 10000
	}
	s := &Service{cfg: cfg, log: cfg.Logger, store: st, blobs: blobs, dlq: dlq, clk: cfg.Clock, hub: cfg.Hub,
		subs: make(map[subKey]*sub), schedKick: make(chan struct{}, 1)}
	codec, err := loadCodec(blobs)
	if err != nil {
		return nil, err
	}
	s.codec.Store(codec)
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	s.delayInherited(cfg.InheritedGrace)
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("pop-wakeups", s.wakeLoop); err != nil {
		return nil, err
	}
	if err := s.group.Go("pop-renew", s.renewLoop); err != nil {
		return nil, err
	}
	if err := s.group.Go("pop-snapshot", s.snapshotLoop); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops background work and writes a final snapshot.
func (s *Service) Close(ctx context.Context) error {
	err := s.group.Shutdown(ctx)
	return errors.Join(err, s.snapshot())
}

// Codec returns the handle codec (tests and tools).
func (s *Service) Codec() *HandleCodec { return s.codec.Load() }

// ReloadKeys takes the receipt-handle key ring from the blobs again
// (after a cluster replicated a new one): handles are minted with its
// newest key from now on, and verified with any of its keys.
func (s *Service) ReloadKeys() error {
	r, err := LoadKeyRing(s.blobs, false)
	if err != nil {
		return err
	}
	c, err := NewRingCodec(r)
	if err != nil {
		return err
	}
	s.codec.Store(c)
	return nil
}

func (s *Service) now() int64 { return s.clk.Now().UnixMilli() }

func (s *Service) getSub(group, topic string, create bool) *sub {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := subKey{group, topic}
	sb := s.subs[k]
	if sb == nil && create {
		sb = newSub(group, topic)
		_, sb.since = s.store.LogRange()
		s.subs[k] = sb
	}
	return sb
}

// DropTopic forgets every subscription of a deleted topic.
func (s *Service) DropTopic(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.subs {
		if k.topic == topic {
			delete(s.subs, k)
		}
	}
}

// DropGroup forgets every subscription of a deleted group.
func (s *Service) DropGroup(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.subs {
		if k.group == group {
			delete(s.subs, k)
		}
	}
}

// ReceiveRequest is one receive, with topic and group already resolved.
type ReceiveRequest struct {
	Group     model.Group
	Topic     model.Topic
	Filter    model.Filter
	Max       int
	Invisible time.Duration
	AutoRenew bool
	ClientID  string
	Wait      time.Duration
	QueueID   int32 // -1: any
	// AttemptID: a FIFO receive repeating the attempt id of its previous,
	// still in-flight batch gets that batch again (new handles, same
	// attempt) instead of being blocked by it.
	AttemptID string
	// Drain ends a long poll early (the gateway is shutting down).
	Drain <-chan struct{}
}

// awaitStored waits (up to lookDispatchWait) until every message stored
// so far is in its queue. A receive that does not wait looks once, so
// without this it could miss a message whose send was answered a moment
// before: the queues are written after the log, and no long poll would
// wake it when they are. Asking each data group once without waiting is
// how a receive over several groups finds the one holding messages; a
// message missed there is left until a later receive, after the long
// poll it goes on to wait on another group.
func (s *Service) awaitStored(ctx context.Context) {
	_, written := s.store.LogRange()
	if s.store.DispatchedUpTo() >= written {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, lookDispatchWait)
	defer cancel()
	_ = s.store.WaitDispatched(wctx, written) // past the bound, the look goes on with what is there
}

// lookDispatchWait bounds how long a receive that does not wait waits for
// the messages stored before it to reach their queues.
const lookDispatchWait = 100 * time.Millisecond

// Receive delivers up to Max messages, long-polling up to Wait when none
// is visible. Nothing found ⇒ KindMessageNotFound.
func (s *Service) Receive(ctx context.Context, req ReceiveRequest) ([]*model.Delivered, error) {
	if req.Max <= 0 {
		req.Max = 1
	}
	if req.Wait <= 0 {
		s.awaitStored(ctx)
	}
	if req.AutoRenew {
		req.Invisible = 60 * time.Second
	}
	sb := s.getSub(req.Group.Name, req.Topic.Name, true)
	fl := newFilter(req.Filter)
	var until time.Time
	if req.Wait > 0 {
		until = s.clk.Now().Add(req.Wait)
	}
	class := waitClass(&req)
	for {
		w, err := s.hub.WatchOne(sb.key, class)
		if err != nil {
			return nil, err
		}
		out, err := s.tryPop(ctx, sb, &req, fl)
		if err != nil || len(out) > 0 {
			w.Leave(len(out) > 0 || err != nil) // more may be visible
			return out, err
		}
		if !s.clk.Now().Before(until) {
			w.Leave(false) // a wake that came after its look goes on
			return nil, noMessage(req)
		}
		t := clock.At(s.clk, until)
		var why string
		select {
		case <-w.C():
			why = WakeArrival
		case <-t.C():
			why = WakeDeadline
		case <-ctx.Done():
			why = WakeCancelled
		case <-req.Drain:
			why = WakeShutdown
		case <-s.hub.Closed():
			why = WakeShutdown
		}
		t.Stop()
		noteWake(ctx, why)
		if ctx.Err() != nil || isClosed(req.Drain) || isClosed(s.hub.Closed()) {
			// One last non-waiting look, then answer "nothing". A wake
			// this receive got and cannot use goes on to its class.
			out, err := s.tryPop(ctx, sb, &req, fl)
			w.Leave(len(out) > 0 || err != nil)
			if err != nil || len(out) > 0 {
				return out, err
			}
			return nil, noMessage(req)
		}
		// Woken (or its deadline came): it looks again at the top, with
		// a new registration at the back of its class.
		w.Release()
	}
}

// classSeq numbers the wait classes of receives that share theirs with
// nobody (SQL filters: two compiled expressions cannot be compared).
var classSeq atomic.Uint64

// waitClass is the long-poll class of a receive (longpoll.Hub): receives
// of one group, with one tag filter, on the same queue or on any, can
// take exactly the same messages. (Topic: the hub key.)
func waitClass(req *ReceiveRequest) string {
	var b strings.Builder
	b.WriteString(req.Group.Name)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(int(req.QueueID)))
	b.WriteByte(0)
	switch {
	case req.Filter.SQL != nil:
		b.WriteString("sql ")
		b.WriteString(strconv.FormatUint(classSeq.Add(1), 10))
	case req.Filter.ByTag():
		tags := make([]string, 0, len(req.Filter.Tags))
		for t := range req.Filter.Tags {
			tags = append(tags, t)
		}
		slices.Sort(tags)
		b.WriteString("tags ")
		b.WriteString(strings.Join(tags, "||"))
	default:
		b.WriteString("*")
	}
	return b.String()
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func noMessage(req ReceiveRequest) error {
	return mqerr.Errorf(mqerr.KindMessageNotFound, "no new message in topic %q for group %q", req.Topic.Name, req.Group.Name)
}

// filter caches the tag hashes of a filter.
type filter struct {
	f      model.Filter
	hashes map[int64]struct{}
}

func newFilter(f model.Filter) *filter {
	fl := &filter{f: f}
	if f.ByTag() {
		fl.hashes = make(map[int64]struct{}, len(f.Tags))
		for t := range f.Tags {
			fl.hashes[message.TagHash(t)] = struct{}{}
		}
	}
	return fl
}

// pick is one delivery chosen by tryPop.
type pick struct {
	f   *flight
	msg *message.Message
	to  fstate // the delivery to publish (a redelivery or repeated attempt)
	v   fstate // the flight as delivered, copied when settled
}

// tryPop makes one non-waiting delivery attempt. It chooses and marks its
// flights pending under sb.mu, appends one journal record for the whole
// batch with no lock held, then settles them (pending.go).
func (s *Service) tryPop(ctx context.Context, sb *sub, req *ReceiveRequest, fl *filter) ([]*model.Delivered, error) {
	now := s.now()
	inv := req.Invisible.Milliseconds()
	maxAttempts := uint32(req.Group.MaxDeliveryAttempts)
	if maxAttempts == 0 {
		maxAttempts = model.DefaultMaxDeliveryAttempts
	}
	fifo := req.Group.FIFO
	var (
		picks   []pick
		toDLQ   []pick
		lost    []*flight
		rec     = jrecord{op: opDeliver, group: sb.group, topic: sb.topic, at: now}
		created []*flight // new flights (delivered or held) of this call
		resv    []reservation
		unheld  []*flight
	)
	sb.mu.Lock()
	if now <= sb.resetAt {
		// In the millisecond of an offset reset: see Reset.
		now = sb.resetAt + 1
		rec.at = now
	}
	if fifo && req.AttemptID != "" {
		if again := s.repeatAttempt(sb, req, now, inv, &rec); again != nil {
			return s.record(ctx, sb, req, &rec, again, nil, nil, now)
		}
	}
	// 1. Due redeliveries first, so they are not starved by new messages.
	var deferred []*flight
	for len(picks) < req.Max && len(sb.due) > 0 && sb.due[0].visibleAt <= now {
		f := heap.Pop(&sb.due).(*flight)
		if req.QueueID >= 0 && f.queue != req.QueueID {
			deferred = append(deferred, f)
			continue
		}
		m, err := s.store.ReadMessage(f.phys, f.size)
		if err != nil {
			s.log.Warn("pop: in-flight message unreadable; dropping it", "group", sb.group, "topic", sb.topic,
				"queue", f.queue, "offset", f.offset, "err", err)
			f.hidx = -1
			lost = append(lost, f)
			continue
		}
		if f.flags&flagMoving != 0 {
			deferred = append(deferred, f)
			continue
		}
		if f.epoch >= maxAttempts {
			// Leased to this call while it moves the message; due again
			// (and retried) if the move fails.
			f.flags |= flagMoving
			f.visibleAt = now + dlqLease.Milliseconds()
			toDLQ = append(toDLQ, pick{f: f, msg: m})
			deferred = append(deferred, f)
			continue
		}
		to := f.state()
		to.epoch++
		to.gen++
		to.visibleAt = now + inv
		to.renewFrom, to.renewN = now, 0
		to.flags &^= flagAutoRenew
		to.client = ""
		if req.AutoRenew {
			to.flags |= flagAutoRenew
			to.client = req.ClientID
		}
		f.pend = pendRedeliver // out of the heap until settled
		picks = append(picks, pick{f: f, msg: m, to: to})
		rec.entries = append(rec.entries, entryAs(f, to))
	}
	for _, f := range deferred {
		heap.Push(&sb.due, f)
	}
	for _, f := range lost {
		if nf := sb.remove(f, now); nf != nil {
			unheld = append(unheld, nf)
		}
	}
	// 2. New messages, round robin over the queues.
	var readErr error
	nq := req.Topic.Queues
	if len(picks) < req.Max && nq > 0 {
		start := sb.rr
		sb.rr = (sb.rr + 1) % nq
		for i := int32(0); i < nq && len(picks) < req.Max; i++ {
			qid := (start + i) % nq
			if req.QueueID >= 0 && qid != req.QueueID {
				continue
			}
			q := sb.q(qid)
			if q.next < 0 {
				q.next, _ = s.store.QueueRange(sb.topic, qid)
			}
			before := q.next
			err := s.readFresh(sb, q, qid, req, fl, fifo, now, inv, &picks, &created, &rec)
			if q.next != before {
				resv = append(resv, reservation{queue: qid, from: before, to: q.next, resets: q.resets})
				rec.nexts = append(rec.nexts, qnext{qid, q.next})
			}
			if err != nil {
				readErr = err
				break
			}
		}
	}
	if len(unheld) > 0 {
		defer s.hub.Notify(sb.key)
	}
	if len(toDLQ) > 0 {
		defer func() {
			for _, p := range toDLQ {
				if err := s.moveToDLQ(ctx, sb, p.f, p.msg, "max delivery attempts reached"); err != nil {
					s.log.Warn("pop: moving to the dead-letter queue failed; will retry", "group", sb.group, "err", err)
					sb.mu.Lock()
					p.f.flags &^= flagMoving
					sb.mu.Unlock()
				}
			}
		}()
	}
	if len(rec.entries) == 0 && len(rec.nexts) == 0 {
		s.scheduleLocked(sb)
		sb.mu.Unlock()
		return nil, readErr
	}
	return s.record(ctx, sb, req, &rec, picks, created, resv, now)
}

// record appends a receive's journal record and settles its flights; it
// releases sb.mu before the append and returns with it released.
// sb.mu must be held.
func (s *Service) record(ctx context.Context, sb *sub, req *ReceiveRequest, rec *jrecord, picks []pick, created []*flight, resv []reservation, now int64) ([]*model.Delivered, error) {
	tok := s.beginRecord()
	s.scheduleLocked(sb)
	sb.mu.Unlock()

	err := s.journal(ctx, rec)

	sb.mu.Lock()
	sb.settlePicks(picks, err == nil)
	var returned []*flight
	if err == nil {
		sb.settleNew(created)
		if req.Group.FIFO && req.AttemptID != "" && len(picks) > 0 {
			fl := make([]*flight, len(picks))
			for i, p := range picks {
				fl[i] = p.f
			}
			sb.rememberAttempt(req.AttemptID, fl)
		}
	} else {
		returned = sb.abandonNew(created, resv, s.now())
	}
	s.endRecord(tok)
	s.scheduleLocked(sb)
	sb.mu.Unlock()

	if err != nil {
		// What this call took is visible again.
		s.hub.Notify(sb.key)
		if len(returned) > 0 {
			s.recordReturned(ctx, sb, returned, s.now())
		}
		return nil, err
	}
	out := make([]*model.Delivered, 0, len(picks))
	for i := range picks {
		out = append(out, s.delivered(sb, picks[i].f, picks[i].v, picks[i].msg, req, now))
	}
	return out, nil
}

// readFresh reads new messages of one queue into picks (or holds FIFO ones
// back), advancing q.next over everything it consumed or filtered out.
func (s *Service) readFresh(sb *sub, q *qstate, qid int32, req *ReceiveRequest, fl *filter, fifo bool, now, inv int64, picks *[]pick, created *[]*flight, rec *jrecord) error {
	for len(*picks) < req.Max {
		want := req.Max - len(*picks)
		if !fl.f.All() || fifo {
			want = max(want, 64)
		}
		ents, err := s.store.ReadQueue(sb.topic, qid, q.next, want)
		if errors.Is(err, storage.ErrOffsetMoved) {
			min, _ := s.store.QueueRange(sb.topic, qid)
			s.log.Info("pop: retention removed unread messages", "group", sb.group, "topic", sb.topic, "queue", qid, "from", q.next, "to", min)
			if min <= q.next {
				return nil
			}
			q.next = min
			continue
		}
		if err != nil {
			return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading queue")
		}
		if len(ents) == 0 {
			return nil
		}
		n := min(len(ents), req.Max-len(*picks))
		if cap(*picks)-len(*picks) < n {
			// Sized for the batch at once rather than grown by appends.
			*picks = slices.Grow(*picks, n)
			*created = slices.Grow(*created, n)
			rec.entries = slices.Grow(rec.entries, n)
		}
		// Without a tag filter the first n entries are all read unless a
		// record is unreadable or an SQL filter skips it: read them at
		// once (one copy for each run of adjacent records), and any
		// further ones one by one.
		var pre []storage.QueueEntry
		var msgs []*message.Message
		var errs []error
		if fl.hashes == nil {
			pre = ents[:n]
			msgs, errs = make([]*message.Message, n), make([]error, n)
			s.store.ReadEntries(pre, msgs, errs)
		}
		for i, e := range ents {
			if len(*picks) >= req.Max {
				return nil
			}
			if fl.hashes != nil {
				if _, ok := fl.hashes[e.TagHash]; !ok {
					q.next = e.QueueOffset + 1
					continue
				}
			}
			var m *message.Message
			var err error
			if i < len(pre) {
				m, err = msgs[i], errs[i]
			} else {
				m, err = s.store.ReadMessage(e.PhysOffset, e.Size)
			}
			if err != nil {
				s.log.Warn("pop: unreadable message skipped", "topic", sb.topic, "queue", qid, "offset", e.QueueOffset, "err", err)
				q.next = e.QueueOffset + 1
				continue
			}
			if !fl.f.Match(m.Tag(), m) {
				q.next = e.QueueOffset + 1
				continue
			}
			m.QueueOffset = e.QueueOffset
			f := &flight{queue: qid, offset: e.QueueOffset, phys: e.PhysOffset, size: e.Size, epoch: 1,
				visibleAt: now + inv, renewFrom: now, pend: pendNew, hidx: -1}
			if fifo {
				if g, _ := m.Get(record.PropShardingKey); g != "" {
					f.msgGroup = g
					f.flags |= flagFIFO
					if sb.active[g] > 0 || len(sb.held[g]) > 0 {
						if sb.heldCount() >= s.cfg.MaxHeld {
							return nil // do not read further until the group moves
						}
						f.flags |= flagHeld
						f.epoch = 0
						f.visibleAt = 0
						sb.add(f)
						*created = append(*created, f)
						q.next = e.QueueOffset + 1
						rec.entries = append(rec.entries, entryOf(f))
						continue
					}
				}
			}
			if req.AutoRenew {
				f.flags |= flagAutoRenew
				f.client = req.ClientID
			}
			sb.add(f)
			*created = append(*created, f)
			q.next = e.QueueOffset + 1
			*picks = append(*picks, pick{f: f, msg: m})
			rec.entries = append(rec.entries, entryOf(f))
		}
	}
	return nil
}

func (s *sub) heldCount() (n int) {
	for _, l := range s.held {
		n += len(l)
	}
	return n
}

// dlqLease is how long a message being moved to the DLQ is hidden from
// other receives.
const dlqLease = 5 * time.Second

func entryOf(f *flight) jentry { return entryAs(f, f.state()) }

// entryAs is f's opDeliver entry with the state st.
func entryAs(f *flight, st fstate) jentry {
	return jentry{queue: f.queue, offset: f.offset, epoch: st.epoch, gen: st.gen, visibleAt: st.visibleAt,
		phys: f.phys, size: f.size, flags: st.flags &^ flagMoving, msgGroup: f.msgGroup, client: st.client}
}

// delivered builds the delivery of f in state v (copied under sb.mu).
func (s *Service) delivered(sb *sub, f *flight, v fstate, m *message.Message, req *ReceiveRequest, now int64) *model.Delivered {
	d := record.FromRecord(m)
	d.Message.Topic = req.Topic.Name
	d.QueueID = f.queue
	d.QueueOffset = f.offset
	d.Attempt = int32(v.epoch)
	d.InvisibleFor = time.Duration(v.visibleAt-now) * time.Millisecond
	var flags uint8
	if v.flags&flagFIFO != 0 && f.msgGroup != "" {
		flags |= HandleFIFO
	}
	if v.flags&flagAutoRenew != 0 {
		flags |= HandleAutoRenew
	}
	// Never before the delivery began (a handle re-issued for a repeated
	// receive after the wall clock stepped back): lookup refuses those.
	d.ReceiptHandle = s.codec.Load().Encode(Handle{Flags: flags, Queue: f.queue, Offset: f.offset, Epoch: v.epoch, Gen: v.gen,
		Retrieved: max(now, v.renewFrom), Invisible: uint32(max(v.visibleAt-now, 0)), GroupHash: sb.gh, TopicHash: sb.th})
	return d
}

// journalAppend is what appending a journal record allocates, in one
// allocation: the batch handed to the store, its message and, when the
// record fits (an ack's or a change's does), the message's body.
type journalAppend struct {
	msgs [1]*message.Message
	m    message.Message
	body [journalInline]byte
}

// journalInline is the body journalAppend holds: a record of a few
// entries with group and topic names of up to about 80 bytes each.
const journalInline = 192

// journal appends r to the journal topic.
func (s *Service) journal(ctx context.Context, r *jrecord) error {
	j := new(journalAppend)
	body := j.body[:0]
	if n := r.sizeHint(); n > len(j.body) {
		body = make([]byte, 0, n)
	}
	j.m = message.Message{Topic: JournalTopic, QueueID: 0, BornTime: r.at, Body: r.encode(body)}
	j.msgs[0] = &j.m
	res, err := s.store.Append(ctx, j.msgs[:]...)
	if err != nil {
		return storeError(err)
	}
	if res.Status == storage.StatusFlushTimeout {
		s.log.Warn("pop: state change recorded but its fsync timed out")
	}
	return nil
}

func storeError(err error) error {
	if mqerr.Classified(err) {
		return err // classified already (a replica group's refusal)
	}
	switch {
	case errors.Is(err, storage.ErrClosed):
		return mqerr.Wrap(mqerr.KindUnavailable, err, "store is closed")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return mqerr.Wrap(mqerr.KindRequestTimeout, err, "recording consumption state")
	}
	return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "recording consumption state")
}

// DLQQueue is the queue of dead-letter topic t a data group of place p
// dead-letters into: the first it holds (0 with one group, or when it
// holds none).
func DLQQueue(t model.Topic, p placement.Of) int32 {
	if p.Count(t.Name, false, t.Queues) > 0 {
		return p.Nth(t.Name, false, 0)
	}
	return 0
}

// moveToDLQ appends a copy of the message to %DLQ%<group> and records the
// flight as done, in one atomic append, then forgets the flight.
func (s *Service) moveToDLQ(ctx context.Context, sb *sub, f *flight, m *message.Message, why string) error {
	t, err := s.dlq.EnsureDLQ(ctx, sb.group)
	if err != nil {
		return err
	}
	cp := *m
	cp.Topic = t.Name
	cp.QueueID = DLQQueue(t, s.cfg.Placement)
	cp.Properties = append([]message.Property(nil), m.Properties...)
	if _, ok := cp.Get(record.PropDLQOriginTopic); !ok {
		cp.Set(record.PropDLQOriginTopic, sb.topic)
		cp.Set(record.PropDLQOriginID, m.UniqKey())
	}
	cp.Del(record.PropRealTopic)
	cp.Set(record.PropReconsumeTime, strconv.FormatUint(uint64(f.epoch), 10))
	now := s.now()
	rec := jrecord{op: opDone, group: sb.group, topic: sb.topic, at: now, entries: []jentry{{queue: f.queue, offset: f.offset, epoch: f.epoch, gen: f.gen}}}
	// The flight is removed after the append: a snapshot in between must
	// replay this record (fence, pending.go).
	tok := s.beginRecord()
	defer s.endRecord(tok)
	if _, err := s.store.Append(ctx, &cp, &message.Message{Topic: JournalTopic, BornTime: now, Body: rec.encode(make([]byte, 0, rec.sizeHint()))}); err != nil {
		return storeError(err)
	}
	sb.mu.Lock()
	var unheld *flight
	if sb.holds(f) {
		unheld = sb.remove(f, now)
	}
	s.scheduleLocked(sb)
	sb.mu.Unlock()
	if unheld != nil {
		s.hub.Notify(sb.key)
	}
	s.log.Info("pop: message moved to the dead-letter queue", "group", sb.group, "topic", sb.topic,
		"queue", f.queue, "offset", f.offset, "attempts", f.epoch, "dlq", t.Name, "reason", why)
	return nil
}

// invalid builds the INVALID_RECEIPT_HANDLE error.
func invalid(format string, args ...any) error {
	return mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "invalid receipt handle: "+format, args...)
}

// lookup validates a handle against the current state.
// sb.mu must be held.
func (s *Service) lookup(sb *sub, h Handle, now int64) (*flight, error) {
	if sb == nil {
		return nil, invalid("no message of this topic is in flight for this group")
	}
	if h.GroupHash != sb.gh || h.TopicHash != sb.th {
		return nil, invalid("issued for another consumer group or topic")
	}
	q := sb.queues[h.Queue]
	var f *flight
	if q != nil {
		f = q.flights[h.Offset]
	}
	switch {
	case f == nil || f.held() || f.flags&flagMoving != 0:
		return nil, invalid("the message is no longer in flight (already acknowledged, dead-lettered or expired and redelivered)")
	case h.Epoch < f.epoch:
		return nil, invalid("the message was redelivered since this handle was issued")
	case h.Epoch > f.epoch:
		return nil, invalid("the delivery was withdrawn before it reached the consumer")
	case h.Gen < f.gen:
		return nil, invalid("superseded by a later ChangeInvisibleDuration: use the newest handle")
	case h.Gen > f.gen:
		return nil, invalid("the delivery was withdrawn before it reached the consumer")
	case h.Retrieved < f.renewFrom:
		// Same delivery number and generation, issued before the current
		// delivery began: a delivery dropped by an offset reset, whose
		// counters started again (see Reset).
		return nil, invalid("issued for an earlier delivery of this message, dropped when the group's offset was reset")
	case now >= f.visibleAt:
		return nil, invalid("the invisible duration expired at %s; the message will be redelivered", time.UnixMilli(f.visibleAt).UTC().Format(time.RFC3339Nano))
	case f.pend != 0:
		return nil, mqerr.Errorf(mqerr.KindTooManyRequests, "another change of this delivery is being recorded; retry")
	}
	return f, nil
}

func (s *Service) decode(handle string) (Handle, error) {
	h, err := s.codec.Load().Decode(handle)
	if err != nil {
		return h, mqerr.Wrap(mqerr.KindInvalidReceiptHandle, err, "invalid receipt handle")
	}
	return h, nil
}

// Ack acknowledges deliveries; one error (nil on success) per handle. The
// flights stay in place, pending, until the record is written: removed
// then (releasing a FIFO message group's next message), or left as they
// were if it fails, their handles still valid.
func (s *Service) Ack(ctx context.Context, group, topic string, handles []string) []error {
	errs := make([]error, len(handles))
	sb := s.getSub(group, topic, false)
	if sb == nil {
		for i, hs := range handles {
			if _, errs[i] = s.decode(hs); errs[i] == nil {
				errs[i] = invalid("no message of this topic is in flight for this group")
			}
		}
		return errs
	}
	now := s.now()
	// Sized for the common acks of one handle or a few without a heap
	// allocation (a larger one grows the slice on the heap).
	var ents [4]jentry
	rec := jrecord{op: opAck, group: group, topic: topic, at: now, entries: ents[:0]}
	acked := make([]*flight, 0, len(handles))
	idx := make([]int, 0, len(handles))
	sb.mu.Lock()
	for i, hs := range handles {
		h, err := s.decode(hs)
		if err != nil {
			errs[i] = err
			continue
		}
		f, err := s.lookup(sb, h, now)
		if err != nil {
			errs[i] = err
			continue
		}
		f.pend = pendAck
		sb.unqueue(f)
		acked = append(acked, f)
		idx = append(idx, i)
		rec.entries = append(rec.entries, jentry{queue: f.queue, offset: f.offset, epoch: f.epoch, gen: f.gen})
	}
	if len(acked) == 0 {
		sb.mu.Unlock()
		return errs
	}
	tok := s.beginRecord()
	s.scheduleLocked(sb)
	sb.mu.Unlock()

	err := s.journal(ctx, &rec)

	sb.mu.Lock()
	now = s.now()
	unheld := false
	for _, f := range acked {
		f.pend = 0
		switch {
		case !sb.holds(f): // dropped by an offset reset meanwhile
		case err == nil:
			if sb.remove(f, now) != nil {
				unheld = true
			}
		default:
			sb.setDeadline(f, f.visibleAt)
		}
	}
	s.endRecord(tok)
	s.scheduleLocked(sb)
	sb.mu.Unlock()
	if err != nil {
		for _, i := range idx {
			errs[i] = err
		}
	}
	if unheld {
		s.hub.Notify(sb.key)
	}
	return errs
}

// ChangeInvisible sets a delivery's deadline to now+d and returns the new
// handle; the old one is superseded. Later redelivery counts an attempt.
// Until the change is recorded the delivery keeps its deadline and is
// pending; if recording fails it is left as it was, the old handle valid.
func (s *Service) ChangeInvisible(ctx context.Context, group, topic, handle string, d time.Duration) (string, error) {
	h, err := s.decode(handle)
	if err != nil {
		return "", err
	}
	sb := s.getSub(group, topic, false)
	now := s.now()
	if sb == nil {
		_, err := s.lookup(nil, h, now)
		return "", err
	}
	sb.mu.Lock()
	f, err := s.lookup(sb, h, now)
	if err != nil {
		sb.mu.Unlock()
		return "", err
	}
	to := f.state()
	to.gen++
	to.flags &^= flagAutoRenew
	to.client = ""
	to.visibleAt = now + d.Milliseconds()
	f.pend = pendChange
	sb.unqueue(f)
	rec := jrecord{op: opChange, group: group, topic: topic, at: now,
		entries: []jentry{{queue: f.queue, offset: f.offset, epoch: to.epoch, gen: to.gen, visibleAt: to.visibleAt, flags: to.flags}}}
	nh := Handle{Flags: h.Flags &^ HandleAutoRenew, Queue: f.queue, Offset: f.offset, Epoch: to.epoch, Gen: to.gen,
		Retrieved: max(now, to.renewFrom), Invisible: uint32(d.Milliseconds()), GroupHash: sb.gh, TopicHash: sb.th}
	tok := s.beginRecord()
	s.scheduleLocked(sb)
	sb.mu.Unlock()

	err = s.journal(ctx, &rec)

	sb.mu.Lock()
	f.pend = 0
	if err == nil {
		f.setState(to)
	}
	if sb.holds(f) {
		sb.setDeadline(f, f.visibleAt)
	}
	s.endRecord(tok)
	s.scheduleLocked(sb)
	sb.mu.Unlock()
	if err != nil {
		return "", err
	}
	if d <= 0 {
		s.hub.Notify(sb.key)
	}
	return s.codec.Load().Encode(nh), nil
}

// ForwardToDLQ moves a delivery to the group's dead-letter topic now.
func (s *Service) ForwardToDLQ(ctx context.Context, group, topic, handle string) error {
	h, err := s.decode(handle)
	if err != nil {
		return err
	}
	sb := s.getSub(group, topic, false)
	now := s.now()
	if sb == nil {
		_, err := s.lookup(nil, h, now)
		return err
	}
	sb.mu.Lock()
	f, err := s.lookup(sb, h, now)
	sb.mu.Unlock()
	if err != nil {
		return err
	}
	m, err := s.store.ReadMessage(f.phys, f.size)
	if err != nil {
		return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the message to forward")
	}
	return s.moveToDLQ(ctx, sb, f, m, "forwarded by the consumer")
}

// ReleaseClient makes the auto-renewed deliveries of a client that went
// away visible again after a second.
func (s *Service) ReleaseClient(ctx context.Context, clientID string) {
	if clientID == "" {
		return
	}
	now := s.now()
	for _, sb := range s.allSubs() {
		rec := jrecord{op: opChange, group: sb.group, topic: sb.topic, at: now}
		sb.mu.Lock()
		for _, f := range sb.due {
			if f.flags&flagAutoRenew != 0 && f.client == clientID {
				f.flags &^= flagAutoRenew
				f.client = ""
				sb.setDeadline(f, min(f.visibleAt, now+1000))
				rec.entries = append(rec.entries, jentry{queue: f.queue, offset: f.offset, epoch: f.epoch, gen: f.gen, visibleAt: f.visibleAt, flags: f.flags})
			}
		}
		s.scheduleLocked(sb)
		sb.mu.Unlock()
		if len(rec.entries) > 0 {
			if err := s.journal(ctx, &rec); err != nil {
				s.log.Warn("pop: recording a released client's deliveries failed", "client", clientID, "err", err)
			}
		}
	}
}

// delayInherited pushes the deadline of every delivery in flight back by
// d (Config.InheritedGrace).
func (s *Service) delayInherited(d time.Duration) {
	if d <= 0 {
		return
	}
	for _, sb := range s.allSubs() {
		sb.mu.Lock()
		for _, f := range slices.Clone(sb.due) {
			sb.setDeadline(f, f.visibleAt+d.Milliseconds())
		}
		s.scheduleLocked(sb)
		sb.mu.Unlock()
	}
}

// RenewedClients are the clients whose deliveries are renewed
// automatically (push consumers), each once.
func (s *Service) RenewedClients() []string {
	seen := map[string]bool{}
	var out []string
	for _, sb := range s.allSubs() {
		sb.mu.Lock()
		for _, f := range sb.due {
			if f.flags&flagAutoRenew != 0 && f.client != "" && !seen[f.client] {
				seen[f.client] = true
				out = append(out, f.client)
			}
		}
		sb.mu.Unlock()
	}
	return out
}

func (s *Service) allSubs() []*sub {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*sub, 0, len(s.subs))
	for _, sb := range s.subs {
		out = append(out, sb)
	}
	return out
}

// renewSchedule is how far each successive renewal pushes the deadline.
var renewSchedule = []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}

const (
	renewAhead   = 10 * time.Second
	renewMaxTime = 3 * time.Hour
)

func (s *Service) renewLoop(ctx context.Context) {
	t := s.clk.NewTimer(s.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		s.renew(ctx)
		t.Reset(s.cfg.RenewInterval)
	}
}

// renew extends auto-renewed deliveries close to their deadline, without
// changing their handles' generation (push consumers ack with the handle
// they got at delivery).
func (s *Service) renew(ctx context.Context) {
	now := s.now()
	for _, sb := range s.allSubs() {
		rec := jrecord{op: opChange, group: sb.group, topic: sb.topic, at: now}
		sb.mu.Lock()
		var touched []*flight
		for _, f := range sb.due {
			if f.flags&flagAutoRenew == 0 || f.visibleAt <= now || f.visibleAt-now > renewAhead.Milliseconds() {
				continue
			}
			if now-f.renewFrom >= renewMaxTime.Milliseconds() {
				f.flags &^= flagAutoRenew // let it expire: redelivered with attempt+1
				f.client = ""
			} else {
				d := renewSchedule[min(int(f.renewN), len(renewSchedule)-1)]
				f.renewN++
				f.visibleAt = now + d.Milliseconds()
			}
			touched = append(touched, f)
			rec.entries = append(rec.entries, jentry{queue: f.queue, offset: f.offset, epoch: f.epoch, gen: f.gen, visibleAt: f.visibleAt, flags: f.flags})
		}
		for _, f := range touched {
			if f.hidx >= 0 {
				heap.Fix(&sb.due, f.hidx)
			}
		}
		s.scheduleLocked(sb)
		sb.mu.Unlock()
		if len(rec.entries) > 0 {
			if err := s.journal(ctx, &rec); err != nil {
				s.log.Warn("pop: recording renewals failed", "group", sb.group, "err", err)
			}
		}
	}
}

// scheduleLocked arranges for sb's waiters to be woken at its earliest
// deadline; it takes s.schedMu.
// sb.mu must be held.
func (s *Service) scheduleLocked(sb *sub) {
	at := sb.earliest()
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	if at == 0 {
		if sb.sidx >= 0 {
			heap.Remove(&s.sched, sb.sidx)
		}
		return
	}
	if sb.sidx >= 0 {
		if sb.wakeAt == at {
			return
		}
		sb.wakeAt = at
		heap.Fix(&s.sched, sb.sidx)
	} else {
		sb.wakeAt = at
		heap.Push(&s.sched, sb)
	}
	if s.sched[0] == sb {
		select {
		case s.schedKick <- struct{}{}:
		default:
		}
	}
}

// wakeLoop wakes the long polls of subscriptions whose deliveries expire,
// so redeliveries go out at the deadline.
func (s *Service) wakeLoop(ctx context.Context) {
	for {
		s.schedMu.Lock()
		next := int64(0)
		now := s.now()
		var due []*sub
		for len(s.sched) > 0 && s.sched[0].wakeAt <= now {
			due = append(due, heap.Pop(&s.sched).(*sub))
		}
		if len(s.sched) > 0 {
			next = s.sched[0].wakeAt
		}
		s.schedMu.Unlock()
		for _, sb := range due {
			s.hub.Notify(sb.key)
		}
		var tc <-chan time.Time
		var t clock.Timer
		if next > 0 {
			t = clock.At(s.clk, time.UnixMilli(next))
			tc = t.C()
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-s.schedKick:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// Stats describes one subscription.
type Stats struct {
	Group, Topic string
	InFlight     int
	Held         int
	// Next is the fresh-read position per queue.
	Next map[int32]int64
}

// Stats returns every subscription's state.
func (s *Service) Stats() []Stats {
	var out []Stats
	for _, sb := range s.allSubs() {
		sb.mu.Lock()
		st := Stats{Group: sb.group, Topic: sb.topic, Held: sb.heldCount(), Next: map[int32]int64{}}
		st.InFlight = sb.inflight() - st.Held
		for id, q := range sb.queues {
			st.Next[id] = q.next
		}
		sb.mu.Unlock()
		out = append(out, st)
	}
	return out
}

func (s *Service) String() string { return fmt.Sprintf("pop(%d subscriptions)", len(s.allSubs())) }

// Snapshot persists the state now (it also runs periodically and at Close).
func (s *Service) Snapshot() error { return s.snapshot() }

// Abort stops background work WITHOUT a final snapshot, leaving the state
// to be rebuilt from the last snapshot and the journal, as after a crash.
// Tests use it; Close is the normal stop.
func (s *Service) Abort(ctx context.Context) error { return s.group.Shutdown(ctx) }

// Release withdraws deliveries that never reached the consumer (the
// response could not be written): they become visible at once and their
// next delivery carries the same attempt number.
func (s *Service) Release(ctx context.Context, group, topic string, handles []string) []error {
	errs := make([]error, len(handles))
	sb := s.getSub(group, topic, false)
	now := s.now()
	rec := jrecord{op: opChange, group: group, topic: topic, at: now}
	if sb != nil {
		sb.mu.Lock()
	}
	for i, hs := range handles {
		h, err := s.decode(hs)
		if err == nil {
			var f *flight
			f, err = s.lookup(sb, h, now)
			if err == nil {
				f.epoch--
				f.gen++
				f.flags &^= flagAutoRenew
				f.client = ""
				sb.setDeadline(f, now)
				rec.entries = append(rec.entries, jentry{queue: f.queue, offset: f.offset, epoch: f.epoch, gen: f.gen, visibleAt: f.visibleAt, flags: f.flags})
			}
		}
		errs[i] = err
	}
	if sb != nil {
		s.scheduleLocked(sb)
		sb.mu.Unlock()
	}
	if len(rec.entries) > 0 {
		s.hub.Notify(sb.key)
		if err := s.journal(ctx, &rec); err != nil {
			// The in-memory state already has them visible; after a crash
			// they would wait for their deadline instead. Report, do not undo.
			s.log.Warn("pop: recording released deliveries failed", "group", group, "err", err)
		}
	}
	return errs
}

// repeatAttempt re-issues a FIFO batch whose response the
// client lost: same messages, same attempt, new handles and deadline. It
// returns nil unless every message of that batch is still in flight (and
// not pending); the flights it returns are pending until recorded.
// sb.mu must be held.
func (s *Service) repeatAttempt(sb *sub, req *ReceiveRequest, now, inv int64, rec *jrecord) []pick {
	prev := sb.attempts[req.AttemptID]
	if len(prev) == 0 {
		return nil
	}
	for _, f := range prev {
		if !sb.holds(f) || f.held() || f.pend != 0 || f.visibleAt <= now {
			return nil
		}
	}
	out := make([]pick, 0, len(prev))
	for _, f := range prev {
		m, err := s.store.ReadMessage(f.phys, f.size)
		if err != nil {
			return nil
		}
		to := f.state()
		to.gen++
		to.visibleAt = now + inv
		out = append(out, pick{f: f, msg: m, to: to})
	}
	rec.op = opChange
	for _, p := range out {
		p.f.pend = pendChange
		sb.unqueue(p.f)
		rec.entries = append(rec.entries, jentry{queue: p.f.queue, offset: p.f.offset, epoch: p.to.epoch, gen: p.to.gen, visibleAt: p.to.visibleAt, flags: p.to.flags})
	}
	return out
}

// KeyBlob names the blob holding the receipt-handle key and the store
// incarnation (4 bytes, then the key; at least 20 bytes in all). A
// replicated store writes it on every member from one agreed value, so
// that a handle issued by one member verifies on the others.
const KeyBlob = "receipt-handle-key"

// Flight is one message a subscription was given and has not
// acknowledged, or holds back behind its FIFO message group.
type Flight struct {
	Queue  int32
	Offset int64
	// Deliveries is how many times it was delivered.
	Deliveries uint32
	// VisibleAt: while in flight its deadline, past it when it is due
	// again.
	VisibleAt time.Time
	Held      bool
}

// OldestInFlight returns, for each queue of the (group, topic)
// subscription, its message in flight (or held) at the lowest offset, by
// queue id; nil when none is.
func (s *Service) OldestInFlight(group, topic string) []Flight {
	sb := s.getSub(group, topic, false)
	if sb == nil {
		return nil
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var out []Flight
	for id, q := range sb.queues {
		var oldest *flight
		for _, f := range q.flights {
			if oldest == nil || f.offset < oldest.offset {
				oldest = f
			}
		}
		if oldest != nil {
			out = append(out, Flight{Queue: id, Offset: oldest.offset, Deliveries: oldest.epoch,
				VisibleAt: time.UnixMilli(oldest.visibleAt), Held: oldest.held()})
		}
	}
	slices.SortFunc(out, func(a, b Flight) int { return int(a.Queue - b.Queue) })
	return out
}
