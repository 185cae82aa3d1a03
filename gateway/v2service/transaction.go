package v2service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"

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
// handle. With data groups, a producer's streams may all be held by
// other members than the one storing the half message: when no local
// producer is found, remote (if set) passes the check on to them. The
// node installs it with broker.SetCheckBackSender.
func (s *MessagingService) CheckBackSender(remote RemoteChecker) txn.CheckBackSender {
	return checkBackSender{sess: s.sess, log: s.log, remote: remote}
}

// RemoteChecker passes a transaction check on to the other members
// (peer CheckTransaction) until one of them reaches a producer of topic:
// msg is the half message, an encoded v2 Message whose topic is named as
// stored. It reports the client reached, or sent false.
type RemoteChecker func(ctx context.Context, topic, txID string, msg []byte) (clientID string, sent bool)

type checkBackSender struct {
	sess   *session.Registry
	log    *slog.Logger
	remote RemoteChecker
}

var _ txn.CheckBackSender = checkBackSender{}

// CheckTransaction reports whether a producer was reached. The write of
// the small command blocks only while the client's flow-control window is
// full (clients read their Telemetry stream continuously) and ends when
// the stream does; ctx bounds asking the other members.
func (c checkBackSender) CheckTransaction(ctx context.Context, topic string, msg *model.Delivered, transactionID string) bool {
	id, err := c.sess.SendToProducer(topic, func(ref session.ClientRef) session.Command {
		return recoverCommand(ref.Settings, topic, msg, transactionID)
	})
	if errors.Is(err, session.ErrNoProducer) && c.remote != nil {
		m := *msg
		m.ReceiptHandle = ""
		if b, merr := proto.Marshal(deliveredToV2(&m, &v2.Resource{Name: topic}, digestMD5)); merr == nil {
			if rid, sent := c.remote(ctx, topic, transactionID, b); sent {
				c.log.DebugContext(ctx, "transaction check sent through another member", "topic", topic, "message_id", msg.ID, "client_id", rid)
				return true
			}
		}
	}
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

// CheckTransactionForwarded sends a transaction check another member
// passed on (its RemoteChecker) to a producer of topic whose control
// stream this member holds: msg is the half message as an encoded v2
// Message. It reports the client reached, or sent false when this member
// holds no such stream.
func (s *MessagingService) CheckTransactionForwarded(_ context.Context, topic, txID string, msg []byte) (string, bool, error) {
	var m v2.Message
	if err := proto.Unmarshal(msg, &m); err != nil {
		return "", false, fmt.Errorf("%w: the half message of a transaction check: %w", errBadForwardedCheck, err)
	}
	if m.GetTopic().GetName() != topic || m.GetSystemProperties() == nil {
		return "", false, fmt.Errorf("%w: the half message of a transaction check of %q names topic %q", errBadForwardedCheck, topic, m.GetTopic().GetName())
	}
	id, err := s.sess.SendToProducer(topic, func(ref session.ClientRef) session.Command {
		n := ref.Settings.NameOf(topic)
		c := proto.Clone(&m).(*v2.Message)
		c.Topic = &v2.Resource{ResourceNamespace: n.Namespace, Name: n.Name}
		return &v2.TelemetryCommand{Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{
			RecoverOrphanedTransactionCommand: &v2.RecoverOrphanedTransactionCommand{Message: c, TransactionId: txID},
		}}
	})
	if errors.Is(err, session.ErrNoProducer) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	s.log.Debug("transaction check passed on from another member sent", "topic", topic, "message_id", m.GetSystemProperties().GetMessageId(), "client_id", id)
	return id, true, nil
}

// errBadForwardedCheck: a transaction check passed on by another member
// does not decode.
var errBadForwardedCheck = errors.New("v2service: malformed transaction check")

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
