package rawdelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/staged"
	"github.com/mqgate/mqgate/broker/stored"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// System topics of the service.
const (
	StageTopic = "rmq_sys_classic_delay"
	OpsTopic   = "rmq_sys_classic_delay_ops"
)

// PropDue holds a staged record's due time (unix ms) while it waits; it is
// removed on publish.
const PropDue = "__MQG_DUE_MS"

// Levels are upstream's 18 delay levels (messageDelayLevel), level 1 first.
var Levels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// LevelDelay returns the delay of level (clamped to 1..18).
func LevelDelay(level int) time.Duration {
	level = max(1, min(level, len(Levels)))
	return Levels[level-1]
}

// Topics resolves a destination topic at publish time.
type Topics interface {
	GetTopic(ctx context.Context, name string) (model.Topic, error)
}

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
}

// Service is the raw delay service.
type Service struct {
	log    *slog.Logger
	clk    clock.Clock
	stage  *staged.Stage
	topics Topics
	kick   chan struct{}
	group  *lifecycle.Group
}

// Open recovers pending records and starts the publisher.
func Open(ctx context.Context, cfg Config, st staged.Store, blobs staged.Blobs, topics Topics) (*Service, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	stage, err := staged.Open(ctx, "classic-delay", StageTopic, OpsTopic, st, blobs, cfg.Logger, dueOf)
	if err != nil {
		return nil, err
	}
	s := &Service{log: cfg.Logger, clk: cfg.Clock, stage: stage, topics: topics, kick: make(chan struct{}, 1)}
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("classic-delay-publisher", s.loop); err != nil {
		return nil, err
	}
	return s, nil
}

func dueOf(m *message.Message) int64 {
	v, _ := m.Get(PropDue)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// Close stops the publisher and records the low-water mark.
func (s *Service) Close(ctx context.Context) error {
	err := s.group.Shutdown(ctx)
	return errors.Join(err, s.stage.SaveLowWater(s.clk.Now().UnixMilli()))
}

// Pending is the number of records waiting.
func (s *Service) Pending() int { return s.stage.Len() }

// Stage keeps rec until due, then publishes it to (topic, queue). rec is
// modified (stage topic, bookkeeping properties). A flush timeout is
// reported as KindFlushTimeout with the entry: the record is stored.
func (s *Service) Stage(ctx context.Context, rec *message.Message, topic string, queue int32, due time.Time) (storage.AppendEntry, error) {
	rec.Set(stored.PropRealTopic, topic)
	rec.Set(stored.PropRealQueue, strconv.Itoa(int(queue)))
	rec.Set(PropDue, strconv.FormatInt(due.UnixMilli(), 10))
	_, res, err := s.stage.Put(ctx, rec, due.UnixMilli())
	if err != nil {
		return storage.AppendEntry{}, produce.AppendError(err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	if res.Status == storage.StatusFlushTimeout {
		return res.Entries[0], mqerr.Errorf(mqerr.KindFlushTimeout, "stored, but the disk flush did not finish in time; the message is not yet durable")
	}
	return res.Entries[0], nil
}

func (s *Service) loop(ctx context.Context) {
	s.stage.Run(ctx, s.clk, s.kick, 256, func(ctx context.Context, p staged.Pending, now int64) {
		if err := s.publish(ctx, p); err != nil {
			s.log.Warn("classic delay: publishing a due record failed; retrying", "offset", p.Offset, "err", err)
		}
	})
}

func (s *Service) publish(ctx context.Context, p staged.Pending) error {
	_, rec, err := s.stage.Get(p.Offset)
	if err != nil || rec == nil {
		return err
	}
	name, _ := rec.Get(stored.PropRealTopic)
	topic, err := s.topics.GetTopic(ctx, name)
	if k := mqerr.KindOf(err); err != nil && (k == mqerr.KindTopicNotFound || k == mqerr.KindIllegalTopic) {
		s.log.Warn("classic delay: destination topic is gone; dropping the record", "topic", name, "message_id", rec.UniqKey())
		_, err = s.stage.Resolve(ctx, p.Offset, staged.OpFired)
		return err
	}
	if err != nil {
		return err
	}
	out := *rec
	out.Properties = append([]message.Property(nil), rec.Properties...)
	out.Topic = topic.Name
	out.QueueID = 0
	if v, ok := rec.Get(stored.PropRealQueue); ok {
		if q, err := strconv.Atoi(v); err == nil && q >= 0 && int32(q) < topic.Queues {
			out.QueueID = int32(q)
		}
	}
	out.Del(stored.PropRealTopic)
	out.Del(stored.PropRealQueue)
	out.Del(stored.PropDelayLevel)
	out.Del(PropDue)
	if _, err := s.stage.Resolve(ctx, p.Offset, staged.OpFired, &out); err != nil && !errors.Is(err, staged.ErrNotPending) {
		return fmt.Errorf("publishing to %s: %w", topic.Name, err)
	}
	return nil
}
