package v2service

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// ReceiveMessage is a POP receive. Frames, always: a status
// frame; after an OK status one frame per message; a delivery timestamp;
// then gRPC OK. Nothing found after really waiting ⇒ MESSAGE_NOT_FOUND.
// The poll never makes the call outlive the client's deadline, and a
// deadline too short to wait is a non-blocking attempt rather than an
// error (the Go simple consumer's default awaitDuration = 0 works).
func (s *MessagingService) ReceiveMessage(req *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	ctx := stream.Context()
	rr, topic, err := s.receiveRequest(ctx, req)
	if err != nil {
		return sendReceiveStatus(stream, statusOf(ctx, s.log, err))
	}
	if s.anyGroup(req) {
		return s.receiveAnyGroup(ctx, req, rr, topic, stream)
	}
	t, err := s.at(ctx, s.queueGroup(ctx, rr.Topic, req.GetMessageQueue().GetId()))
	if err != nil {
		return sendReceiveStatus(stream, statusOf(ctx, s.log, err))
	}
	if s.groups != nil && !req.GetAutoRenew() && req.GetMessageQueue().GetId() >= 0 {
		return s.receiveNamedFirst(ctx, req, rr, topic, t, stream)
	}
	return s.receiveAt(ctx, req, rr, topic, t, stream)
}

// receiveAt serves a receive at t: its broker's, or forwarded.
func (s *MessagingService) receiveAt(ctx context.Context, req *v2.ReceiveMessageRequest, rr broker.ReceiveRequest, topic *v2.Resource, t target,
	stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	if t.conn != nil {
		return forwardStream[v2.ReceiveMessageResponse](ctx, t, v2.MessagingService_ReceiveMessage_FullMethodName, req, stream.Send, func(err error) error {
			return sendReceiveStatus(stream, statusOf(ctx, s.log, err))
		})
	}
	// A drain wakes a parked poll inside the broker (Broker.Drain), which
	// then answers "no message" like any empty poll.
	msgs, err := t.b.Receive(ctx, rr)
	switch {
	case err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound:
		return sendReceiveStatus(stream, statusOf(ctx, s.log, err))
	case err != nil || len(msgs) == 0:
		return sendReceiveStatus(stream, statusNoMessage)
	}
	return s.sendReceived(ctx, t, rr, topic, msgs, stream)
}

// sendReceived streams the messages t's broker delivered.
func (s *MessagingService) sendReceived(ctx context.Context, t target, rr broker.ReceiveRequest, topic *v2.Resource, msgs []*model.Delivered,
	stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: statusOK}}); err != nil {
		s.releaseUnsent(ctx, t.b, rr.Group, rr.Topic, msgs, err)
		return err
	}
	dk := digestFor(ctx)
	for i, d := range msgs {
		f := new(receiveFrame)
		f.content.Message = f.msg.fill(d, topic, dk)
		f.resp.Content = &f.content
		if err := stream.Send(&f.resp); err != nil {
			s.releaseUnsent(ctx, t.b, rr.Group, rr.Topic, msgs[i:], err)
			return err
		}
	}
	return stream.Send(deliveryTimestampFrame())
}

// receiveFrame is the response carrying one delivered message, allocated
// with everything it points to.
type receiveFrame struct {
	resp    v2.ReceiveMessageResponse
	content v2.ReceiveMessageResponse_Message
	msg     deliveredV2
}

func sendReceiveStatus(stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse], st *v2.Status) error {
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}}); err != nil {
		return err
	}
	return stream.Send(deliveryTimestampFrame())
}

func deliveryTimestampFrame() *v2.ReceiveMessageResponse {
	return &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}}
}

