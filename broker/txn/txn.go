package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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

// System topics of the transaction service.
const (
	HalfTopic = "rmq_sys_trans_half"
	OpsTopic  = "rmq_sys_trans_op"
)

// Resolution is a producer's decision.
type Resolution int8

const (
	Unspecified Resolution = iota // "unknown yet": no change
	Commit
	Rollback
)

// CheckBackSender asks a live producer of topic about a transaction. It
// reports whether a producer was reached (unreached checks do not count).
type CheckBackSender interface {
	CheckTransaction(ctx context.Context, topic string, msg *model.Delivered, transactionID string) bool
}

// Topics resolves a destination topic at commit time.
type Topics interface {
	GetTopic(ctx context.Context, name string) (model.Topic, error)
}

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// FirstCheck is how long after the send a half message becomes
	// checkable (unless the producer set a recovery duration); default 6 s.
	FirstCheck time.Duration
	// CheckInterval spaces later checks; default 30 s.
	CheckInterval time.Duration
	// MaxChecks answered-by-silence checks before discarding; default 15.
	MaxChecks int
	// Placement is the queues a committed message may go to (see
	// produce.PickQueue); its group marks the transaction ids minted
	// (deferred.GroupPrefix).
	Placement placement.Of
}

// Service is the transaction service.
type Service struct {
	cfg       Config
	log       *slog.Logger
	clk       clock.Clock
	stage     *deferred.Stage
	topics    Topics
	token     *deferred.Token
	blobs     deferred.Blobs
	rr        sync.Map
	sender    atomic.Pointer[senderBox]
	group     *lifecycle.Group
	kick      chan struct{}
	discarded atomic.Int64
}

type senderBox struct{ CheckBackSender }

// Open recovers pending half messages and starts the checker.
func Open(ctx context.Context, cfg Config, st deferred.Store, blobs deferred.Blobs, topics Topics) (*Service, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FirstCheck <= 0 {
		cfg.FirstCheck = 6 * time.Second
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 30 * time.Second
	}
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = 15
	}
	first := cfg.FirstCheck
	stage, err := deferred.Open(ctx, "txn", HalfTopic, OpsTopic, st, blobs, cfg.Logger, func(m *message.Message) int64 {
		d := record.FromRecord(m)
		wait := first
		if d.TxRecovery > 0 {
			wait = d.TxRecovery
		}
		return m.StoreTime + wait.Milliseconds()
	})
	if err != nil {
		return nil, err
	}
	tok, err := deferred.LoadToken(blobs, deferred.TxnKeyBlob, deferred.GroupPrefix("t1.", cfg.Placement.Group))
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: cfg.Logger, clk: cfg.Clock, stage: stage, topics: topics, token: tok, blobs: blobs, kick: make(chan struct{}, 1)}
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("txn-checker", s.loop); err != nil {
		return nil, err
	}
	return s, nil
}

// SetSender installs the check-back port (the gateway's sessions).
func (s *Service) SetSender(c CheckBackSender) { s.sender.Store(&senderBox{c}) }

// Close stops the checker and records the low-water mark.
func (s *Service) Close(ctx context.Context) error {
	err := s.group.Shutdown(ctx)
	return errors.Join(err, s.stage.SaveLowWater(s.clk.Now().UnixMilli()))
}

// Pending is the number of open transactions; Discarded counts messages
// dropped after unanswered checks since start.
func (s *Service) Pending() int     { return s.stage.Len() }
func (s *Service) Discarded() int64 { return s.discarded.Load() }

// Stage stores a half message and returns its transaction id.
func (s *Service) Stage(ctx context.Context, topic model.Topic, m *model.Message, p model.Producer) (model.SendResult, error) {
	rec := record.ToRecord(m, HalfTopic, 0)
	rec.Flags |= record.FlagTransactionPrepared
	if p.ClientID != "" {
		rec.Set(record.PropProducerGroup, p.ClientID)
	}
	wait := s.cfg.FirstCheck
	if m.TxRecovery > 0 {
		wait = m.TxRecovery
	}
	due := s.clk.Now().Add(wait).UnixMilli()
	off, res, err := s.stage.Put(ctx, rec, due)
	if err != nil {
		return model.SendResult{}, produce.AppendError(err)
	}
	select { // the checker may be idle (nothing pending) or timed for a later check
	case s.kick <- struct{}{}:
	default:
	}
	r := model.SendResult{MessageID: m.ID, Offset: off, TransactionID: s.token.Encode(off, 0, topic.Name)}
	if res.Status == storage.StatusFlushTimeout {
		r.Err = mqerr.Errorf(mqerr.KindFlushTimeout, "stored, but the disk flush did not finish in time; the message is not yet durable")
	}
	return r, nil
}

