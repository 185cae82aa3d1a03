package broker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/delay"
	"github.com/mqgate/mqgate/broker/longpoll"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
)

// Classic is the part of the broker that only the classic remoting
// protocol needs: its producers send ready-made records (every property
// kept), its consumers pull raw records by queue offset and hand
// commit-log positions back (send-back, view by id, END_TRANSACTION), and
// its delays are levels. It works on the same store, topics, groups,
// offsets, transactions, delay service and dead-letter topics as the gRPC
// side, so a message sent on one protocol is consumed on the other. It
// runs nothing of its own: the broker's services do the background work.
type Classic struct {
	b   *Broker
	clk clock.Clock
	rr  sync.Map
}

// Classic returns the classic protocol's view of b.
func (b *Broker) Classic() *Classic { return &Classic{b: b, clk: b.cfg.Clock} }

// Broker returns the facade Classic works on.
func (c *Classic) Broker() *Broker { return c.b }

// ---- topics and groups -------------------------------------------------

// EnsureGroup returns a consumer group, creating it with defaults if it
// does not exist (classic consumers never create their groups).
func (c *Classic) EnsureGroup(ctx context.Context, name string) (model.Group, error) {
	return c.b.s().meta.EnsureGroup(ctx, name)
}

// EnsureRetry returns %RETRY%<group>, creating the group and the topic
// (one queue) if needed.
func (c *Classic) EnsureRetry(ctx context.Context, group string) (model.Topic, error) {
	if _, err := c.EnsureGroup(ctx, group); err != nil {
		return model.Topic{}, err
	}
	return c.b.s().meta.EnsureRetry(ctx, group)
}

// RouteTopic resolves a topic a classic client asks about: %RETRY%<group>
// is created on demand, %DLQ%<group> exists once its group does, other
// topics are created only when auto-create is on.
func (c *Classic) RouteTopic(ctx context.Context, name string) (model.Topic, error) {
	return c.topic(ctx, name, c.b.s().meta.Topic)
}

// ExistingTopic resolves a topic without creating user topics (retry
// topics are still created on demand).
func (c *Classic) ExistingTopic(ctx context.Context, name string) (model.Topic, error) {
	return c.topic(ctx, name, c.b.s().meta.GetTopic)
}

// topic resolves name: %RETRY%<group> by EnsureRetry, any other by get.
func (c *Classic) topic(ctx context.Context, name string, get func(context.Context, string) (model.Topic, error)) (model.Topic, error) {
	if err := metadata.ValidateTopicName(name); err != nil {
		return model.Topic{}, err
	}
	if g, ok := strings.CutPrefix(name, metadata.RetryPrefix); ok {
		return c.EnsureRetry(ctx, g)
	}
	return get(ctx, name)
}

// notLite refuses a LITE topic: its lite topics exist for v2 (gRPC)
// clients only, so classic sends, pulls and POPs of it answer this.
func notLite(t model.Topic) error {
	if t.Type == model.TopicLite {
		return mqerr.Errorf(mqerr.KindUnsupported, "topic %q is a LITE topic: lite topics are sent to and consumed over the RocketMQ 5 gRPC API (LitePushConsumer, LiteSimpleConsumer), not the classic protocol", t.Name)
	}
	return nil
}

// CheckNotLite answers a classic POP of a LITE topic with the error
// sends and pulls get.
func (c *Classic) CheckNotLite(ctx context.Context, topic string) error {
	t, err := c.b.s().meta.GetTopic(ctx, topic)
	if err != nil {
		return nil // the POP answers what is wrong with the topic
	}
	return notLite(t)
}

// PutTopic creates or updates a topic (UPDATE_AND_CREATE_TOPIC); it
// reports whether the topic was created.
func (c *Classic) PutTopic(ctx context.Context, t model.Topic) (model.Topic, bool, error) {
	return c.b.s().meta.PutTopic(ctx, t)
}

// PutGroup creates or updates a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).
func (c *Classic) PutGroup(ctx context.Context, g model.Group) (model.Group, error) {
	return c.b.s().meta.PutGroup(ctx, g)
}

// AutoCreate reports whether unknown topics are created on first use.
func (c *Classic) AutoCreate() bool { return c.b.cfg.AutoCreate }

