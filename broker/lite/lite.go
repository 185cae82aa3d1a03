package lite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the service needs of the store: appends for the journal
// (through the replica group in cluster mode), queue reads to index and
// to rebuild.
type Store interface {
	Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error)
	ReadQueue(topic string, queueID int32, fromOffset int64, max int) ([]storage.QueueEntry, error)
	ReadMessage(physOffset int64, size int32) (*message.Message, error)
	QueueRange(topic string, queueID int32) (min, max int64)
}

// Topics lists the LITE parents at Open.
type Topics interface {
	ListTopics(ctx context.Context) ([]model.Topic, error)
}

// Unsubscribed is one notice that a client's lite subscription lost a
// lite topic (it expired).
type Unsubscribed struct {
	ClientID, Group, Parent, Lite string
}

// Defaults.
const (
	DefaultTopicQuota        = 2_000_000
	DefaultSubscriptionQuota = 3000
	DefaultMaxLiteTopic      = 64
	DefaultExpiryInterval    = 30 * time.Second
)

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// DLQQueue is the queue of a dead-letter topic dead letters go to
	// (nil: 0).
	DLQQueue func(t model.Topic) int32
	// Key authenticates receipt handles (the receipt-handle key).
	Key []byte
	// TopicQuota caps the lite topics of one parent (a send that would
	// create one more answers KindLiteTopicQuota).
	TopicQuota int
	// SubscriptionQuota caps the lite topics of one client's subscription.
	SubscriptionQuota int
	// MaxLiteTopic is the longest lite topic name, in bytes.
	MaxLiteTopic int
	// ExpiryInterval is how often expired lite topics are dropped.
	ExpiryInterval time.Duration
	// DeadLetters returns a group's dead-letter topic, creating it; nil
	// refuses dead-lettering lite messages.
	DeadLetters func(ctx context.Context, group string) (model.Topic, error)
	// OnUnsubscribed is told, with no lock held, of each client that lost
	// a subscribed lite topic. It must not block for long.
	OnUnsubscribed func(Unsubscribed)
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TopicQuota <= 0 {
		c.TopicQuota = DefaultTopicQuota
	}
	if c.SubscriptionQuota <= 0 {
		c.SubscriptionQuota = DefaultSubscriptionQuota
	}
	if c.MaxLiteTopic <= 0 {
		c.MaxLiteTopic = DefaultMaxLiteTopic
	}
	if c.ExpiryInterval <= 0 {
		c.ExpiryInterval = DefaultExpiryInterval
	}
	return c
}

// Service is the lite topics of every LITE parent.
//
// Lock order: Service.mu (the parents map) → parent.mu; subs.mu and each
// client's notifier lock are leaves, never held while taking another lock.
type Service struct {
	cfg   Config
	store Store
	codec *codec
	group *lifecycle.Group

	mu      sync.Mutex
	parents map[string]*parent

	subs registry
}

// Open rebuilds the lite topics of every LITE parent from the store (their
// queues, then the journal) and starts the expiry loop.
func Open(ctx context.Context, cfg Config, st Store, topics Topics) (*Service, error) {
	cfg = cfg.WithDefaults()
	if len(cfg.Key) < 16 {
		return nil, errors.New("lite: receipt-handle key shorter than 16 bytes")
	}
	s := &Service{cfg: cfg, store: st, codec: newCodec(cfg.Key), parents: map[string]*parent{}}
	s.subs.init()
	ts, err := topics.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Type != model.TopicLite {
			continue
		}
		p := s.parentFor(t)
		p.mu.Lock()
		err := s.catchUp(p)
		p.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("lite: indexing %s: %w", t.Name, err)
		}
	}
	if err := s.replay(); err != nil {
		return nil, err
	}
	now := s.nowSec()
	for _, p := range s.parents {
		p.mu.Lock()
		s.expireLocked(p, now)
		for q := range p.queues {
			lo, _ := s.store.QueueRange(p.topic.Name, int32(q))
			for _, lt := range p.lites {
				if lt.queue == int32(q) {
					lt.trim(lo)
				}
			}
		}
		p.mu.Unlock()
	}
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("lite-expiry", s.expiryLoop); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the expiry loop.
func (s *Service) Close(ctx context.Context) error {
	if s.group == nil {
		return nil
	}
	return s.group.Shutdown(ctx)
}

