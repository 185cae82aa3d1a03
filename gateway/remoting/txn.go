package remoting

import (
	"context"
	"strconv"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/storage/message"
)

// commitOrRollback values of END_TRANSACTION.
const (
	txNotType  = 0
	txCommit   = 8
	txRollback = 12
)

func (s *Server) endTransaction(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group := f.str("producerGroup", false)
	stateOff := f.int64("tranStateTableOffset", false, -1)
	phys := f.int64("commitLogOffset", true, 0)
	kind := f.int32("commitOrRollback", true, 0)
	msgID := f.str("msgId", false)
	if r := f.failed(); r != nil {
		return r
	}
	var res txn.Resolution
	switch kind {
	case txCommit:
		res = txn.Commit
	case txRollback:
		res = txn.Rollback
	case txNotType:
		// "Unknown yet": nothing to do, the check comes later; upstream
		// sends no answer.
		return nil
	default:
		return invalid("commitOrRollback %d is not 0, 8 or 12", kind)
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	err := s.cl.EndTransaction(ctx, broker.ClassicEnd{CommitLogOffset: phys, TranStateOffset: stateOff, ProducerGroup: group, MsgID: msgID, Resolution: res})
	if err != nil && mqerr.KindOf(err) == mqerr.KindMessageNotFound {
		// Java 5 producers also name the topic: fall back to the
		// transaction id we handed out.
		if topic, id := req.Get("topic"), req.Get("transactionId"); topic != "" && id != "" {
			err = s.b.EndTransaction(ctx, topic, msgID, id, res)
		}
	}
	if err != nil {
		s.log.Warn("remoting: END_TRANSACTION refused", "producer_group", group, "commit_log_offset", phys, "err", err)
		return s.fail(ctx, err)
	}
	return ok()
}

// ClaimsTransaction implements broker.CheckBackClaimer: half messages a
// classic producer sent carry the CLUSTER property this listener adds (a
// reserved name gRPC producers cannot set).
func (s *Server) ClaimsTransaction(topic, transactionID string) bool {
	rec, err := s.cl.HalfRecord(topic, transactionID)
	if err != nil {
		return false
	}
	_, classic := rec.Get(propCluster)
	return classic
}

// CheckTransaction implements txn.CheckBackSender for classic producers:
// it sends CHECK_TRANSACTION_STATE (oneway) to one live connection of the
// half message's producer group (PGROUP), and reports false — so the
// check is not counted — when the message is not a classic producer's or
// none of its group is connected. A check never goes to another group: a
// plain Go producer would block on it (trap 32). The check carries the
// message: with auth on it goes only to a connection whose registration
// (heartbeat or half message) was signed by a user who may publish to
// the message's topic, since any signed user may name any producer group.
func (s *Server) CheckTransaction(ctx context.Context, topic string, msg *model.Delivered, transactionID string) bool {
	if s.draining.Load() {
		return false
	}
	rec, err := s.cl.HalfRecord(topic, transactionID)
	if err != nil {
		return false
	}
	pg, _ := rec.Get(record.PropProducerGroup)
	if pg == "" {
		return false
	}
	may := func(u *auth.User) bool {
		return s.cfg.Auth.Allow(auth.NewContext(ctx, u), auth.Access{Publish: topic}) == nil
	}
	for _, c := range s.reg.producerConns(pg, may) {
		if s.sendCheck(c, rec, topic, transactionID) == nil {
			return true
		}
	}
	return false
}

func (s *Server) sendCheck(c *conn, rec *message.Message, topic, transactionID string) error {
	r := s.wireRecord(c, rec, topic, realQueue(rec))
	body, err := wire.AppendRecord(nil, &r)
	if err != nil {
		return err
	}
	return s.request(c, reqCheckTransactionState, map[string]string{
		"topic":                topic,
		"tranStateTableOffset": itoa(rec.QueueOffset),
		"commitLogOffset":      itoa(rec.PhysOffset),
		"msgId":                rec.UniqKey(),
		"transactionId":        transactionID,
		"offsetMsgId":          wire.OffsetMsgID(s.storeHost(c), rec.PhysOffset),
		"bname":                s.cfg.BrokerName,
	}, body)
}

// realQueue is the queue a half message was sent to (REAL_QID; 0 when
// missing or unreadable).
func realQueue(rec *message.Message) int32 {
	v, _ := rec.Get(record.PropRealQueue)
	q, err := strconv.ParseInt(v, 10, 32)
	if err != nil || q < 0 {
		return 0
	}
	return int32(q)
}