// ---- sending ------------------------------------------------------------

// ClassicSend is one classic send: records for one topic and queue.
type ClassicSend struct {
	Topic string
	// QueueID < 0 lets the broker pick a queue.
	QueueID int32
	// Records carry their properties as the producer sent them; the edge
	// guarantees a UNIQ_KEY on each. Topic and QueueID are set here.
	Records  []*message.Message
	Producer model.Producer
	// ReconsumeTimes and MaxReconsumeTimes (< 0: the group's) re-route a
	// resend to %RETRY%<group> that exhausted its attempts to %DLQ%<group>.
	ReconsumeTimes    int32
	MaxReconsumeTimes int32
}

// ClassicSent is where the records went.
type ClassicSent struct {
	QueueID int32
	// Entries are the appended records in order (for delayed and half
	// messages: the staged record).
	Entries []storage.AppendEntry
	// TransactionID is set for a half message.
	TransactionID string
	// FlushTimeout: stored, not yet durable.
	FlushTimeout bool
}

// SendRecords stores a classic send. Message-type attributes of the
// topic are not enforced (upstream brokers do not enforce them for
// remoting producers either).
func (c *Classic) SendRecords(ctx context.Context, req ClassicSend) (out ClassicSent, err error) {
	defer func() { c.b.obs.sentClassic(req.Topic, req.Records, err) }()
	return c.sendRecords(ctx, req)
}

