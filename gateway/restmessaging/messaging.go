package restmessaging

import (
	"context"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/forwarding"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// SendMessages stores messages for one topic. A request-level problem
// (no message, bad topic, a message the broker refuses) fails the whole
// request; otherwise every message gets a result in request order, whose
// status is OK or MASTER_PERSISTENCE_TIMEOUT (stored, not yet durable).
func (s *Service) SendMessages(ctx context.Context, req *restv1.SendMessagesRequest) (*restv1.SendMessagesResponse, error) {
	if err := s.allow(ctx, auth.Access{Publish: req.GetTopic()}); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	in := req.GetMessages()
	if len(in) == 0 {
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindMessageCorrupted, "messages: at least one message is required"))
	}
	now := s.clock.Now()
	host := callerHost(ctx)
	msgs := make([]*model.Message, len(in))
	for i, m := range in {
		mm, err := s.toModelMessage(i, m, req.GetTopic(), host, now)
		if err != nil {
			return nil, s.errorOf(ctx, err)
		}
		msgs[i] = mm
	}
	b := s.b
	if s.groups != nil {
		t, err := s.groups.Send(ctx, req.GetTopic(), msgs)
		if err != nil {
			return nil, s.errorOf(ctx, err)
		}
		if t.B == nil {
			resp, err := forwarding.Call[restv1.SendMessagesResponse](ctx, t.Conn, restv1.MessagingService_SendMessages_FullMethodName, req)
			return resp, s.forwardError(ctx, err)
		}
		b = t.B
	}
	results, err := b.Send(ctx, req.GetTopic(), msgs, model.Producer{ClientID: lastMD(ctx, "x-mq-client-id"), Host: host})
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if len(results) != len(msgs) {
		s.log.ErrorContext(ctx, "broker returned a wrong number of send results", "want", len(msgs), "got", len(results))
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindInternal, "broker returned %d results for %d messages", len(results), len(msgs)))
	}
	out := make([]*restv1.SendResult, len(results))
	for i, r := range results {
		st, _ := s.statusOf(ctx, r.Err)
		out[i] = &restv1.SendResult{MessageId: msgs[i].ID, Status: st}
	}
	return &restv1.SendMessagesResponse{Results: out}, nil
}

// ReceiveMessages pops up to max_messages visible messages, waiting up to
// wait_duration (never past the caller's deadline) when none is visible.
// Nothing found is an empty list, not an error.
func (s *Service) ReceiveMessages(ctx context.Context, req *restv1.ReceiveMessagesRequest) (*restv1.ReceiveMessagesResponse, error) {
	if err := s.allow(ctx, auth.Access{Subscribe: req.GetTopic(), Group: req.GetGroup()}); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	rr, err := receiveRequest(ctx, req)
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if s.groups != nil {
		return s.receiveFromGroups(ctx, req, rr)
	}
	return s.receiveLocal(ctx, s.b, rr)
}

// receiveLocal is ReceiveMessages at broker b.
func (s *Service) receiveLocal(ctx context.Context, b Broker, rr broker.ReceiveRequest) (*restv1.ReceiveMessagesResponse, error) {
	msgs, err := b.Receive(ctx, rr)
	if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		return nil, s.errorOf(ctx, err)
	}
	if len(msgs) > 0 && ctx.Err() != nil {
		// The caller is gone: make the messages visible again at once,
		// without counting the attempt.
		s.release(ctx, b, rr, msgs)
		return nil, s.errorOf(ctx, ctx.Err())
	}
	now := s.clock.Now()
	text := wantsText(ctx)
	out := make([]*restv1.ReceivedMessage, len(msgs))
	for i, d := range msgs {
		out[i] = s.toReceived(d, text, now)
	}
	return &restv1.ReceiveMessagesResponse{Messages: out}, nil
}