func (s *Service) nowSec() uint32 { return uint32(s.cfg.Clock.Now().Unix()) }

// parentFor returns the parent of LITE topic t, refreshing its topic (a
// queue count that grew adds queues). The caller must not hold p.mu.
func (s *Service) parentFor(t model.Topic) *parent {
	s.mu.Lock()
	p := s.parents[t.Name]
	if p == nil {
		p = newParent(t)
		s.parents[t.Name] = p
		s.mu.Unlock()
		return p
	}
	s.mu.Unlock()
	p.mu.Lock()
	p.topic = t
	for int32(len(p.queues)) < t.Queues {
		p.queues = append(p.queues, queueState{})
	}
	p.mu.Unlock()
	return p
}

func (s *Service) existing(name string) *parent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parents[name]
}

// DropTopic forgets a deleted parent.
func (s *Service) DropTopic(name string) {
	s.mu.Lock()
	delete(s.parents, name)
	s.mu.Unlock()
	s.subs.wakeParent(name)
}

// catchUp indexes every record the parent's queues show past what is
// indexed: from what sends left in pending, else read back. p.mu held.
func (s *Service) catchUp(p *parent) error {
	for q := range p.queues {
		if err := s.catchUpQueue(p, int32(q)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) catchUpQueue(p *parent, q int32) error {
	qs := &p.queues[q]
	lo, hi := s.store.QueueRange(p.topic.Name, q)
	if qs.indexed < lo {
		qs.indexed = lo
	}
	for {
		// What sends reported is stored (readable by position) even
		// before the queue shows it.
		if pe, ok := qs.pending[qs.indexed]; ok {
			delete(qs.pending, qs.indexed)
			p.add(q, qs.indexed, pe)
			qs.indexed++
			continue
		}
		if qs.indexed >= hi {
			break
		}
		ents, err := s.store.ReadQueue(p.topic.Name, q, qs.indexed, 256)
		if errors.Is(err, storage.ErrOffsetMoved) {
			lo, _ = s.store.QueueRange(p.topic.Name, q)
			qs.indexed = max(qs.indexed+1, lo)
			continue
		}
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		for _, e := range ents {
			if e.QueueOffset != qs.indexed {
				break
			}
			if pe, ok := qs.pending[e.QueueOffset]; ok {
				delete(qs.pending, e.QueueOffset)
				p.add(q, e.QueueOffset, pe)
			} else {
				m, err := s.store.ReadMessage(e.PhysOffset, e.Size)
				if err != nil {
					return err
				}
				if name, ok := m.Get(record.PropLiteTopic); ok && name != "" {
					p.add(q, e.QueueOffset, pend{lite: name, phys: e.PhysOffset, size: e.Size, store: uint32(e.StoreTime / 1000)})
				}
			}
			qs.indexed++
		}
	}
	// What pending holds below the indexed position was indexed by a read
	// (or dropped by retention).
	for off := range qs.pending {
		if off < qs.indexed {
			delete(qs.pending, off)
		}
	}
	stalled := false
	for i := range p.queues {
		stalled = stalled || len(p.queues[i].pending) > 0
	}
	p.stalled.Store(stalled)
	return nil
}

// replay applies the journal: each group's position on each lite topic.
func (s *Service) replay() error {
	lo, hi := s.store.QueueRange(JournalTopic, 0)
	for off := lo; off < hi; {
		ents, err := s.store.ReadQueue(JournalTopic, 0, off, 256)
		if errors.Is(err, storage.ErrOffsetMoved) {
			off, _ = s.store.QueueRange(JournalTopic, 0)
			continue
		}
		if err != nil {
			return fmt.Errorf("lite: reading the journal: %w", err)
		}
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			off = e.QueueOffset + 1
			m, err := s.store.ReadMessage(e.PhysOffset, e.Size)
			if err != nil {
				return fmt.Errorf("lite: reading the journal: %w", err)
			}
			r, err := decodeAck(m.Body)
			if err != nil {
				s.cfg.Logger.Warn("lite journal record skipped", "offset", e.QueueOffset, "err", err)
				continue
			}
			p := s.parents[r.parent]
			if p == nil {
				continue
			}
			lt := p.lites[r.lite]
			if lt == nil || r.next < lt.first() {
				continue // expired, or a former lite topic of that name
			}
			pr := lt.progressFor(r.group)
			pr.next = max(pr.next, r.next)
		}
	}
	return nil
}

// Reserve makes sure lite topic name of LITE parent t exists before a
// send to it, creating it within the parent's quota.
func (s *Service) Reserve(t model.Topic, name string) error {
	p := s.parentFor(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.lites[name]; ok {
		return nil
	}
	if len(p.lites) >= s.cfg.TopicQuota {
		return mqerr.Errorf(mqerr.KindLiteTopicQuota, "topic %q has %d lite topics, its quota; %q would be one more", t.Name, len(p.lites), name)
	}
	p.lites[name] = &liteTopic{name: name, queue: QueueOf(name, t.Queues), last: s.nowSec()}
	return nil
}

// QueueOf is the parent queue a lite topic's messages go to.
func QueueOf(name string, queues int32) int32 {
	if queues <= 1 {
		return 0
	}
	return int32(hash32(name) % uint32(queues))
}

// Appended indexes the records a send stored in queue q of LITE parent t
// (names and entries in order) and wakes its receives.
func (s *Service) Appended(t model.Topic, q int32, names []string, ents []storage.AppendEntry) {
	p := s.parentFor(t)
	p.mu.Lock()
	if int(q) < len(p.queues) {
		qs := &p.queues[q]
		if qs.pending == nil {
			qs.pending = map[int64]pend{}
		}
		for i, e := range ents {
			if e.QueueOffset >= qs.indexed {
				qs.pending[e.QueueOffset] = pend{lite: names[i], phys: e.PhysOffset, size: e.Size, store: uint32(e.StoreTime / 1000)}
			}
		}
		if err := s.catchUpQueue(p, q); err != nil {
			s.cfg.Logger.Warn("lite index catch-up failed; the next receive retries", "topic", t.Name, "queue", q, "err", err)
		}
	}
	p.mu.Unlock()
	s.subs.wakeLites(t.Name, names)
}

// Arrived is the store's arrival hook for LITE parents. Sends wake the
// receives of the lite topics they name (Appended); the hook wakes every
// receive of the parent only while the index waits for a record no send
// reported (a send that failed after its record was stored), which the
// receives then read from the queue. It does not block.
func (s *Service) Arrived(topic string) {
	if p := s.existing(topic); p != nil && p.stalled.Load() {
		s.subs.wakeParent(topic)
	}
}

// ReceiveRequest is one lite receive.
type ReceiveRequest struct {
	Group     model.Group
	Topic     model.Topic // the LITE parent
	ClientID  string
	Max       int
	Invisible time.Duration
	AutoRenew bool
	Wait      time.Duration
	// Closed ends waits (the broker draining).
	Closed <-chan struct{}
}

type pick struct {
	lite    string
	queue   int32
	e       entry
	gen     uint32
	attempt int32
	// dead: past the group's max attempts, for the dead-letter topic.
	dead bool
}

// Receive delivers up to req.Max messages of the lite topics the client
// subscribes to, in order per lite topic, long-polling up to req.Wait.
// Nothing found ⇒ KindMessageNotFound.
func (s *Service) Receive(ctx context.Context, req ReceiveRequest) ([]*model.Delivered, error) {
	p := s.parentFor(req.Topic)
	until := s.cfg.Clock.Now().Add(req.Wait)
	for {
		wake := s.subs.wait(req.ClientID)
		names, group, ok := s.subs.lites(req.ClientID, req.Topic.Name)
		var picks []pick
		var nextDeadline int64
		if ok && group == req.Group.Name {
			var err error
			picks, nextDeadline, err = s.pick(p, req, names)
			if err != nil {
				return nil, err
			}
		}
		if len(picks) > 0 {
			live := s.buryDead(ctx, p, req, picks)
			if len(live) > 0 {
				return s.deliver(req, live)
			}
			continue // every pick went to the dead-letter topic: look again
		}
		now := s.cfg.Clock.Now()
		if !now.Before(until) {
			return nil, mqerr.Errorf(mqerr.KindMessageNotFound, "no lite message for client %q on %s", req.ClientID, req.Topic.Name)
		}
		at := until
		if nextDeadline > 0 && time.UnixMilli(nextDeadline).Before(at) {
			at = time.UnixMilli(nextDeadline)
		}
		tm := clock.At(s.cfg.Clock, at)
		select {
		case <-wake:
		case <-tm.C():
		case <-ctx.Done():
		case <-req.Closed:
		}
		tm.Stop()
		if ctx.Err() != nil || isClosed(req.Closed) {
			return nil, mqerr.Errorf(mqerr.KindMessageNotFound, "no lite message for client %q on %s", req.ClientID, req.Topic.Name)
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// pick chooses runs under the parent's lock; it also returns the earliest
// deadline of a run it skipped (0: none), when a wait should look again.
func (s *Service) pick(p *parent, req ReceiveRequest, names []string) ([]pick, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := s.catchUp(p); err != nil {
		return nil, 0, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "indexing lite topics")
	}
	now := s.cfg.Clock.Now().UnixMilli()
	max := req.Max
	var picks []pick
	var nextDeadline int64
	for _, name := range names {
		if len(picks) >= max {
			break
		}
		lt := p.lites[name]
		if lt == nil || len(lt.msgs) == 0 {
			continue
		}
		pr := lt.progressFor(req.Group.Name)
		if pr.runEnd != 0 {
			if pr.deadline == 0 || now < pr.deadline {
				if pr.deadline > 0 && (nextDeadline == 0 || pr.deadline < nextDeadline) {
					nextDeadline = pr.deadline
				}
				continue
			}
			s.endRun(pr, !pr.suspended)
		}
		i := lt.at(pr.next)
		if i >= len(lt.msgs) {
			continue
		}
		pr.gen++
		pr.client = req.ClientID
		pr.suspended = false
		if req.AutoRenew {
			pr.deadline = 0
		} else {
			pr.deadline = now + req.Invisible.Milliseconds()
		}
		for ; i < len(lt.msgs) && len(picks) < max; i++ {
			e := lt.msgs[i]
			if slices.Contains(pr.acked, e.off) {
				continue // acknowledged out of order in an earlier run
			}
			attempt := int32(1)
			if e.off < pr.redeliverEnd {
				attempt = pr.attempt + 1
			}
			dead := req.Group.MaxDeliveryAttempts > 0 && attempt > req.Group.MaxDeliveryAttempts
			picks = append(picks, pick{lite: lt.name, queue: lt.queue, e: e, gen: pr.gen, attempt: attempt, dead: dead})
			pr.runEnd = e.off + 1
		}
	}
	if len(picks) > 0 {
		// The next receive of this client starts with other lite topics.
		s.subs.rotate(req.ClientID, len(picks))
	}
	return picks, nextDeadline, nil
}

// endRun ends a run in flight: its unacknowledged messages go out again
// (those acknowledged out of order stay acknowledged).
func (s *Service) endRun(pr *progress, countAttempt bool) {
	if countAttempt && pr.runEnd != 0 {
		pr.attempt++
		pr.redeliverEnd = max(pr.redeliverEnd, pr.runEnd)
	}
	pr.runEnd, pr.deadline, pr.client = 0, 0, ""
}

// buryDead moves the picks past the group's max attempts to its
// dead-letter topic and returns the others.
func (s *Service) buryDead(ctx context.Context, p *parent, req ReceiveRequest, picks []pick) []pick {
	live := picks[:0:0]
	for _, pk := range picks {
		if !pk.dead {
			live = append(live, pk)
			continue
		}
		h := handle{queue: pk.queue, offset: pk.e.off, gen: pk.gen, lite: pk.lite}
		if err := s.settle(ctx, p, req.Group.Name, req.Topic, h, s.deadLetter(ctx, req.Group.Name, req.Topic, pk.lite, "max delivery attempts")); err != nil {
			s.cfg.Logger.Warn("lite message not dead-lettered; it goes out again", "topic", req.Topic.Name, "lite_topic", pk.lite, "offset", pk.e.off, "err", err)
			live = append(live, pk)
		}
	}
	return live
}

// deliver reads the picked messages (no lock held) and builds deliveries.
func (s *Service) deliver(req ReceiveRequest, picks []pick) ([]*model.Delivered, error) {
	out := make([]*model.Delivered, 0, len(picks))
	gh, ph := hash32(req.Group.Name), hash32(req.Topic.Name)
	invisible := req.Invisible
	if req.AutoRenew {
		invisible = 0
	}
	for _, pk := range picks {
		m, err := s.store.ReadMessage(pk.e.phys, pk.e.size)
		if err != nil {
			// Removed by retention under the run: the run ends when its
			// invisibility does; deliver what could be read.
			s.cfg.Logger.Warn("lite message unreadable", "topic", req.Topic.Name, "lite_topic", pk.lite, "offset", pk.e.off, "err", err)
			continue
		}
		d := record.FromRecord(m)
		d.Message.Topic = req.Topic.Name
		d.Message.LiteTopic = pk.lite
		d.QueueID, d.QueueOffset, d.Attempt = pk.queue, pk.e.off, pk.attempt
		d.InvisibleFor = invisible
		d.ReceiptHandle = s.codec.encode(handle{queue: pk.queue, offset: pk.e.off, gen: pk.gen, groupHash: gh, parentHash: ph, lite: pk.lite})
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, mqerr.Errorf(mqerr.KindMessageNotFound, "no readable lite message")
	}
	return out, nil
}

// find decodes a handle and returns its lite topic and the group's
// progress, checked against the run in flight. p.mu held.
func (s *Service) findLocked(p *parent, group string, h handle) (*liteTopic, *progress, error) {
	lt := p.lites[h.lite]
	if lt == nil {
		return nil, nil, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "lite topic %q of %s expired or does not exist", h.lite, p.topic.Name)
	}
	pr := lt.progressOf(group)
	if pr == nil || pr.runEnd == 0 || pr.gen != h.gen || h.offset < pr.next || h.offset >= pr.runEnd {
		return nil, nil, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "the delivery of this handle is no longer in flight (acknowledged, or its invisibility expired and it went out again)")
	}
	return lt, pr, nil
}

func (s *Service) decode(group string, t model.Topic, hs string) (handle, error) {
	h, err := s.codec.decode(hs)
	if err != nil {
		return h, mqerr.Wrap(mqerr.KindInvalidReceiptHandle, err, "invalid receipt handle")
	}
	if h.groupHash != hash32(group) || h.parentHash != hash32(t.Name) {
		return h, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "receipt handle was issued to another group or topic")
	}
	return h, nil
}

// Ack acknowledges lite deliveries of group on parent t; one error (or
// nil) per handle. A position that moves is journaled before the ack
// answers.
func (s *Service) Ack(ctx context.Context, group string, t model.Topic, handles []string) []error {
	errs := make([]error, len(handles))
	p := s.parentFor(t)
	for i, hs := range handles {
		errs[i] = s.ack(ctx, p, group, t, hs)
	}
	return errs
}

func (s *Service) ack(ctx context.Context, p *parent, group string, t model.Topic, hs string) error {
	h, err := s.decode(group, t, hs)
	if err != nil {
		return err
	}
	return s.settle(ctx, p, group, t, h, nil)
}

// settle marks the delivery of h acknowledged. A position that moves is
// journaled before it answers; extra, when set, builds a record (a
// dead-letter copy) appended with that journal record, in one append.
func (s *Service) settle(ctx context.Context, p *parent, group string, t model.Topic, h handle, extra func(e entry, attempt int32) (*message.Message, error)) error {
	p.mu.Lock()
	lt, pr, err := s.findLocked(p, group, h)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	for _, a := range pr.acked {
		if a == h.offset {
			p.mu.Unlock()
			return nil // acknowledged already
		}
	}
	var e entry
	if i := lt.at(h.offset); i < len(lt.msgs) && lt.msgs[i].off == h.offset {
		e = lt.msgs[i]
	}
	attempt := int32(1)
	if h.offset < pr.redeliverEnd {
		attempt = pr.attempt + 1
	}
	pr.acked = append(pr.acked, h.offset)
	next := advance(lt, pr)
	moved := next > pr.next
	name := lt.name
	p.mu.Unlock()
	var recs []*message.Message
	if extra != nil {
		m, err := extra(e, attempt)
		if err != nil {
			p.mu.Lock()
			pr.acked = removeOffset(pr.acked, h.offset)
			p.mu.Unlock()
			return err
		}
		recs = append(recs, m)
	}
	if moved {
		body, err := ackRecord{group: group, parent: t.Name, lite: name, next: next}.encode()
		if err != nil {
			return mqerr.Wrap(mqerr.KindInternal, err, "encoding the acknowledgement")
		}
		recs = append(recs, &message.Message{Topic: JournalTopic, QueueID: 0, Body: body})
	}
	if len(recs) > 0 {
		if _, err := s.store.Append(ctx, recs...); err != nil {
			p.mu.Lock()
			pr.acked = removeOffset(pr.acked, h.offset)
			p.mu.Unlock()
			if mqerr.Classified(err) {
				return err
			}
			return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "recording the acknowledgement")
		}
	}
	p.mu.Lock()
	if moved && next > pr.next {
		pr.next = next
		if next >= pr.redeliverEnd {
			pr.attempt = 0
		}
		kept := pr.acked[:0]
		for _, a := range pr.acked {
			if a >= next {
				kept = append(kept, a)
			}
		}
		pr.acked = kept
	}
	done := pr.runEnd != 0 && pr.next >= pr.runEnd
	if done {
		s.endRun(pr, false)
		lo, _ := s.store.QueueRange(t.Name, lt.queue)
		lt.trim(lo)
	}
	p.mu.Unlock()
	if done {
		s.subs.wakeLites(t.Name, []string{name})
	}
	return nil
}

