package v2service

import (
	"context"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// LiteBroker is what lite consumers need of the broker beyond Broker.
// *broker.Broker implements it; a Broker that does not (test fakes)
// serves no lite topics: SyncLiteSubscription answers NOT_IMPLEMENTED and
// Telemetry refuses lite client types.
type LiteBroker interface {
	SyncLiteSubscription(ctx context.Context, req broker.LiteSyncRequest) error
	ChangeInvisibleSuspend(ctx context.Context, group, topic, handle string, d time.Duration, suspend bool) (string, error)
	// LiteLimits are the subscription quota and the longest lite topic
	// name, told to lite clients in Settings.
	LiteLimits() (subscriptionQuota, maxLiteTopic int)
	SetLiteNotifier(func(lite.Unsubscribed))
}

var _ LiteBroker = (*broker.Broker)(nil)

// SyncLiteSubscription changes a lite consumer's set of lite topics on a
// LITE topic: PARTIAL_ADD and PARTIAL_REMOVE change it, COMPLETE_ADD
// replaces it (the Java client sends its whole set every 30 s),
// COMPLETE_REMOVE drops it. offset_option places the lite topics it adds.
// Checked in order: topic, group, client id, lite topic names, quota.
func (s *MessagingService) SyncLiteSubscription(ctx context.Context, req *v2.SyncLiteSubscriptionRequest) (*v2.SyncLiteSubscriptionResponse, error) {
	if _, ok := s.b.(LiteBroker); !ok {
		return &v2.SyncLiteSubscriptionResponse{Status: statusNotYet}, nil
	}
	fail := func(err error) (*v2.SyncLiteSubscriptionResponse, error) {
		return &v2.SyncLiteSubscriptionResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	topic, group, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return fail(err)
	}
	t, err := s.at(ctx, s.queueGroup(ctx, topic, -1))
	if err != nil {
		return fail(err)
	}
	if t.conn != nil {
		resp := new(v2.SyncLiteSubscriptionResponse)
		if err := t.invoke(ctx, v2.MessagingService_SyncLiteSubscription_FullMethodName, req, resp); err != nil {
			return fail(err)
		}
		return resp, nil
	}
	lb, ok := t.b.(LiteBroker)
	if !ok {
		return &v2.SyncLiteSubscriptionResponse{Status: statusNotYet}, nil
	}
	id := grpcserver.ClientID(ctx)
	if id == "" {
		return fail(mqerr.Errorf(mqerr.KindClientIDRequired, "x-mq-client-id is required for a lite subscription"))
	}
	var action lite.Action
	switch req.GetAction() {
	case v2.LiteSubscriptionAction_PARTIAL_ADD:
		action = lite.PartialAdd
	case v2.LiteSubscriptionAction_PARTIAL_REMOVE:
		action = lite.PartialRemove
	case v2.LiteSubscriptionAction_COMPLETE_ADD:
		action = lite.CompleteAdd
	case v2.LiteSubscriptionAction_COMPLETE_REMOVE:
		action = lite.CompleteRemove
	default:
		return fail(mqerr.Errorf(mqerr.KindBadRequest, "unknown lite subscription action %d", req.GetAction()))
	}
	start, err := startOf(req.GetOffsetOption())
	if err != nil {
		return fail(err)
	}
	err = lb.SyncLiteSubscription(ctx, broker.LiteSyncRequest{ClientID: id, Group: group, Topic: topic,
		Action: action, Lites: req.GetLiteTopicSet(), Start: start})
	if err != nil {
		return fail(err)
	}
	return &v2.SyncLiteSubscriptionResponse{Status: statusOK}, nil
}

// startOf converts an OffsetOption (nil: the default start).
func startOf(o *v2.OffsetOption) (lite.Start, error) {
	if o == nil {
		return lite.Start{}, nil
	}
	switch t := o.GetOffsetType().(type) {
	case *v2.OffsetOption_Policy_:
		switch t.Policy {
		case v2.OffsetOption_LAST:
			// Where the group left off (upstream resets nothing).
			return lite.Start{}, nil
		case v2.OffsetOption_MIN:
			return lite.Start{Kind: lite.StartFirst}, nil
		case v2.OffsetOption_MAX:
			return lite.Start{Kind: lite.StartLast}, nil
		}
	case *v2.OffsetOption_Offset:
		if t.Offset < 0 {
			return lite.Start{}, mqerr.Errorf(mqerr.KindIllegalOffset, "offset_option offset %d is negative", t.Offset)
		}
		return lite.Start{Kind: lite.StartOffset, Value: t.Offset}, nil
	case *v2.OffsetOption_TailN:
		if t.TailN < 0 {
			return lite.Start{}, mqerr.Errorf(mqerr.KindIllegalOffset, "offset_option tail_n %d is negative", t.TailN)
		}
		return lite.Start{Kind: lite.StartTailN, Value: t.TailN}, nil
	case *v2.OffsetOption_Timestamp:
		return lite.Start{Kind: lite.StartTime, Value: t.Timestamp}, nil
	case nil:
		return lite.Start{}, nil
	}
	return lite.Start{}, mqerr.Errorf(mqerr.KindBadRequest, "unknown offset_option")
}

// notifyUnsubscribeLite tells a client that a lite topic left its
// subscription (it expired), on its Telemetry stream.
func (s *MessagingService) notifyUnsubscribeLite(n lite.Unsubscribed) {
	name := n.Lite
	cmd := &v2.TelemetryCommand{Command: &v2.TelemetryCommand_NotifyUnsubscribeLiteCommand{
		NotifyUnsubscribeLiteCommand: &v2.NotifyUnsubscribeLiteCommand{LiteTopic: name}}}
	if err := s.sess.Send(n.ClientID, cmd); err != nil {
		s.log.Info("lite unsubscription not delivered; the client's next full sync drops it", "client_id", n.ClientID, "topic", n.Parent, "lite_topic", name, "err", err)
	}
}