func (c *Classic) sendRecords(ctx context.Context, req ClassicSend) (ClassicSent, error) {
	if len(req.Records) == 0 {
		return ClassicSent{}, mqerr.Errorf(mqerr.KindMessageCorrupted, "no message to send")
	}
	t, err := c.RouteTopic(ctx, req.Topic)
	if err != nil {
		return ClassicSent{}, err
	}
	if err := notLite(t); err != nil {
		return ClassicSent{}, err
	}
	if g, ok := strings.CutPrefix(t.Name, metadata.RetryPrefix); ok {
		grp, err := c.EnsureGroup(ctx, g)
		if err != nil {
			return ClassicSent{}, err
		}
		maxRe := req.MaxReconsumeTimes
		if maxRe < 0 {
			maxRe = grp.MaxDeliveryAttempts - 1
		}
		if req.ReconsumeTimes > maxRe {
			if t, err = c.b.s().meta.EnsureDLQ(ctx, g); err != nil {
				return ClassicSent{}, err
			}
			req.QueueID = 0
		}
	}
	if !t.Perm.Writable() {
		return ClassicSent{}, mqerr.Errorf(mqerr.KindForbidden, "topic %q is not writable", t.Name)
	}
	q := req.QueueID
	switch {
	case q >= t.Queues:
		return ClassicSent{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q has queues 0..%d, not %d", t.Name, t.Queues-1, q)
	case q < 0:
		q, _ = produce.PickQueue(t, "", &c.rr, c.b.cfg.Placement)
	}
	now := c.clk.Now()
	limits := c.b.s().prod.Limits()
	lenient := t
	lenient.Type = model.TopicMixed
	var due time.Time
	var recovery time.Duration
	transactional := false
	for i, r := range req.Records {
		d := record.FromRecord(r)
		if err := produce.Validate(&d.Message, lenient, now, limits); err != nil {
			return ClassicSent{}, err
		}
		if r.BornTime == 0 {
			r.BornTime = now.UnixMilli()
		}
		if r.BornHost == "" {
			r.BornHost = req.Producer.Host
		}
		r.Del(record.PropDueMS)
		tx := d.Transactional
		at, err := deliveryTime(r, now, limits.MaxDelay)
		if err != nil {
			return ClassicSent{}, err
		}
		if i == 0 {
			transactional, due, recovery = tx, at, d.TxRecovery
		} else if tx != transactional || !at.Equal(due) {
			return ClassicSent{}, mqerr.Errorf(mqerr.KindMessageCorrupted, "a batch must not mix transactional, delayed and plain messages")
		}
	}
	// Below the disk reserve, sends are refused (send-backs are not: a
	// classic consumer takes any answer to one as done).
	if err := produce.CheckSpace(c.b.store); err != nil {
		return ClassicSent{}, err
	}
	out := ClassicSent{QueueID: q}
	switch {
	case transactional:
		if len(req.Records) != 1 {
			return ClassicSent{}, mqerr.Errorf(mqerr.KindMessageCorrupted, "a transactional message cannot be sent in a batch")
		}
		h, err := c.b.s().txn.StageRecord(ctx, t, q, req.Records[0], recovery)
		if err != nil {
			return ClassicSent{}, err
		}
		out.Entries, out.TransactionID, out.FlushTimeout = []storage.AppendEntry{h.Entry}, h.TransactionID, h.FlushTimeout
		return out, nil
	case !due.IsZero() && due.After(now):
		for _, r := range req.Records {
			r.Set(record.PropDeliverMS, strconv.FormatInt(due.UnixMilli(), 10))
			e, err := c.b.s().delay.StageRecord(ctx, r, t.Name, q, due)
			if err != nil && mqerr.KindOf(err) != mqerr.KindFlushTimeout {
				return ClassicSent{}, err
			}
			out.FlushTimeout = out.FlushTimeout || err != nil
			out.Entries = append(out.Entries, e)
		}
		return out, nil
	}
	for _, r := range req.Records {
		r.Topic, r.QueueID = t.Name, q
		r.Del(record.PropDelayLevel)
	}
	res, err := c.b.w.sends.Append(ctx, req.Records...)
	if err != nil {
		return ClassicSent{}, produce.AppendError(err)
	}
	out.Entries = res.Entries
	out.FlushTimeout = res.Status == storage.StatusFlushTimeout
	return out, nil
}

// deliveryTime reads the delay properties of a classic record: DELAY
// (level 1..18, clamped; it wins over the timer properties, which are then
// removed), TIMER_DELIVER_MS (absolute ms), TIMER_DELAY_SEC and
// TIMER_DELAY_MS (relative). Zero means deliver now.
func deliveryTime(r *message.Message, now time.Time, maxDelay time.Duration) (time.Time, error) {
	var at time.Time
	if v, ok := r.Get(record.PropDelayLevel); ok {
		if lvl, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && lvl > 0 {
			r.Del(record.PropDeliverMS)
			r.Del("TIMER_DELAY_SEC")
			r.Del("TIMER_DELAY_MS")
			return now.Add(delay.LevelDelay(lvl)), nil
		}
		r.Del(record.PropDelayLevel)
	}
	parse := func(key string) (int64, bool, error) {
		v, ok := r.Get(key)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, false, mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "property %s=%q is not a number", key, v)
		}
		return n, true, nil
	}
	if ms, ok, err := parse(record.PropDeliverMS); err != nil {
		return at, err
	} else if ok {
		at = time.UnixMilli(ms)
	} else if s, ok, err := parse("TIMER_DELAY_SEC"); err != nil {
		return at, err
	} else if ok {
		at = now.Add(time.Duration(min(max(s, 0), int64(maxDelay/time.Second)+1)) * time.Second)
	} else if ms, ok, err := parse("TIMER_DELAY_MS"); err != nil {
		return at, err
	} else if ok {
		at = now.Add(time.Duration(min(max(ms, 0), int64(maxDelay/time.Millisecond)+1)) * time.Millisecond)
	}
	r.Del("TIMER_DELAY_SEC")
	r.Del("TIMER_DELAY_MS")
	if !at.IsZero() && at.Sub(now) > maxDelay {
		return at, mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "delivery time %s is more than %s ahead (the maximum delay)",
			at.UTC().Format(time.RFC3339), maxDelay)
	}
	if !at.After(now) {
		r.Del(record.PropDeliverMS)
		return time.Time{}, nil
	}
	return at, nil
}

// ---- pulling ------------------------------------------------------------

// PullStatus is the outcome of a classic pull.
type PullStatus int8

const (
	// PullFound: records returned.
	PullFound PullStatus = iota
	// PullNoNew: nothing at the offset yet (PULL_NOT_FOUND).
	PullNoNew
	// PullNoMatch: a range was scanned, nothing matched the filter
	// (PULL_RETRY_IMMEDIATELY).
	PullNoMatch
	// PullMoved: the offset is outside the queue (PULL_OFFSET_MOVED).
	PullMoved
)

