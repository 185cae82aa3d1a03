package v2service

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// EndTransaction commits or rolls back a half message.
// TRANSACTION_RESOLUTION_UNSPECIFIED changes nothing and answers OK: the
// Go client sends it when its checker says UNKNOWN, and the
// message stays pending for the next check. Repeating the applied
// resolution is OK; the opposite one, an unknown or expired id, or a
// message id that does not match the transaction ⇒ INVALID_TRANSACTION_ID.
func (s *MessagingService) EndTransaction(ctx context.Context, req *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	topic, err := checkTopic(req.GetTopic())
	if err != nil {
		return &v2.EndTransactionResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	r, err := resolutionToTxn(req.GetResolution())
	if err != nil {
		return &v2.EndTransactionResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.at(ctx, s.tokenGroup(req.GetTransactionId()))
	if err != nil {
		return &v2.EndTransactionResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.EndTransactionResponse)
		if err := t.invoke(ctx, v2.MessagingService_EndTransaction_FullMethodName, req, resp); err != nil {
			return &v2.EndTransactionResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	err = t.b.EndTransaction(ctx, topic, req.GetMessageId(), req.GetTransactionId(), r)
	if err == nil {
		s.log.DebugContext(ctx, "transaction ended", "topic", topic, "message_id", req.GetMessageId(),
			"resolution", req.GetResolution().String(), "source", req.GetSource().String())
	}
	return &v2.EndTransactionResponse{Status: statusOf(ctx, s.log, err)}, nil
}

// CheckBackSender is the broker's port for transaction checks,
// implemented over the session registry: the check goes to one
// live producer whose Settings declare the topic and whose Telemetry
// stream is open, as a RecoverOrphanedTransactionCommand carrying the
// half message built like a delivered message without a receipt
// handle. The node installs it with broker.SetCheckBackSender.
func (s *MessagingService) CheckBackSender() txn.CheckBackSender {
	return checkBackSender{sess: s.sess, log: s.log}
}

type checkBackSender struct {
	sess *session.Registry
	log  *slog.Logger
}

var _ txn.CheckBackSender = checkBackSender{}

// CheckTransaction reports whether a producer was reached. The write of
// the small command blocks only while the client's flow-control window is
// full (clients read their Telemetry stream continuously) and ends when
// the stream does; ctx is used for logging.
func (c checkBackSender) CheckTransaction(ctx context.Context, topic string, msg *model.Delivered, transactionID string) bool {
	id, err := c.sess.SendToProducer(topic, func(ref session.ClientRef) session.Command {
		return recoverCommand(ref.Settings, topic, msg, transactionID)
	})
	if err != nil {
		lvl := slog.LevelWarn
		if errors.Is(err, session.ErrNoProducer) {
			lvl = slog.LevelInfo
		}
		c.log.Log(ctx, lvl, "transaction check not sent: no live producer of the topic", "topic", topic,
			"message_id", msg.ID, "err", err)
		return false
	}
	c.log.DebugContext(ctx, "transaction check sent", "topic", topic, "message_id", msg.ID, "client_id", id)
	return true
}

// recoverCommand is the Telemetry command asking a producer about a
// transaction; the topic is named as the producer names it (without its
// namespace prefix).
func recoverCommand(st *session.Settings, topicKey string, msg *model.Delivered, transactionID string) *v2.TelemetryCommand {
	n := st.NameOf(topicKey)
	res := &v2.Resource{ResourceNamespace: n.Namespace, Name: n.Name}
	m := *msg
	m.ReceiptHandle = "" // never a POP delivery
	return &v2.TelemetryCommand{Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &v2.RecoverOrphanedTransactionCommand{
			Message:       deliveredToV2(&m, res, digestMD5),
			TransactionId: transactionID,
		},
	}}
}
