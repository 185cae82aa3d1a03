package txn

import (
	"context"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// This file serves the classic remoting protocol, whose producers send
// ready-made records (every property they set must survive, PGROUP
// included) and whose END_TRANSACTION names the half message by its
// commit-log position rather than by a transaction id.

// StagedHalf is where a half message was stored.
type StagedHalf struct {
	// Entry is the half message's append (its QueueOffset in the half
	// topic is classic's tranStateTableOffset).
	Entry storage.AppendEntry
	// TransactionID is the id EndTransaction takes.
	TransactionID string
	// FlushTimeout: stored but not yet durable.
	FlushTimeout bool
}

// StageRecord stores rec as a half message of topic. rec keeps its
// properties; its topic, queue and prepared flag are set here. recovery
// (its validated CHECK_IMMUNITY_TIME_IN_SECONDS; 0: the default) delays
// the first check, as for Stage.
func (s *Service) StageRecord(ctx context.Context, topic model.Topic, queue int32, rec *message.Message, recovery time.Duration) (StagedHalf, error) {
	rec.Set(record.PropRealTopic, topic.Name)
	rec.Set(record.PropRealQueue, strconv.Itoa(int(queue)))
	rec.Set(record.PropTranMsg, "true")
	rec.Flags |= record.FlagTransactionPrepared
	wait := s.cfg.FirstCheck
	if recovery > 0 {
		wait = recovery
	}
	due := s.clk.Now().Add(wait).UnixMilli()
	off, res, err := s.stage.Put(ctx, rec, due)
	if err != nil {
		return StagedHalf{}, produce.AppendError(err)
	}
	select { // the checker may be idle or timed for a later check
	case s.kick <- struct{}{}:
	default:
	}
	return StagedHalf{Entry: res.Entries[0], TransactionID: s.TransactionIDFor(off, topic.Name),
		FlushTimeout: res.Status == storage.StatusFlushTimeout}, nil
}

// TransactionIDFor mints the transaction id of the half message at
// offset off of the half topic, destined for topic.
func (s *Service) TransactionIDFor(off int64, topic string) string {
	return s.token.Encode(off, 0, topic)
}

// HalfRecord returns the pending half message a transaction id names
// (KindInvalidTransactionID when it is not pending any more).
func (s *Service) HalfRecord(topic, transactionID string) (*message.Message, error) {
	off, _, err := s.token.Decode(transactionID, topic)
	if err != nil {
		return nil, mqerr.Errorf(mqerr.KindInvalidTransactionID, "transaction id is %v", err)
	}
	_, rec, err := s.stage.Get(off)
	if err != nil {
		return nil, mqerr.Wrap(mqerr.KindStoreUnavailable, err, "reading the half message")
	}
	if rec == nil {
		return nil, mqerr.Errorf(mqerr.KindInvalidTransactionID, "the transaction is no longer pending")
	}
	return rec, nil
}
