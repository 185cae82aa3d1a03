package produce

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Appender is the store's append capability.
type Appender interface {
	Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error)
}

// Special routes a message that does not go straight to its topic's
// queues (delayed, transactional); nil handlers reject such messages.
type Special interface {
	// Stage stores m for later delivery and returns its result.
	Stage(ctx context.Context, topic model.Topic, m *model.Message, p model.Producer) (model.SendResult, error)
}

// Topics resolves a send's destination (creating it when auto-create is
// on).
type Topics interface {
	Topic(ctx context.Context, name string) (model.Topic, error)
}

// LiteIndex keeps the lite topics of LITE topics: Reserve before a send
// creates one (within the parent's quota), Appended after it is stored.
type LiteIndex interface {
	Reserve(t model.Topic, name string) error
	Appended(t model.Topic, q int32, names []string, ents []storage.AppendEntry)
}

// Space says whether the store has room for new messages
// (storage.Store.CheckSpace: an error wrapping storage.ErrDiskFull while
// less than the disk reserve is free).
type Space interface {
	CheckSpace() error
}

// Config configures the service.
type Config struct {
	Limits Limits
	Clock  clock.Clock
	// Delay and Txn take delayed and transactional messages.
	Delay Special
	Txn   Special
	// Lite indexes sends to LITE topics; nil rejects them.
	Lite LiteIndex
	// LiteAppender stores the sends to LITE topics (nil: the service's
	// appender). Lite indexes them in memory on the outcome, so in a
	// replica group it is one that waits for the outcome past the commit
	// timeout (broker's settled store).
	LiteAppender Appender
	// Space, when set, is asked before anything of a send is stored: a
	// store below its disk reserve refuses the whole send (KindDiskFull).
	Space Space
	// Placement is the queues this service stores into: the zero value
	// (one group) every queue of a topic; a data group of a cluster with
	// several, the queues it holds (broker/placement). A send is stored in
	// one of them; a send whose message group or lite topic names a queue
	// of another group is refused (KindReplicationLost: the listener
	// routes such a send to the group holding the queue).
	Placement placement.Of
}

// Service stores sent messages.
type Service struct {
	cfg    Config
	store  Appender
	topics Topics
	rr     sync.Map // topic → *atomic.Uint32
}

// New returns the service.
func New(cfg Config, st Appender, topics Topics) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	return &Service{cfg: cfg, store: st, topics: topics}
}

// Limits returns the effective limits.
func (s *Service) Limits() Limits { return s.cfg.Limits }

// Send validates msgs (all for topic) and stores them, checking in
// upstream's order: the messages first, then the topic
// (unknown, not writable, type mismatch). A validation error rejects the
// whole request; per-message outcomes are in the results.
func (s *Service) Send(ctx context.Context, topicName string, msgs []*model.Message, p model.Producer) ([]model.SendResult, error) {
	if len(msgs) == 0 {
		return nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "no message to send")
	}
	now := s.cfg.Clock.Now()
	for i, m := range msgs {
		if m.Topic != topicName {
			return nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "message %d is for topic %q, not %q: a batch has one topic", i, m.Topic, topicName)
		}
		if err := ValidateMessage(m, now, s.cfg.Limits); err != nil {
			return nil, err
		}
	}
	topic, err := s.topics.Topic(ctx, topicName)
	if err != nil {
		return nil, err
	}
	if !topic.Perm.Writable() {
		return nil, mqerr.Errorf(mqerr.KindForbidden, "topic %q is not writable", topic.Name)
	}
	special := false
	for _, m := range msgs {
		if err := CheckType(m, topic); err != nil {
			return nil, err
		}
		if m.BornTime.IsZero() {
			m.BornTime = now
		}
		if m.BornHost == "" {
			m.BornHost = p.Host
		}
		if m.Transactional || m.DeliveryTime.After(now) {
			special = true
		}
	}
	if err := CheckSpace(s.cfg.Space); err != nil {
		return nil, err
	}
	if special {
		return s.sendSpecial(ctx, topic, msgs, p, now)
	}
	if topic.Type == model.TopicLite {
		return s.appendLite(ctx, topic, msgs)
	}
	return s.appendNormal(ctx, topic, msgs)
}