// ClassicPull is a classic pull's answer.
type ClassicPull struct {
	Status   PullStatus
	Records  []*message.Message
	Next     int64
	Min, Max int64
}

// ClassicPullRequest is one classic pull.
type ClassicPullRequest struct {
	// Group is the pulling consumer group (for the delivery counters;
	// "" counts nothing).
	Group    string
	Topic    model.Topic
	QueueID  int32
	Offset   int64
	Max      int
	MaxBytes int
	Filter   model.Filter
	// Wait long-polls when nothing is at the offset yet.
	Wait time.Duration
}

// maxPullScan bounds entries inspected per pull when a filter skips them.
const maxPullScan = 1024

// Pull reads raw records of a queue from an offset for a classic
// consumer. The caller resolved the topic and checked its permission.
func (c *Classic) Pull(ctx context.Context, req ClassicPullRequest) (res ClassicPull, err error) {
	defer func() { c.b.obs.pulled(req.Group, req.Topic.Name, res.Records) }()
	return c.pull(ctx, req)
}

func (c *Classic) pull(ctx context.Context, req ClassicPullRequest) (ClassicPull, error) {
	t := req.Topic
	if err := notLite(t); err != nil {
		return ClassicPull{}, err
	}
	if req.QueueID < 0 || req.QueueID >= t.Queues {
		return ClassicPull{}, mqerr.Errorf(mqerr.KindBadRequest, "topic %q has queues 0..%d, not %d", t.Name, t.Queues-1, req.QueueID)
	}
	if err := c.b.w.readCurrent(ctx); err != nil {
		return ClassicPull{}, err
	}
	if !t.Perm.Readable() {
		return ClassicPull{}, mqerr.Errorf(mqerr.KindForbidden, "topic %q is not readable", t.Name)
	}
	req.Max = max(1, min(req.Max, 1024))
	if req.MaxBytes <= 0 {
		req.MaxBytes = 4 << 20
	}
	var until time.Time
	if req.Wait > 0 {
		until = c.clk.Now().Add(req.Wait)
	}
	hashes := map[int64]struct{}{}
	for tag := range req.Filter.Tags {
		hashes[message.TagHash(tag)] = struct{}{}
	}
	for {
		var ch <-chan struct{}
		release := func() {}
		if req.Wait > 0 {
			w, rel, err := c.b.s().hub.Watch(longpoll.QueueKey(t.Name, req.QueueID))
			if err != nil {
				return ClassicPull{}, err
			}
			ch, release = w, rel
		}
		res, err := c.read(req, hashes)
		if err != nil || res.Status != PullNoNew || !c.clk.Now().Before(until) {
			release()
			return res, err
		}
		tm := clock.At(c.clk, until)
		select {
		case <-ch:
		case <-tm.C():
		case <-ctx.Done():
		case <-c.b.s().hub.Closed():
		}
		tm.Stop()
		release()
		if ctx.Err() != nil || isDone(c.b.s().hub.Closed()) {
			return c.read(req, hashes)
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *Classic) read(req ClassicPullRequest, hashes map[int64]struct{}) (ClassicPull, error) {
	t, q, off := req.Topic, req.QueueID, req.Offset
	lo, hi := c.b.store.QueueRange(t.Name, q)
	res := ClassicPull{Next: off, Min: lo, Max: hi}
	switch {
	case hi == 0 && off == 0:
		res.Status = PullNoNew
		return res, nil
	case hi == 0:
		res.Status, res.Next = PullMoved, 0
		return res, nil
	case off < lo:
		res.Status, res.Next = PullMoved, lo
		return res, nil
	case off == hi:
		res.Status = PullNoNew
		return res, nil
	case off > hi:
		res.Status, res.Next = PullMoved, hi
		return res, nil
	}
	bytes, scanned := 0, 0
	for len(res.Records) < req.Max && scanned < maxPullScan {
		ents, err := c.b.store.ReadQueue(t.Name, q, res.Next, min(req.Max*4, maxPullScan-scanned))
		if errors.Is(err, storage.ErrOffsetMoved) {
			lo, _ := c.b.store.QueueRange(t.Name, q)
			if len(res.Records) > 0 {
				break
			}
			res.Status, res.Next, res.Min = PullMoved, lo, lo
			return res, nil
		}
		if err != nil {
			return res, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the queue")
		}
		if len(ents) == 0 {
			break
		}
		full := false
		for _, e := range ents {
			if len(res.Records) >= req.Max || (len(res.Records) > 0 && bytes+int(e.Size) > req.MaxBytes) {
				full = true
				break
			}
			scanned++
			res.Next = e.QueueOffset + 1
			if req.Filter.ByTag() {
				if _, ok := hashes[e.TagHash]; !ok {
					continue
				}
			}
			m, err := c.b.store.ReadMessage(e.PhysOffset, e.Size)
			if err != nil {
				if errors.Is(err, storage.ErrOffsetMoved) && len(res.Records) == 0 {
					lo, _ := c.b.store.QueueRange(t.Name, q)
					res.Status, res.Next, res.Min = PullMoved, max(lo, res.Next), lo
					return res, nil
				}
				return res, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading a message")
			}
			if !req.Filter.Match(m.Tag(), m) {
				continue
			}
			m.QueueOffset = e.QueueOffset
			res.Records = append(res.Records, m)
			bytes += int(e.Size)
		}
		if full {
			break
		}
	}
	switch {
	case len(res.Records) > 0:
		res.Status = PullFound
	case res.Next == off:
		res.Status = PullNoNew
	default:
		res.Status = PullNoMatch
	}
	return res, nil
}

// ---- offsets -------------------------------------------------------------

// QueueRange returns a queue's min and next offsets (0, 0 when unknown).
func (c *Classic) QueueRange(topic string, queue int32) (min, max int64) {
	return c.b.store.QueueRange(topic, queue)
}

// OffsetForTime returns the first offset stored at or after unixMs (the
// max offset if none).
func (c *Classic) OffsetForTime(topic string, queue int32, unixMs int64) (int64, error) {
	off, err := c.b.store.OffsetForTime(topic, queue, unixMs)
	if err != nil {
		return 0, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "searching by time")
	}
	return off, nil
}

// StoreTimeAt returns the store time (unix ms) of the record at a queue
// offset.
func (c *Classic) StoreTimeAt(topic string, queue int32, offset int64) (int64, error) {
	m, err := c.RecordAt(topic, queue, offset)
	if err != nil {
		return 0, err
	}
	return m.StoreTime, nil
}

// RecordAt reads the record at a queue offset.
func (c *Classic) RecordAt(topic string, queue int32, offset int64) (*message.Message, error) {
	ms, _, err := c.b.store.ReadMessages(topic, queue, offset, 1)
	if err != nil && !errors.Is(err, storage.ErrOffsetMoved) {
		return nil, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the queue")
	}
	if len(ms) == 0 {
		return nil, mqerr.Errorf(mqerr.KindMessageNotFound, "no message at offset %d of %s/%d", offset, topic, queue)
	}
	return ms[0], nil
}

// CommittedOffset returns a group's committed offset for a queue: the
// same value gRPC's GetOffset reads.
func (c *Classic) CommittedOffset(group, topic string, queue int32) (int64, bool) {
	return c.b.store.Meta().Offset(metastore.OffsetKey{Group: group, Topic: topic, QueueID: queue})
}

// CommitOffset stores a group's offset for a queue (classic consumers may
// commit any offset; a stale one is corrected by the next pull). For a
// while after a reset of the group's offsets in the topic, a commit past
// a queue's new offset is not recorded (resetFenceTime).
func (c *Classic) CommitOffset(group, topic string, queue int32, offset int64) {
	if c.b.fencedCommit(group, topic, queue, offset) {
		c.b.log.Debug("classic offset commit held back after a reset", "group", group, "topic", topic, "queue", queue, "offset", offset)
		return
	}
	if _, err := c.b.w.offsets.CommitOffset(metastore.OffsetKey{Group: group, Topic: topic, QueueID: queue}, offset); err != nil {
		// Classic commits are advisory (pulls carry them and get no
		// answer about them): the next commit repeats the position.
		c.b.log.Warn("classic offset commit not recorded", "group", group, "topic", topic, "queue", queue, "offset", offset, "err", err)
	}
}

// ---- by position, key or id -----------------------------------------------

// ReadAt returns the record at a commit-log position (a classic
// PHYSICALOFFSET). Nothing there ⇒ KindMessageNotFound.
func (c *Classic) ReadAt(phys int64) (*message.Message, error) {
	m, err := c.b.store.ReadMessageAt(phys)
	switch {
	case err == nil:
		return m, nil
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrOffsetMoved), errors.Is(err, storage.ErrInvalid):
		return nil, mqerr.Wrap(mqerr.KindMessageNotFound, err, "no message at commit-log offset "+strconv.FormatInt(phys, 10))
	case errors.Is(err, storage.ErrClosed):
		return nil, mqerr.Wrap(mqerr.KindUnavailable, err, "the store is closed")
	}
	return nil, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading a message")
}

