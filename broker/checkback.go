package broker

import (
	"context"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/txn"
)

// CheckBackFanOut asks each listener's check-back sender in order until
// one reaches a producer: the transaction service has one port, but a
// half message may come from a gRPC producer (sessions, Telemetry) or a
// classic one (remoting connections of its producer group). Order gRPC
// first, then remoting. Nil entries are skipped.
//
// A sender that implements CheckBackClaimer and claims a message is the
// only one asked about it: a classic producer's half message must never
// be checked with a gRPC producer that merely publishes the same topic
// (it did not send it).
type CheckBackFanOut []txn.CheckBackSender

// CheckBackClaimer is implemented by senders that can tell a half message
// is one of their protocol's.
type CheckBackClaimer interface {
	ClaimsTransaction(topic, transactionID string) bool
}

// CheckTransaction implements txn.CheckBackSender.
func (f CheckBackFanOut) CheckTransaction(ctx context.Context, topic string, msg *model.Delivered, transactionID string) bool {
	for _, s := range f {
		if c, ok := s.(CheckBackClaimer); ok && c.ClaimsTransaction(topic, transactionID) {
			return s.CheckTransaction(ctx, topic, msg, transactionID)
		}
	}
	for _, s := range f {
		if s != nil && s.CheckTransaction(ctx, topic, msg, transactionID) {
			return true
		}
	}
	return false
}

var _ txn.CheckBackSender = CheckBackFanOut(nil)
