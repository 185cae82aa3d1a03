package v2service

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Offset-based consumption: the consumer names the queue and
// the offset and keeps its own progress, optionally committed with
// UpdateOffset. None of these RPCs touches POP state.

// PullMessage reads one queue from an offset. Frames, then gRPC OK:
//   - messages found: status OK, one frame per message (no receipt
//     handle: pulled messages are not acknowledged), next_offset;
//   - nothing new or nothing matching the filter after the long poll:
//     status MESSAGE_NOT_FOUND, next_offset (past what was skipped);
//   - an offset outside the retained range: status ILLEGAL_OFFSET,
//     next_offset = the nearest valid offset (the queue's first retained
//     offset when below, its end when above);
//   - any other error: the status frame alone.
//
// Long polling follows ReceiveMessage: never past the
// client's deadline, not at all while draining.
func (s *MessagingService) PullMessage(req *v2.PullMessageRequest, stream grpc.ServerStreamingServer[v2.PullMessageResponse]) error {
	ctx := stream.Context()
	sendStatus := func(st *v2.Status) error {
		return stream.Send(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Status{Status: st}})
	}
	sendNext := func(n int64) error {
		return stream.Send(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_NextOffset{NextOffset: n}})
	}
	mq := req.GetMessageQueue()
	topic, group, err := checkTopicGroup(mq.GetTopic(), req.GetGroup())
	if err != nil {
		return sendStatus(statusOf(ctx, s.log, err))
	}
	filter, err := filterOf(req.GetFilterExpression())
	if err != nil {
		return sendStatus(statusOf(ctx, s.log, err))
	}
	t, err := s.at(ctx, s.queueGroup(ctx, topic, mq.GetId()))
	if err != nil {
		return sendStatus(statusOf(ctx, s.log, err))
	}
	if t.conn != nil {
		return forwardStream[v2.PullMessageResponse](ctx, t, v2.MessagingService_PullMessage_FullMethodName, req, stream.Send, func(err error) error {
			return sendStatus(statusOf(ctx, s.log, err))
		})
	}
	wait := s.pollWait(ctx, grpcserver.ClientID(ctx), req.GetLongPollingTimeout())
	res, err := t.b.Pull(ctx, group, topic, mq.GetId(), req.GetOffset(), batchOf(req.GetBatchSize()), filter, wait)
	switch {
	case err == nil:
	case mqerr.KindOf(err) == mqerr.KindMessageNotFound:
		if err := sendStatus(statusOf(ctx, s.log, err)); err != nil {
			return err
		}
		return sendNext(max(res.Next, req.GetOffset()))
	case mqerr.KindOf(err) == mqerr.KindIllegalOffset:
		next, qerr := nearestOffset(ctx, t.b, topic, mq.GetId(), req.GetOffset())
		if err := sendStatus(statusOf(ctx, s.log, err)); err != nil || qerr != nil {
			return err
		}
		return sendNext(next)
	default:
		return sendStatus(statusOf(ctx, s.log, err))
	}
	if err := sendStatus(statusOK); err != nil {
		return err
	}
	res2 := &v2.Resource{ResourceNamespace: mq.GetTopic().GetResourceNamespace(), Name: mq.GetTopic().GetName()}
	dk := digestFor(ctx)
	for _, d := range res.Messages {
		d.ReceiptHandle = ""
		if err := stream.Send(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Message{Message: deliveredToV2(d, res2, dk)}}); err != nil {
			return err
		}
	}
	return sendNext(res.Next)
}

// nearestOffset clamps off into the queue's retained range [first, end].
func nearestOffset(ctx context.Context, b Broker, topic string, queue int32, off int64) (int64, error) {
	lo, err := b.QueryOffset(ctx, topic, queue, offset.Beginning, time.Time{})
	if err != nil {
		return 0, err
	}
	hi, err := b.QueryOffset(ctx, topic, queue, offset.End, time.Time{})
	if err != nil {
		return 0, err
	}
	return min(max(off, lo), hi), nil
}

// UpdateOffset commits a group's offset for one queue; it must lie in the
// queue's retained range [first, end] (ILLEGAL_OFFSET otherwise).
func (s *MessagingService) UpdateOffset(ctx context.Context, req *v2.UpdateOffsetRequest) (*v2.UpdateOffsetResponse, error) {
	mq := req.GetMessageQueue()
	topic, group, err := checkTopicGroup(mq.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.UpdateOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.at(ctx, s.queueGroup(ctx, topic, mq.GetId()))
	if err != nil {
		return &v2.UpdateOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.UpdateOffsetResponse)
		if err := t.invoke(ctx, v2.MessagingService_UpdateOffset_FullMethodName, req, resp); err != nil {
			return &v2.UpdateOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	err = t.b.UpdateOffset(ctx, group, topic, mq.GetId(), req.GetOffset())
	return &v2.UpdateOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
}

// GetOffset returns a group's committed offset for one queue
// (OFFSET_NOT_FOUND when it never committed one).
func (s *MessagingService) GetOffset(ctx context.Context, req *v2.GetOffsetRequest) (*v2.GetOffsetResponse, error) {
	mq := req.GetMessageQueue()
	topic, group, err := checkTopicGroup(mq.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.GetOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.at(ctx, s.queueGroup(ctx, topic, mq.GetId()))
	if err != nil {
		return &v2.GetOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.GetOffsetResponse)
		if err := t.invoke(ctx, v2.MessagingService_GetOffset_FullMethodName, req, resp); err != nil {
			return &v2.GetOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	off, err := t.b.GetOffset(ctx, group, topic, mq.GetId())
	if err != nil {
		return &v2.GetOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	return &v2.GetOffsetResponse{Status: statusOK, Offset: off}, nil
}

// QueryOffset resolves a position in one queue: BEGINNING (first retained
// offset), END (the next offset to be written) or TIMESTAMP (the first
// offset stored at or after the timestamp, END when none is; a missing
// timestamp ⇒ BAD_REQUEST).
func (s *MessagingService) QueryOffset(ctx context.Context, req *v2.QueryOffsetRequest) (*v2.QueryOffsetResponse, error) {
	mq := req.GetMessageQueue()
	topic, err := checkTopic(mq.GetTopic())
	if err != nil {
		return &v2.QueryOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	p, at, err := queryPolicyToOffset(req.GetQueryOffsetPolicy(), req.Timestamp)
	if err != nil {
		return &v2.QueryOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.at(ctx, s.queueGroup(ctx, topic, mq.GetId()))
	if err != nil {
		return &v2.QueryOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.QueryOffsetResponse)
		if err := t.invoke(ctx, v2.MessagingService_QueryOffset_FullMethodName, req, resp); err != nil {
			return &v2.QueryOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	off, err := t.b.QueryOffset(ctx, topic, mq.GetId(), p, at)
	if err != nil {
		return &v2.QueryOffsetResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	return &v2.QueryOffsetResponse{Status: statusOK, Offset: off}, nil
}