// appendLite stores LITE messages in the parent queue of their lite topic
// (a batch names one lite topic) and indexes them.
func (s *Service) appendLite(ctx context.Context, topic model.Topic, msgs []*model.Message) ([]model.SendResult, error) {
	if s.cfg.Lite == nil {
		return nil, mqerr.Errorf(mqerr.KindNotImplemented, "lite topics are not served here")
	}
	name := msgs[0].LiteTopic
	for i, m := range msgs[1:] {
		if m.LiteTopic != name {
			return nil, mqerr.Errorf(mqerr.KindIllegalLiteTopic, "message %d is for lite topic %q, not %q: a batch has one lite topic", i+1, m.LiteTopic, name)
		}
	}
	if err := s.cfg.Lite.Reserve(topic, name); err != nil {
		return nil, err
	}
	return s.appendNormal(ctx, topic, msgs)
}

// CheckSpace asks sp (nil: nothing to ask) whether a new message may be
// stored, and classifies a refusal: KindDiskFull, as upstream's broker
// refuses a send when its disk is full. Sends are refused as a whole,
// before anything of them is stored.
func CheckSpace(sp Space) error {
	if sp == nil {
		return nil
	}
	if err := sp.CheckSpace(); err != nil {
		return diskFull(err)
	}
	return nil
}

// diskFull classifies a refusal or a failed append for lack of space.
func diskFull(err error) error {
	return mqerr.Errorf(mqerr.KindDiskFull, "service not available now: the disk is full, new messages are refused until space is freed "+
		"(consumers still receive and acknowledge); nothing was stored (%w)", err)
}

// appendNormal stores validated messages straight into one queue of topic.
func (s *Service) appendNormal(ctx context.Context, topic model.Topic, msgs []*model.Message) ([]model.SendResult, error) {
	q, err := s.pickQueue(topic, msgs[0])
	if err != nil {
		return nil, err
	}
	recs := record.ToRecords(msgs, topic.Name, q)
	store := s.store
	if topic.Type == model.TopicLite && s.cfg.LiteAppender != nil {
		store = s.cfg.LiteAppender
	}
	res, err := store.Append(ctx, recs...)
	if err != nil {
		return nil, AppendError(err)
	}
	if topic.Type == model.TopicLite && s.cfg.Lite != nil {
		names := make([]string, len(msgs))
		for i, m := range msgs {
			names[i] = m.LiteTopic
		}
		s.cfg.Lite.Appended(topic, q, names, res.Entries)
	}
	out := make([]model.SendResult, len(msgs))
	for i, m := range msgs {
		out[i] = model.SendResult{MessageID: m.ID, QueueID: q, Offset: res.Entries[i].QueueOffset}
		if res.Status == storage.StatusFlushTimeout {
			out[i].Err = mqerr.Errorf(mqerr.KindFlushTimeout, "stored, but the disk flush did not finish in time; the message is not yet durable")
		}
	}
	return out, nil
}

func (s *Service) sendSpecial(ctx context.Context, topic model.Topic, msgs []*model.Message, p model.Producer, now time.Time) ([]model.SendResult, error) {
	out := make([]model.SendResult, len(msgs))
	for i, m := range msgs {
		var h Special
		switch {
		case m.Transactional:
			h = s.cfg.Txn
		case m.DeliveryTime.After(now):
			h = s.cfg.Delay
		default:
			r, err := s.appendNormal(ctx, topic, []*model.Message{m})
			if err != nil {
				out[i] = model.SendResult{MessageID: m.ID, Err: err}
			} else {
				out[i] = r[0]
			}
			continue
		}
		if h == nil {
			return nil, mqerr.Errorf(mqerr.KindUnsupported, "%s messages are not supported by this server yet", m.ActualType())
		}
		r, err := h.Stage(ctx, topic, m, p)
		if err != nil {
			if len(msgs) == 1 {
				return nil, err
			}
			r = model.SendResult{MessageID: m.ID, Err: err}
		}
		out[i] = r
	}
	return out, nil
}