// receiveRequest validates a receive and applies the defaults.
func receiveRequest(ctx context.Context, req *restv1.ReceiveMessagesRequest) (broker.ReceiveRequest, error) {
	var rr broker.ReceiveRequest
	n := int(req.GetMaxMessages())
	switch {
	case n == 0:
		n = DefaultMaxMessages
	case n < 0 || n > broker.MaxReceiveBatch:
		return rr, mqerr.Errorf(mqerr.KindBadRequest, "maxMessages %d is outside 1..%d", n, broker.MaxReceiveBatch)
	}
	invisible, err := durationOr(req.GetInvisibleDuration(), DefaultInvisible, "invisibleDuration", mqerr.KindIllegalInvisibleTime)
	if err != nil {
		return rr, err
	}
	if invisible < broker.MinReceiveInvisible || invisible > broker.MaxInvisible {
		return rr, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisibleDuration %s is outside [%s, %s]", invisible, broker.MinReceiveInvisible, broker.MaxInvisible)
	}
	wait, err := durationOr(req.GetWaitDuration(), DefaultWait, "waitDuration", mqerr.KindIllegalPollingTime)
	if err != nil {
		return rr, err
	}
	if wait < 0 || wait > MaxWait {
		return rr, mqerr.Errorf(mqerr.KindIllegalPollingTime, "waitDuration %s is outside [0s, %s]", wait, MaxWait)
	}
	if deadline, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(deadline)-WaitReserve), 0)
	}
	filter, err := receiveFilter(req.GetFilter(), req.GetSqlFilter())
	if err != nil {
		return rr, err
	}
	return broker.ReceiveRequest{
		Group:     req.GetGroup(),
		Topic:     req.GetTopic(),
		Filter:    filter,
		Max:       n,
		Invisible: invisible,
		ClientID:  lastMD(ctx, "x-mq-client-id"),
		Wait:      wait,
		QueueID:   -1,
	}, nil
}

// durationOr returns d, or def when d is unset; an out-of-range proto
// Duration is an error of kind k naming the field.
func durationOr(d *durationpb.Duration, def time.Duration, field string, k mqerr.Kind) (time.Duration, error) {
	if d == nil {
		return def, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, mqerr.Errorf(k, "%s is not a valid duration", field)
	}
	return d.AsDuration(), nil
}

func (s *Service) release(ctx context.Context, b Broker, rr broker.ReceiveRequest, msgs []*model.Delivered) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	handles := make([]string, 0, len(msgs))
	for _, d := range msgs {
		handles = append(handles, d.ReceiptHandle)
	}
	failed := 0
	for _, err := range b.Release(rctx, rr.Group, rr.Topic, handles) {
		if err != nil {
			failed++
		}
	}
	s.log.WarnContext(ctx, "REST receive caller went away; its messages were made visible again",
		"group", rr.Group, "topic", rr.Topic, "messages", len(msgs), "release_failed", failed)
}

// AckMessages acknowledges by receipt handle: one result per handle, in
// request order. An unknown topic or group fails the whole request.
func (s *Service) AckMessages(ctx context.Context, req *restv1.AckMessagesRequest) (*restv1.AckMessagesResponse, error) {
	if err := s.allow(ctx, auth.Access{Subscribe: req.GetTopic(), Group: req.GetGroup()}); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	in := req.GetReceiptHandles()
	if len(in) == 0 {
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindBadRequest, "receiptHandles: at least one receipt handle is required"))
	}
	if err := s.exists(ctx, req.GetGroup(), req.GetTopic()); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	out := make([]*restv1.AckResult, len(in))
	handles := make([]string, 0, len(in))
	idx := make([]int, 0, len(in))
	for i, h := range in {
		out[i] = &restv1.AckResult{ReceiptHandle: h}
		if h == "" {
			out[i].Status = newStatus(v2.Code_INVALID_RECEIPT_HANDLE, "receipt handle is empty")
			continue
		}
		handles = append(handles, h)
		idx = append(idx, i)
	}
	if len(handles) > 0 && s.groups != nil {
		for j, st := range s.ackInGroups(ctx, req, handles) {
			out[idx[j]].Status = st
		}
	} else if len(handles) > 0 {
		errs := s.b.Ack(ctx, req.GetGroup(), req.GetTopic(), handles)
		if len(errs) != len(handles) {
			return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindInternal, "broker returned %d ack results for %d handles", len(errs), len(handles)))
		}
		for j, err := range errs {
			out[idx[j]].Status, _ = s.statusOf(ctx, err)
		}
	}
	return &restv1.AckMessagesResponse{Results: out}, nil
}