// receiveRequest validates a receive (order: topic, group, invisible
// duration, filter) and builds the broker request. It also returns the
// topic Resource delivered messages carry: bare name plus namespace.
func (s *MessagingService) receiveRequest(ctx context.Context, req *v2.ReceiveMessageRequest) (broker.ReceiveRequest, *v2.Resource, error) {
	var rr broker.ReceiveRequest
	t := req.GetMessageQueue().GetTopic()
	topic, group, err := checkTopicGroup(t, req.GetGroup())
	if err != nil {
		return rr, nil, err
	}
	var invisible time.Duration
	if !req.GetAutoRenew() {
		// Push consumers (auto_renew) send no duration: the broker applies
		// 60 s and renews. Everyone else must ask for 10 s … 12 h.
		d := req.GetInvisibleDuration()
		if d == nil || d.CheckValid() != nil {
			return rr, nil, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible_duration is required (between %s and %s) unless auto_renew is set", broker.MinReceiveInvisible, broker.MaxInvisible)
		}
		invisible = d.AsDuration()
		if invisible < broker.MinReceiveInvisible || invisible > broker.MaxInvisible {
			return rr, nil, mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible_duration %s is outside [%s, %s]", invisible, broker.MinReceiveInvisible, broker.MaxInvisible)
		}
	}
	filter, err := filterOf(req.GetFilterExpression())
	if err != nil {
		return rr, nil, err
	}
	id := grpcserver.ClientID(ctx)
	rr = broker.ReceiveRequest{
		Group:     group,
		Topic:     topic,
		Filter:    filter,
		Max:       batchOf(req.GetBatchSize()),
		Invisible: invisible,
		AutoRenew: req.GetAutoRenew(),
		ClientID:  id,
		Wait:      s.pollWait(ctx, id, req.GetLongPollingTimeout()),
		AttemptID: req.GetAttemptId(),
		// Upstream pops across all queues of the broker whatever the id
		// as upstream does: simple consumers name a route queue round
		// robin, and waiting on that one queue would miss the others.
		// Push consumers (auto_renew) name the queue of their assignment:
		// −1 for non-FIFO groups, one queue each for FIFO groups
		// (QueryAssignment), which is honoured.
		QueueID: -1,
	}
	if req.GetAutoRenew() && req.GetMessageQueue().GetId() >= 0 {
		rr.QueueID = req.GetMessageQueue().GetId()
	}
	return rr, &v2.Resource{ResourceNamespace: t.GetResourceNamespace(), Name: t.GetName()}, nil
}

// checkTopicGroup validates the topic, then the group, of a consumer call
// and returns their keys.
func checkTopicGroup(topic, group *v2.Resource) (topicKey, groupKey string, err error) {
	if topicKey, err = checkTopic(topic); err != nil {
		return "", "", err
	}
	if groupKey, err = checkGroup(group); err != nil {
		return "", "", err
	}
	return topicKey, groupKey, nil
}

// batchOf is a receive or pull batch size clamped to [1, MaxReceiveBatch].
func batchOf(n int32) int { return min(max(int(n), 1), broker.MaxReceiveBatch) }

// pollWait is how long a receive or pull may park: pollTime for the
// client's deadline (wall-clock, the client's timer, whatever clock the
// broker schedules with) and declared timeouts; zero while draining.
func (s *MessagingService) pollWait(ctx context.Context, clientID string, requested *durationpb.Duration) time.Duration {
	if s.gate.IsDraining() {
		return 0
	}
	if forwarded(ctx) && requested != nil && requested.AsDuration() == 0 {
		return 0 // another member's look for messages (receiveNow), not a client's long poll
	}
	rt, lpt := s.settingsOf(clientID)
	deadline, hasDeadline := ctx.Deadline()
	return pollTime(time.Until(deadline), hasDeadline, requested, lpt, rt)
}

// filterOf parses a filter expression: TAG (or unspecified) expressions
// with model.ParseTagFilter, SQL ones as RocketMQ's SQL92 over the
// messages' properties (broker.SQLFilter; upstream needs the broker's
// enablePropertyFilter, mqgate always has it).
func filterOf(f *v2.FilterExpression) (model.Filter, error) {
	if f.GetType() == v2.FilterType_SQL {
		return broker.SQLFilter(f.GetExpression())
	}
	flt, err := model.ParseTagFilter(f.GetExpression())
	if err != nil {
		return model.Filter{}, mqerr.Wrap(mqerr.KindIllegalFilter, err, "illegal filter expression")
	}
	return flt, nil
}