// ForwardToDLQ moves a lite delivery to the group's dead-letter topic
// (the consumer gave up on it) and acknowledges it, in one append.
func (s *Service) ForwardToDLQ(ctx context.Context, group string, t model.Topic, hs string) error {
	h, err := s.decode(group, t, hs)
	if err != nil {
		return err
	}
	return s.settle(ctx, s.parentFor(t), group, t, h, s.deadLetter(ctx, group, t, h.lite, "forwarded by the consumer"))
}

// deadLetter builds the dead-letter copy of a lite message.
func (s *Service) deadLetter(ctx context.Context, group string, t model.Topic, lite, why string) func(entry, int32) (*message.Message, error) {
	return func(e entry, attempt int32) (*message.Message, error) {
		if s.cfg.DeadLetters == nil {
			return nil, mqerr.Errorf(mqerr.KindUnsupported, "lite messages have no dead-letter topic here")
		}
		dlq, err := s.cfg.DeadLetters(ctx, group)
		if err != nil {
			return nil, err
		}
		m, err := s.store.ReadMessage(e.phys, e.size)
		if err != nil {
			return nil, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the message to dead-letter")
		}
		cp := *m
		cp.Topic, cp.QueueID = dlq.Name, 0
		if s.cfg.DLQQueue != nil {
			cp.QueueID = s.cfg.DLQQueue(dlq)
		}
		cp.Properties = append([]message.Property(nil), m.Properties...)
		cp.Set(record.PropDLQOriginTopic, t.Name)
		cp.Set(record.PropDLQOriginID, m.UniqKey())
		cp.Set(record.PropReconsumeTime, strconv.FormatInt(int64(attempt), 10))
		s.cfg.Logger.Info("lite message moved to the dead-letter queue", "group", group, "topic", t.Name, "lite_topic", lite,
			"offset", e.off, "attempts", attempt, "dlq", dlq.Name, "reason", why)
		return &cp, nil
	}
}