// ChangeInvisibleDuration makes a delivery invisible for invisible_duration
// from now and answers its new handle (the old one is superseded).
func (s *Service) ChangeInvisibleDuration(ctx context.Context, req *restv1.ChangeInvisibleDurationRequest) (*restv1.ChangeInvisibleDurationResponse, error) {
	if err := s.allow(ctx, auth.Access{Subscribe: req.GetTopic(), Group: req.GetGroup()}); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if req.GetReceiptHandle() == "" {
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "receiptHandle is required"))
	}
	if req.GetInvisibleDuration() == nil {
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisibleDuration is required (0s to %s)", broker.MaxInvisible))
	}
	d, err := durationOr(req.GetInvisibleDuration(), 0, "invisibleDuration", mqerr.KindIllegalInvisibleTime)
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if d < 0 || d > broker.MaxInvisible {
		return nil, s.errorOf(ctx, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisibleDuration %s is outside [0s, %s]", d, broker.MaxInvisible))
	}
	if err := s.exists(ctx, req.GetGroup(), req.GetTopic()); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	b := s.b
	if s.groups != nil {
		t, err := s.groups.Handle(ctx, req.GetTopic(), req.GetReceiptHandle())
		if err != nil {
			return nil, s.errorOf(ctx, err)
		}
		if t.B == nil {
			resp, err := forwarding.Call[restv1.ChangeInvisibleDurationResponse](ctx, t.Conn, restv1.MessagingService_ChangeInvisibleDuration_FullMethodName, req)
			return resp, s.forwardError(ctx, err)
		}
		b = t.B
	}
	h, err := b.ChangeInvisible(ctx, req.GetGroup(), req.GetTopic(), req.GetReceiptHandle(), d)
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if h == "" {
		h = req.GetReceiptHandle()
	}
	return &restv1.ChangeInvisibleDurationResponse{ReceiptHandle: h}, nil
}

// exists checks the topic, then the group, without auto-creating either:
// there is nothing to acknowledge on a topic or group that does not exist.
func (s *Service) exists(ctx context.Context, group, topic string) error {
	if _, err := s.b.GetTopic(ctx, topic); err != nil {
		return err
	}
	_, err := s.b.GetGroup(ctx, group)
	return err
}

// GetRoute describes a topic: its type and queues. Being a GET, it never
// auto-creates the topic.
func (s *Service) GetRoute(ctx context.Context, req *restv1.GetRouteRequest) (*restv1.GetRouteResponse, error) {
	if err := s.allow(ctx, auth.Access{Route: req.GetTopic()}); err != nil {
		return nil, s.errorOf(ctx, err)
	}
	t, err := s.b.GetTopic(ctx, req.GetTopic())
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	qs := make([]*restv1.Queue, t.Queues)
	for i := range qs {
		qs[i] = &restv1.Queue{Id: int32(i), Permission: t.Perm.String()}
	}
	return &restv1.GetRouteResponse{Topic: t.Name, Type: t.Type.String(), AcceptMessageTypes: acceptTypes(t.Type), Queues: qs}, nil
}

// callerHost is the producer's address: the HTTP client (grpc-gateway
// forwards it as x-forwarded-for, first hop first) or the gRPC peer.
func callerHost(ctx context.Context) string {
	if xff := lastMD(ctx, "x-forwarded-for"); xff != "" {
		first, _, _ := strings.Cut(xff, ",")
		return strings.TrimSpace(first)
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}

// receiveFilter is a receive's tag filter, or its SQL92 one when sqlFilter
// is set (not both).
func receiveFilter(tags, sqlFilter string) (model.Filter, error) {
	if sqlFilter != "" {
		if strings.TrimSpace(tags) != "" && strings.TrimSpace(tags) != "*" {
			return model.Filter{}, mqerr.Errorf(mqerr.KindIllegalFilter, "give filter (tags) or sqlFilter, not both")
		}
		return broker.SQLFilter(sqlFilter)
	}
	f, err := model.ParseTagFilter(tags)
	if err != nil {
		return model.Filter{}, mqerr.Wrap(mqerr.KindIllegalFilter, err, "illegal filter")
	}
	return f, nil
}