// LookupByID returns messages of topic whose UNIQ_KEY is id.
func (c *Classic) LookupByID(topic, id string, max int) ([]*message.Message, error) {
	ms, err := c.b.store.LookupByID(topic, id, max)
	if err != nil {
		return ms, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "searching the index")
	}
	return ms, nil
}

// LookupByKey returns messages of topic with key among their KEYS stored
// in [beginMs, endMs].
func (c *Classic) LookupByKey(topic, key string, beginMs, endMs int64, max int) ([]*message.Message, error) {
	ms, err := c.b.store.LookupByKey(topic, key, beginMs, endMs, max)
	if err != nil {
		return ms, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "searching the index")
	}
	return ms, nil
}

// LogEnd is the commit-log position written so far.
func (c *Classic) LogEnd() int64 { _, w := c.b.store.LogRange(); return w }

// ---- send-back -------------------------------------------------------------

// SendBack is CONSUMER_SEND_MSG_BACK: a classic consumer failed to consume
// the record at Phys.
type SendBack struct {
	Phys  int64
	Group string
	// DelayLevel: 0 lets the broker choose (3 + reconsume times), < 0
	// dead-letters at once, > 0 is that level.
	DelayLevel int
	// MaxReconsumeTimes < 0 means the group's (max delivery attempts − 1).
	MaxReconsumeTimes int32
	OriginMsgID       string
}