// End applies a producer's resolution. Repeating the applied resolution is
// OK; the opposite one, an unknown id, or a message id that does not match
// ⇒ KindInvalidTransactionID.
func (s *Service) End(ctx context.Context, topic, messageID, transactionID string, res Resolution) error {
	off, _, err := s.token.Decode(transactionID, topic)
	if err != nil {
		return mqerr.Errorf(mqerr.KindInvalidTransactionID, "transaction id is %v", err)
	}
	if res == Unspecified {
		return nil // the producer does not know yet; the check comes again
	}
	_, rec, err := s.stage.Get(off)
	if err != nil {
		return mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the half message")
	}
	want := deferred.OpCommitted
	if res == Rollback {
		want = deferred.OpRolledBack
	}
	if rec == nil {
		return s.finished(off, want)
	}
	d := record.FromRecord(rec)
	if messageID != "" && d.ID != messageID {
		return mqerr.Errorf(mqerr.KindInvalidTransactionID, "transaction id belongs to message %q, not %q", d.ID, messageID)
	}
	var publish []*message.Message
	if res == Commit {
		t, err := s.topics.GetTopic(ctx, d.Topic)
		if err != nil {
			return err
		}
		out := *rec
		out.Properties = append([]message.Property(nil), rec.Properties...)
		out.Topic = t.Name
		q, ok := produce.PickQueue(t, d.MessageGroup, &s.rr, s.cfg.Placement)
		if !ok {
			return mqerr.Errorf(mqerr.KindReplicationLost, "no queue of topic %q is in this data group (%d) to commit the message to", t.Name, s.cfg.Placement.Group)
		}
		out.QueueID = q
		out.Flags &^= record.FlagTransactionPrepared
		out.Del(record.PropRealTopic)
		publish = append(publish, &out)
	}
	if _, err := s.stage.Resolve(ctx, off, want, publish...); err != nil {
		if errors.Is(err, deferred.ErrNotPending) {
			return s.finished(off, want)
		}
		return produce.AppendError(err)
	}
	return nil
}

func (s *Service) finished(off int64, want deferred.Op) error {
	r, ok := s.stage.Outcome(off)
	switch {
	case !ok:
		return mqerr.Errorf(mqerr.KindInvalidTransactionID, "unknown or expired transaction")
	case r.Op == want:
		return nil // idempotent repeat
	default:
		return mqerr.Errorf(mqerr.KindInvalidTransactionID, "the transaction was already %s", r.Op)
	}
}

func (s *Service) loop(ctx context.Context) {
	s.stage.Run(ctx, s.clk, s.kick, 64, func(ctx context.Context, p deferred.Pending, now int64) {
		s.check(ctx, p, now)
	})
}

func (s *Service) check(ctx context.Context, p deferred.Pending, now int64) {
	interval := s.cfg.CheckInterval.Milliseconds()
	if p.Checks >= s.cfg.MaxChecks {
		if _, err := s.stage.Resolve(ctx, p.Offset, deferred.OpDiscarded); err == nil {
			s.discarded.Add(1)
			s.log.Warn("txn: transaction discarded after unanswered checks", "offset", p.Offset, "checks", p.Checks)
		}
		return
	}
	_, rec, err := s.stage.Get(p.Offset)
	if err != nil || rec == nil {
		return
	}
	d := record.FromRecord(rec)
	sent := false
	if b := s.sender.Load(); b != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sent = b.CheckTransaction(cctx, d.Topic, d, s.token.Encode(p.Offset, 0, d.Topic))
		cancel()
	}
	checks := p.Checks
	if sent {
		checks++
	}
	s.stage.Reschedule(p.Offset, now+interval, checks)
}

// Describe is for logs and admin.
func (s *Service) String() string { return fmt.Sprintf("txn(%d pending)", s.Pending()) }

// ReloadKeys takes the token key ring from the blobs again (after a
// cluster replicated a new one).
func (s *Service) ReloadKeys() error {
	r, err := deferred.LoadRing(s.blobs, deferred.TxnKeyBlob, false)
	if err != nil {
		return err
	}
	s.token.SetRing(r)
	return nil
}