// AppendError classifies a store append failure.
func AppendError(err error) error {
	if mqerr.Classified(err) {
		return err // classified already (a replica group's refusal)
	}
	switch {
	case errors.Is(err, storage.ErrClosed):
		return mqerr.Wrap(mqerr.KindUnavailable, err, "the store is closed")
	case errors.Is(err, storage.ErrTooLarge):
		return mqerr.Wrap(mqerr.KindBodyTooLarge, err, "message too large for the store")
	case errors.Is(err, storage.ErrDiskFull),
		errors.Is(err, storage.ErrNotWritable) && errors.Is(err, syscall.ENOSPC):
		return diskFull(err)
	case errors.Is(err, storage.ErrNotWritable):
		return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "the store cannot write (disk full or failing); nothing was stored")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return mqerr.Wrap(mqerr.KindRequestTimeout, err, "the send was cancelled before it was stored")
	}
	return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "storing the message")
}

// pickQueue chooses m's queue: its lite topic's or message group's, which
// this service must hold (Config.Placement), or one it holds, round
// robin.
func (s *Service) pickQueue(t model.Topic, m *model.Message) (int32, error) {
	p := s.cfg.Placement
	lite := t.Type == model.TopicLite
	var q int32
	switch {
	case m.LiteTopic != "":
		q = QueueOfLite(t, m.LiteTopic)
	case m.MessageGroup != "":
		q = HashQueue(t, m.MessageGroup)
	default:
		q, ok := PickQueue(t, "", &s.rr, p)
		if !ok {
			return 0, notHeld(t, p)
		}
		return q, nil
	}
	if !p.Holds(t.Name, lite, q) {
		return 0, mqerr.Errorf(mqerr.KindReplicationLost, "queue %d of topic %q is in data group %d, not this one (%d): retry, the route names the member serving it",
			q, t.Name, p.Layout().GroupOf(t.Name, lite, q), p.Group)
	}
	return q, nil
}

// notHeld is the refusal of a send to a topic none of whose queues p
// holds.
func notHeld(t model.Topic, p placement.Of) error {
	return mqerr.Errorf(mqerr.KindReplicationLost, "no queue of topic %q (%d queues) is in data group %d: retry, the route names the members serving it",
		t.Name, t.Queues, p.Group)
}

// QueueOfLite is the parent queue of lite topic name's messages.
func QueueOfLite(t model.Topic, name string) int32 { return lite.QueueOf(name, t.Queues) }

// HashQueue is the queue a message group's messages go to.
func HashQueue(t model.Topic, messageGroup string) int32 {
	if t.Queues <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(messageGroup))
	return int32(h.Sum32() % uint32(t.Queues))
}

// PickQueue is shared with the delay and transaction services so a
// message lands in the queue a direct send would pick: one of the queues
// p holds (every queue with one group), the message group's (HashQueue)
// when p holds it and otherwise the one of p's that its hash picks, and
// round robin without a message group. ok is false when p holds no queue
// of t.
func PickQueue(t model.Topic, messageGroup string, rr *sync.Map, p placement.Of) (q int32, ok bool) {
	lite := t.Type == model.TopicLite
	n := p.Count(t.Name, lite, t.Queues)
	switch {
	case n <= 0:
		return 0, t.Queues <= 0 && p.All()
	case messageGroup != "":
		if q := HashQueue(t, messageGroup); p.Holds(t.Name, lite, q) {
			return q, true
		}
		h := fnv.New32a()
		h.Write([]byte(messageGroup))
		return p.Nth(t.Name, lite, int32(h.Sum32()%uint32(n))), true
	case n == 1:
		return p.Nth(t.Name, lite, 0), true
	}
	v, ok := rr.Load(t.Name)
	if !ok {
		v, _ = rr.LoadOrStore(t.Name, new(atomic.Uint32))
	}
	return p.Nth(t.Name, lite, int32(v.(*atomic.Uint32).Add(1)%uint32(n))), true
}