// pollTime is how long a receive may wait for messages: the requested long-polling timeout (else the client's declared
// one, else remaining − request_timeout/2), clamped to [5 s, 20 s], and
// never closer than PollReserve to the client's deadline. Zero means a
// non-blocking attempt. It never rejects.
func pollTime(remaining time.Duration, hasDeadline bool, requested *durationpb.Duration, declared, requestTimeout time.Duration) time.Duration {
	var poll time.Duration
	switch {
	case requested != nil && requested.CheckValid() == nil:
		poll = requested.AsDuration()
	case declared > 0:
		poll = declared
	case hasDeadline:
		poll = remaining - requestTimeout/2
	default:
		poll = MaxLongPolling
	}
	poll = min(max(poll, MinLongPolling), MaxLongPolling)
	if hasDeadline {
		poll = min(poll, remaining-PollReserve)
	}
	return max(poll, 0)
}

// releaseUnsent makes deliveries the client never got visible again at
// once, without counting the attempt: the stream broke mid-batch.
func (s *MessagingService) releaseUnsent(ctx context.Context, b Broker, group, topic string, ds []*model.Delivered, cause error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	handles := make([]string, 0, len(ds))
	for _, d := range ds {
		if d.ReceiptHandle != "" {
			handles = append(handles, d.ReceiptHandle)
		}
	}
	failed := 0
	for _, err := range b.Release(rctx, group, topic, handles) {
		if err != nil {
			failed++
		}
	}
	s.log.WarnContext(ctx, "receive stream broke mid-batch; unsent messages made visible again",
		"group", group, "topic", topic, "unsent", len(ds), "release_failed", failed, "err", cause)
}

// AckMessage acknowledges deliveries; one result per entry in request
// order, top-level status = their common code or MULTIPLE_RESULTS.
func (s *MessagingService) AckMessage(ctx context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	topic, group, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.AckMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	in := req.GetEntries()
	if len(in) == 0 {
		return &v2.AckMessageResponse{Status: statusOf(ctx, s.log, mqerr.Errorf(mqerr.KindBadRequest, "no entries to acknowledge"))}, nil
	}
	resp := ackResponse(in)
	out := resp.Entries
	handles := make([]string, 0, len(in))
	// idx maps handles to entries when an entry has none (nil: one to one).
	var idx []int
	for i, e := range out {
		if e.ReceiptHandle == "" {
			e.Status = statusNoHandle
			if idx == nil {
				idx = make([]int, len(handles), len(in))
				for j := range idx {
					idx[j] = j
				}
			}
			continue
		}
		handles = append(handles, e.ReceiptHandle)
		if idx != nil {
			idx = append(idx, i)
		}
	}
	if idx != nil {
		// An entry's result by its handle's place.
		sel := make([]*v2.AckMessageResultEntry, len(idx))
		for j, i := range idx {
			sel[j] = out[i]
		}
		out = sel
	}
	if len(handles) > 0 && s.groups != nil {
		s.ackByGroup(ctx, req, group, topic, handles, idx, out)
	} else if len(handles) > 0 {
		errs := s.b.Ack(ctx, group, topic, handles)
		if len(errs) != len(handles) {
			s.log.ErrorContext(ctx, "broker returned a wrong number of ack results", "want", len(handles), "got", len(errs))
			return &v2.AckMessageResponse{Status: statusNoEntries}, nil
		}
		for j, err := range errs {
			out[j].Status = statusOf(ctx, s.log, err)
		}
	}
	resp.Status = combine(resp.Entries)
	return resp, nil
}