// advance is where next would be with every acknowledged offset of the
// run counted.
func advance(lt *liteTopic, pr *progress) int64 {
	next := pr.next
	for i := lt.at(next); i < len(lt.msgs) && lt.msgs[i].off < pr.runEnd; i++ {
		off := lt.msgs[i].off
		found := false
		for _, a := range pr.acked {
			if a == off {
				found = true
				break
			}
		}
		if !found {
			return off
		}
		next = off + 1
	}
	return next
}

func removeOffset(s []int64, v int64) []int64 {
	for i, x := range s {
		if x == v {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// ChangeInvisible moves the delivery's run to become visible again after
// d and returns the handle to use from now on. suspend keeps the next
// delivery from counting an attempt.
func (s *Service) ChangeInvisible(group string, t model.Topic, hs string, d time.Duration, suspend bool) (string, error) {
	h, err := s.decode(group, t, hs)
	if err != nil {
		return "", err
	}
	p := s.parentFor(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, pr, err := s.findLocked(p, group, h)
	if err != nil {
		return "", err
	}
	pr.deadline = s.cfg.Clock.Now().Add(d).UnixMilli()
	pr.suspended = suspend
	if d == 0 {
		defer s.subs.wakeLites(t.Name, []string{h.lite})
	}
	return hs, nil
}

// Release ends the runs of deliveries that never reached the consumer,
// without counting an attempt.
func (s *Service) Release(group string, t model.Topic, handles []string) []error {
	errs := make([]error, len(handles))
	p := s.parentFor(t)
	for i, hs := range handles {
		h, err := s.decode(group, t, hs)
		if err != nil {
			errs[i] = err
			continue
		}
		p.mu.Lock()
		if _, pr, err := s.findLocked(p, group, h); err == nil {
			s.endRun(pr, false)
		}
		p.mu.Unlock()
		s.subs.wakeLites(t.Name, []string{h.lite})
	}
	return errs
}

// ReleaseClient forgets a client that went away: its subscription, and
// its auto-renewed runs go out again.
func (s *Service) ReleaseClient(clientID string) {
	sub := s.subs.remove(clientID)
	if sub == nil {
		return
	}
	p := s.existing(sub.parent)
	if p == nil {
		return
	}
	p.mu.Lock()
	var freed []string
	for name := range sub.set {
		if lt := p.lites[name]; lt != nil {
			if pr := lt.progressOf(sub.group); pr != nil && pr.client == clientID && pr.deadline == 0 && pr.runEnd != 0 {
				s.endRun(pr, false)
				freed = append(freed, name)
			}
		}
	}
	p.mu.Unlock()
	s.subs.wakeLites(sub.parent, freed)
}

// expiryLoop drops expired lite topics every ExpiryInterval.
func (s *Service) expiryLoop(ctx context.Context) {
	for {
		tm := s.cfg.Clock.NewTimer(s.cfg.ExpiryInterval)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C():
		}
		s.Expire()
	}
}

// Expire drops every expired lite topic now and tells its subscribers.
func (s *Service) Expire() {
	s.mu.Lock()
	ps := make([]*parent, 0, len(s.parents))
	for _, p := range s.parents {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	now := s.nowSec()
	for _, p := range ps {
		p.mu.Lock()
		if err := s.catchUp(p); err != nil {
			s.cfg.Logger.Warn("lite index catch-up failed", "topic", p.topic.Name, "err", err)
		}
		gone := s.expireLocked(p, now)
		p.mu.Unlock()
		if len(gone) == 0 {
			continue
		}
		s.cfg.Logger.Info("lite topics expired", "topic", p.topic.Name, "count", len(gone))
		for _, n := range s.subs.dropLites(p.topic.Name, gone) {
			if s.cfg.OnUnsubscribed != nil {
				s.cfg.OnUnsubscribed(n)
			}
		}
	}
}

// expireLocked drops the lite topics of p idle for longer than its TTL.
// p.mu held.
func (s *Service) expireLocked(p *parent, now uint32) map[string]bool {
	ttl := p.ttlSeconds()
	if ttl == 0 {
		return nil
	}
	var gone map[string]bool
	for name, lt := range p.lites {
		if now > lt.last && now-lt.last > ttl {
			delete(p.lites, name)
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[name] = true
		}
	}
	return gone
}

// Action is how a subscription change applies its lite topics.
type Action int8

const (
	PartialAdd Action = iota
	PartialRemove
	CompleteAdd
	CompleteRemove
)

// StartKind is where a newly added lite topic starts for the group.
type StartKind int8

const (
	// StartDefault keeps the group's position, or starts at the oldest
	// message kept for a lite topic the group never consumed.
	StartDefault StartKind = iota
	StartFirst             // the oldest message kept
	StartLast              // after the newest message: new messages only
	StartOffset            // Value: a lite offset
	StartTailN             // Value: n messages back from the group's position
	StartTime              // Value: unix ms; the first message stored then or later
)

// Start is a subscription's start position.
type Start struct {
	Kind  StartKind
	Value int64
}

// SyncRequest changes a client's lite subscription.
type SyncRequest struct {
	ClientID string
	Group    string
	Topic    model.Topic // the LITE parent
	Action   Action
	Lites    []string
	Start    Start
}

// Sync applies a subscription change: quotas and names checked first,
// nothing changed on an error.
func (s *Service) Sync(req SyncRequest) error {
	if req.ClientID == "" {
		return mqerr.Errorf(mqerr.KindClientIDRequired, "a lite subscription needs a client id")
	}
	for _, n := range req.Lites {
		if err := ValidateName(n, s.cfg.MaxLiteTopic); err != nil {
			return err
		}
	}
	added, err := s.subs.apply(req, s.cfg.SubscriptionQuota)
	if err != nil {
		return err
	}
	p := s.parentFor(req.Topic)
	if req.Start.Kind != StartDefault && len(added) > 0 {
		p.mu.Lock()
		_ = s.catchUp(p)
		for _, n := range added {
			if lt := p.lites[n]; lt != nil {
				s.reposition(lt, req.Group, req.Start)
			}
		}
		p.mu.Unlock()
	}
	s.subs.wakeClient(req.ClientID)
	return nil
}

// reposition moves group's position on lt to start. p.mu held.
func (s *Service) reposition(lt *liteTopic, group string, st Start) {
	pr := lt.progressFor(group)
	target := pr.next
	switch st.Kind {
	case StartFirst:
		target = lt.first()
	case StartLast:
		target = lt.end()
	case StartOffset:
		i := st.Value - lt.base
		switch {
		case i <= 0:
			target = lt.first()
		case i >= int64(len(lt.msgs)):
			target = lt.end()
		default:
			target = lt.msgs[i].off
		}
	case StartTailN:
		// n messages back from the group's position, as upstream does.
		i := max(int64(lt.at(pr.next))-st.Value, 0)
		if i >= int64(len(lt.msgs)) {
			target = lt.end()
		} else {
			target = lt.msgs[i].off
		}
	case StartTime:
		sec := uint32(st.Value / 1000)
		i := sort.Search(len(lt.msgs), func(i int) bool { return lt.msgs[i].store >= sec })
		if i >= len(lt.msgs) {
			target = lt.end()
		} else {
			target = lt.msgs[i].off
		}
	}
	if target != pr.next {
		s.endRun(pr, false)
		pr.next, pr.attempt, pr.redeliverEnd, pr.acked = target, 0, 0, nil
	}
}

// ValidateName checks a lite topic name (KindIllegalLiteTopic).
func ValidateName(name string, max int) error {
	if name == "" {
		return mqerr.Errorf(mqerr.KindIllegalLiteTopic, "lite topic name is blank")
	}
	if len(name) > max {
		return mqerr.Errorf(mqerr.KindIllegalLiteTopic, "lite topic name %.40q is %d bytes, the limit is %d", name, len(name), max)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return mqerr.Errorf(mqerr.KindIllegalLiteTopic, "lite topic name %q has characters outside [a-zA-Z0-9_.:-]", name)
		}
	}
	return nil
}