// GroupConsumes reports whether the broker knows group to consume topic:
// the group's own retry or dead-letter topic, a topic it committed an
// offset in, or one it receives from by POP. The classic listener adds
// what the group's connected clients subscribe to and pull.
func (c *Classic) GroupConsumes(group, topic string) bool {
	if topic == metadata.RetryPrefix+group || topic == metadata.DLQPrefix+group {
		return true
	}
	return slices.Contains(c.b.consumedTopics(group), topic)
}

// SendBackResult says where the copy went.
type SendBackResult struct {
	Topic          string
	DeadLettered   bool
	ReconsumeTimes int32
	Due            time.Time
}

// SendBack re-publishes a failed message: to %RETRY%<group> after the
// level's delay with reconsume times + 1, or to %DLQ%<group> once the
// attempts are used up. It creates the group, the
// retry and the dead-letter topics as needed: a classic consumer ignores
// the answer, so a refusal would lose the redelivery.
func (c *Classic) SendBack(ctx context.Context, sb SendBack) (SendBackResult, error) {
	g, err := c.EnsureGroup(ctx, sb.Group)
	if err != nil {
		return SendBackResult{}, err
	}
	rec, err := c.ReadAt(sb.Phys)
	if err != nil {
		return SendBackResult{}, err
	}
	if metadata.IsSystemTopic(rec.Topic) {
		return SendBackResult{}, mqerr.Errorf(mqerr.KindMessageNotFound, "no consumable message at commit-log offset %d", sb.Phys)
	}
	cp := *rec
	cp.Properties = append([]message.Property(nil), rec.Properties...)
	cp.Flags &^= record.FlagTransactionPrepared
	if _, ok := cp.Get(record.PropRetryTopic); !ok {
		cp.Set(record.PropRetryTopic, rec.Topic)
	}
	if _, ok := cp.Get(record.PropOriginMessageID); !ok {
		origin := sb.OriginMsgID
		if origin == "" {
			origin = rec.UniqKey()
		}
		if origin != "" {
			cp.Set(record.PropOriginMessageID, origin)
		}
	}
	old := int32(0)
	if v, ok := cp.Get(record.PropReconsumeTime); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
			old = int32(n)
		}
	}
	for _, k := range []string{record.PropRealTopic, record.PropRealQueue, record.PropDelayLevel, record.PropDeliverMS, record.PropDueMS} {
		cp.Del(k)
	}
	cp.Set(record.PropReconsumeTime, strconv.Itoa(int(old+1)))
	maxRe := sb.MaxReconsumeTimes
	if maxRe < 0 {
		maxRe = g.MaxDeliveryAttempts - 1
	}
	if old >= maxRe || sb.DelayLevel < 0 {
		dlq, err := c.b.s().meta.EnsureDLQ(ctx, g.Name)
		if err != nil {
			return SendBackResult{}, err
		}
		origin, _ := cp.Get(record.PropRetryTopic)
		if _, ok := cp.Get(record.PropDLQOriginTopic); !ok {
			cp.Set(record.PropDLQOriginTopic, origin)
			if id := cp.UniqKey(); id != "" {
				cp.Set(record.PropDLQOriginID, id)
			}
		}
		cp.Topic, cp.QueueID = dlq.Name, 0
		if _, err := c.b.w.sends.Append(ctx, &cp); err != nil {
			return SendBackResult{}, produce.AppendError(err)
		}
		return SendBackResult{Topic: dlq.Name, DeadLettered: true, ReconsumeTimes: old + 1}, nil
	}
	retry, err := c.b.s().meta.EnsureRetry(ctx, g.Name)
	if err != nil {
		return SendBackResult{}, err
	}
	level := sb.DelayLevel
	if level == 0 {
		level = 3 + int(old)
	}
	due := c.clk.Now().Add(delay.LevelDelay(level))
	if _, err := c.b.s().delay.StageRecord(ctx, &cp, retry.Name, 0, due); err != nil && mqerr.KindOf(err) != mqerr.KindFlushTimeout {
		return SendBackResult{}, err
	}
	return SendBackResult{Topic: retry.Name, ReconsumeTimes: old + 1, Due: due}, nil
}