// ackResponse is the response to an ack of entries in, each result
// echoing its entry's message id and handle (statuses unset): for one
// entry, the usual ack, in one allocation.
func ackResponse(in []*v2.AckMessageEntry) *v2.AckMessageResponse {
	if len(in) == 1 {
		one := new(struct {
			resp v2.AckMessageResponse
			ent  v2.AckMessageResultEntry
			out  [1]*v2.AckMessageResultEntry
		})
		one.ent.MessageId, one.ent.ReceiptHandle = in[0].GetMessageId(), in[0].GetReceiptHandle()
		one.out[0] = &one.ent
		one.resp.Entries = one.out[:]
		return &one.resp
	}
	// The entries in one allocation, not one each.
	ents := make([]v2.AckMessageResultEntry, len(in))
	out := make([]*v2.AckMessageResultEntry, len(in))
	for i, e := range in {
		ents[i].MessageId, ents[i].ReceiptHandle = e.GetMessageId(), e.GetReceiptHandle()
		out[i] = &ents[i]
	}
	return &v2.AckMessageResponse{Entries: out}
}

// ChangeInvisibleDuration moves a delivery's visibility to now + d (d in
// [0, 12 h]) and returns its new handle. receipt_handle is ALWAYS filled:
// the new one on success, the request's on failure.
func (s *MessagingService) ChangeInvisibleDuration(ctx context.Context, req *v2.ChangeInvisibleDurationRequest) (*v2.ChangeInvisibleDurationResponse, error) {
	old := req.GetReceiptHandle()
	fail := func(err error) (*v2.ChangeInvisibleDurationResponse, error) {
		return &v2.ChangeInvisibleDurationResponse{Status: statusOf(ctx, s.log, err), ReceiptHandle: old}, nil
	}
	topic, group, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return fail(err)
	}
	d := req.GetInvisibleDuration()
	if d == nil || d.CheckValid() != nil {
		return fail(mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible_duration is required (between 0 and %s)", broker.MaxInvisible))
	}
	dur := d.AsDuration()
	if dur < 0 || dur > broker.MaxInvisible {
		return fail(mqerr.Errorf(mqerr.KindIllegalInvisibleTime, "invisible_duration %s is outside [0, %s]", dur, broker.MaxInvisible))
	}
	if old == "" {
		return &v2.ChangeInvisibleDurationResponse{Status: statusNoHandle}, nil
	}
	t, err := s.at(ctx, s.handleGroup(ctx, topic, old))
	if err != nil {
		return fail(err)
	}
	if t.conn != nil {
		resp := new(v2.ChangeInvisibleDurationResponse)
		if err := t.invoke(ctx, v2.MessagingService_ChangeInvisibleDuration_FullMethodName, req, resp); err != nil {
			return fail(err)
		}
		return resp, nil
	}
	var h string
	if lb, ok := t.b.(LiteBroker); ok && req.GetSuspend() {
		h, err = lb.ChangeInvisibleSuspend(ctx, group, topic, old, dur, true)
	} else {
		h, err = t.b.ChangeInvisible(ctx, group, topic, old, dur)
	}
	if err != nil {
		return fail(err)
	}
	if h == "" {
		h = old
	}
	return &v2.ChangeInvisibleDurationResponse{Status: statusOK, ReceiptHandle: h}, nil
}

// ForwardMessageToDeadLetterQueue moves a delivery to %DLQ%<group>;
// the broker makes the copy and the ack one step.
func (s *MessagingService) ForwardMessageToDeadLetterQueue(ctx context.Context, req *v2.ForwardMessageToDeadLetterQueueRequest) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
	topic, group, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if req.GetReceiptHandle() == "" {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusNoHandle}, nil
	}
	t, err := s.at(ctx, s.handleGroup(ctx, topic, req.GetReceiptHandle()))
	if err != nil {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.ForwardMessageToDeadLetterQueueResponse)
		if err := t.invoke(ctx, v2.MessagingService_ForwardMessageToDeadLetterQueue_FullMethodName, req, resp); err != nil {
			return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	err = t.b.ForwardToDLQ(ctx, group, topic, req.GetReceiptHandle())
	return &v2.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(ctx, s.log, err)}, nil
}
