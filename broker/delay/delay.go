package delay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// System topics of the delay service.
const (
	StageTopic = "rmq_sys_delay"
	OpsTopic   = "rmq_sys_delay_ops"
)

// Topics resolves a destination topic at publish time.
type Topics interface {
	GetTopic(ctx context.Context, name string) (model.Topic, error)
}

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// Placement is the queues a due message may go to (see
	// produce.PickQueue); its group marks the recall handles minted
	// (deferred.GroupPrefix).
	Placement placement.Of
}

// Service is the delay service.
type Service struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.Clock
	stage  *deferred.Stage
	topics Topics
	token  *deferred.Token
	blobs  deferred.Blobs
	rr     sync.Map
	kick   chan struct{}
	group  *lifecycle.Group
}

// Open recovers pending delayed messages and starts the publisher.
func Open(ctx context.Context, cfg Config, st deferred.Store, blobs deferred.Blobs, topics Topics) (*Service, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	stage, err := deferred.Open(ctx, "delay", StageTopic, OpsTopic, st, blobs, cfg.Logger, dueOf)
	if err != nil {
		return nil, err
	}
	tok, err := deferred.LoadToken(blobs, deferred.RecallKeyBlob, deferred.GroupPrefix("d1.", cfg.Placement.Group))
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger, clk: cfg.Clock, stage: stage, topics: topics, token: tok, blobs: blobs, kick: make(chan struct{}, 1)}
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("delay-publisher", s.loop); err != nil {
		return nil, err
	}
	return s, nil
}

// dueOf is a staged record's due time: PropDueMS (StageRecord), else its
// delivery time.
func dueOf(m *message.Message) int64 {
	v, ok := m.Get(record.PropDueMS)
	if !ok {
		v, _ = m.Get(record.PropDeliverMS)
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// Close stops the publisher and records the low-water mark.
func (s *Service) Close(ctx context.Context) error {
	err := s.group.Shutdown(ctx)
	return errors.Join(err, s.stage.SaveLowWater(s.clk.Now().UnixMilli()))
}

// Pending is the number of delayed messages waiting.
func (s *Service) Pending() int { return s.stage.Len() }

// Stage stores a delayed message; it becomes visible at m.DeliveryTime.
func (s *Service) Stage(ctx context.Context, topic model.Topic, m *model.Message, p model.Producer) (model.SendResult, error) {
	rec := record.ToRecord(m, StageTopic, 0)
	due := m.DeliveryTime.UnixMilli()
	off, res, err := s.stage.Put(ctx, rec, due)
	if err != nil {
		return model.SendResult{}, produce.AppendError(err)
	}
	s.wake()
	r := model.SendResult{MessageID: m.ID, Offset: off, RecallHandle: s.token.Encode(off, due, topic.Name)}
	if res.Status == storage.StatusFlushTimeout {
		r.Err = mqerr.Errorf(mqerr.KindFlushTimeout, "stored, but the disk flush did not finish in time; the message is not yet durable")
	}
	return r, nil
}

// Recall cancels a pending delayed message and returns its message id.
func (s *Service) Recall(ctx context.Context, topic model.Topic, handle string) (string, error) {
	if topic.Type != model.TopicDelay && topic.Type != model.TopicMixed {
		return "", mqerr.Errorf(mqerr.KindMessageTypeConflict, "topic %q is a %s topic; only delayed messages can be recalled", topic.Name, topic.Type)
	}
	off, _, err := s.token.Decode(handle, topic.Name)
	if err != nil {
		return "", mqerr.Errorf(mqerr.KindBadRequest, "recall handle is %v", err)
	}
	_, m, err := s.stage.Get(off)
	if err != nil {
		return "", mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the delayed message")
	}
	if m == nil {
		return "", s.notPending(off)
	}
	id := m.UniqKey()
	if _, err := s.stage.Resolve(ctx, off, deferred.OpRecalled); err != nil {
		if errors.Is(err, deferred.ErrNotPending) {
			return "", s.notPending(off)
		}
		return "", produce.AppendError(err)
	}
	return id, nil
}

func (s *Service) notPending(off int64) error {
	if r, ok := s.stage.Outcome(off); ok {
		return mqerr.Errorf(mqerr.KindMessageNotFound, "the delayed message was already %s", r.Op)
	}
	return mqerr.Errorf(mqerr.KindMessageNotFound, "no pending delayed message for this recall handle (already delivered or unknown)")
}

// wake tells the publisher a record was staged (it may be idle, or timed
// for a later one).
func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Service) loop(ctx context.Context) {
	s.stage.Run(ctx, s.clk, s.kick, 256, func(ctx context.Context, p deferred.Pending, now int64) {
		if err := s.publish(ctx, p); err != nil {
			s.log.Warn("delay: publishing a due message failed; retrying", "offset", p.Offset, "err", err)
		}
	})
}

func (s *Service) publish(ctx context.Context, p deferred.Pending) error {
	_, rec, err := s.stage.Get(p.Offset)
	if err != nil || rec == nil {
		return err
	}
	// REAL_TOPIC names the destination. (record.FromRecord would present
	// RETRY_TOPIC instead: a classic redelivery carries both.)
	name, _ := rec.Get(record.PropRealTopic)
	topic, err := s.topics.GetTopic(ctx, name)
	if k := mqerr.KindOf(err); err != nil && (k == mqerr.KindTopicNotFound || k == mqerr.KindIllegalTopic) {
		s.log.Warn("delay: destination topic is gone; dropping the message", "topic", name, "message_id", rec.UniqKey())
		_, err = s.stage.Resolve(ctx, p.Offset, deferred.OpFired)
		return err
	}
	if err != nil {
		return err
	}
	out := *rec
	out.Properties = append([]message.Property(nil), rec.Properties...)
	out.Topic = topic.Name
	if out.QueueID, err = s.queueOf(topic, rec); err != nil {
		return err
	}
	for _, k := range []string{record.PropRealTopic, record.PropRealQueue, record.PropDelayLevel, record.PropDueMS} {
		out.Del(k)
	}
	if _, err := s.stage.Resolve(ctx, p.Offset, deferred.OpFired, &out); err != nil && !errors.Is(err, deferred.ErrNotPending) {
		return fmt.Errorf("publishing to %s: %w", topic.Name, err)
	}
	return nil
}

// queueOf is the queue a due record goes to: the one it names (REAL_QID,
// classic records) while the topic still has it, else one picked as for a
// send (by message group) among the queues this service's data group
// holds.
func (s *Service) queueOf(t model.Topic, rec *message.Message) (int32, error) {
	p := s.cfg.Placement
	if v, ok := rec.Get(record.PropRealQueue); ok {
		if q, err := strconv.Atoi(v); err == nil && q >= 0 && q < int(t.Queues) && p.Holds(t.Name, t.Type == model.TopicLite, int32(q)) {
			return int32(q), nil
		}
	}
	group, _ := rec.Get(record.PropShardingKey)
	q, ok := produce.PickQueue(t, group, &s.rr, p)
	if !ok {
		return 0, fmt.Errorf("no queue of topic %q (%d queues) is in this data group (%d)", t.Name, t.Queues, p.Group)
	}
	return q, nil
}

// ReloadKeys takes the token key ring from the blobs again (after a
// cluster replicated a new one).
func (s *Service) ReloadKeys() error {
	r, err := deferred.LoadRing(s.blobs, deferred.RecallKeyBlob, false)
	if err != nil {
		return err
	}
	s.token.SetRing(r)
	return nil
}