// ---- transactions ------------------------------------------------------------

// ClassicEnd is a classic END_TRANSACTION.
type ClassicEnd struct {
	// CommitLogOffset is the half message's position; TranStateOffset
	// its offset in the half topic (-1: unknown).
	CommitLogOffset, TranStateOffset int64
	ProducerGroup                    string
	// MsgID is the message's UNIQ_KEY ("" skips the check).
	MsgID      string
	Resolution txn.Resolution
}

// EndTransaction resolves a half message named by its commit-log position.
func (c *Classic) EndTransaction(ctx context.Context, e ClassicEnd) error {
	rec, err := c.ReadAt(e.CommitLogOffset)
	if err != nil {
		return mqerr.Wrap(mqerr.KindMessageNotFound, err, "no half message found")
	}
	if rec.Topic != txn.HalfTopic {
		return mqerr.Errorf(mqerr.KindMessageNotFound, "commit-log offset %d is not a half message", e.CommitLogOffset)
	}
	if e.TranStateOffset >= 0 && rec.QueueOffset != e.TranStateOffset {
		return mqerr.Errorf(mqerr.KindBadRequest, "tranStateTableOffset %d does not match the half message at %d (offset %d)",
			e.TranStateOffset, e.CommitLogOffset, rec.QueueOffset)
	}
	if pg, ok := rec.Get(record.PropProducerGroup); ok && e.ProducerGroup != "" && pg != e.ProducerGroup {
		return mqerr.Errorf(mqerr.KindForbidden, "the half message belongs to producer group %q, not %q", pg, e.ProducerGroup)
	}
	topic, _ := rec.Get(record.PropRealTopic)
	return c.b.EndTransaction(ctx, topic, e.MsgID, c.b.s().txn.TransactionIDFor(rec.QueueOffset, topic), e.Resolution)
}

// HalfRecord returns the pending half message a check-back is about.
func (c *Classic) HalfRecord(topic, transactionID string) (*message.Message, error) {
	return c.b.s().txn.HalfRecord(topic, transactionID)
}

// Parked is the number of receives and pulls waiting in long polls.
func (c *Classic) Parked() int64 { return c.b.s().hub.Parked() }
