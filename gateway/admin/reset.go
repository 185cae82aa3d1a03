package admin

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/mqerr"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// ResetOffset moves a group's position in a topic (broker.ResetOffset).
// The wire names the target as a oneof (a time or a position); the broker
// takes it as a broker.ResetTo, with the time for ResetToTime only.
func (s *Service) ResetOffset(ctx context.Context, req *adminv1.ResetOffsetRequest) (*adminv1.ResetOffsetResponse, error) {
	group, topic := req.GetGroup(), req.GetTopic()
	if strings.TrimSpace(group) == "" {
		return nil, status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if strings.TrimSpace(topic) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	r := broker.ResetOffsetRequest{Group: group, Topic: topic}
	if req.QueueId != nil {
		q := req.GetQueueId()
		r.Queue = &q
	}
	switch to := req.GetTo().(type) {
	case *adminv1.ResetOffsetRequest_Offset:
		if req.QueueId == nil {
			return nil, status.Errorf(codes.InvalidArgument, "consumer group %q in topic %q: a reset to an offset needs queue_id", group, topic)
		}
		r.To, r.Offset = broker.ResetToOffset, to.Offset
	case *adminv1.ResetOffsetRequest_Time:
		// CheckValid also refuses a nil time (the oneof set to an empty
		// wrapper) and seconds outside years 1 to 9999.
		if err := to.Time.CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "consumer group %q in topic %q: time: %v", group, topic, err)
		}
		r.To, r.Time = broker.ResetToTime, to.Time.AsTime()
	case *adminv1.ResetOffsetRequest_Position:
		switch to.Position {
		case adminv1.ResetPosition_RESET_POSITION_EARLIEST:
			r.To = broker.ResetToEarliest
		case adminv1.ResetPosition_RESET_POSITION_LATEST:
			r.To = broker.ResetToLatest
		default:
			return nil, status.Errorf(codes.InvalidArgument, "consumer group %q in topic %q: position %s: want %s or %s (or a time)",
				group, topic, to.Position, adminv1.ResetPosition_RESET_POSITION_EARLIEST, adminv1.ResetPosition_RESET_POSITION_LATEST)
		}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "consumer group %q in topic %q: where to reset is required: a time, a position (%s or %s), or an offset with queue_id",
			group, topic, adminv1.ResetPosition_RESET_POSITION_EARLIEST, adminv1.ResetPosition_RESET_POSITION_LATEST)
	}
	if s.opts.Groups != nil {
		if req.QueueId != nil {
			b, conn, err := s.opts.Groups.Queue(ctx, topic, req.GetQueueId())
			if err != nil {
				return nil, toStatus(err, "topic", topic)
			}
			if b == nil {
				return forwardTo[adminv1.ResetOffsetResponse](ctx, conn, adminv1.AdminService_ResetOffset_FullMethodName, req)
			}
			return resetAt(ctx, b, r)
		}
		return inGroups(ctx, s, req, adminv1.AdminService_ResetOffset_FullMethodName,
			func(ctx context.Context, b Broker, _ *adminv1.ResetOffsetRequest) (*adminv1.ResetOffsetResponse, error) {
				return resetAt(ctx, b, r)
			}, mergeResets)
	}
	return resetAt(ctx, s.b, r)
}

// resetAt is ResetOffset at broker b.
func resetAt(ctx context.Context, b Broker, r broker.ResetOffsetRequest) (*adminv1.ResetOffsetResponse, error) {
	group, topic := r.Group, r.Topic
	moved, err := b.ResetOffset(ctx, r)
	if err != nil {
		// Name what the error is about: the topic when it is the one
		// missing, else the group (whose position it is).
		what, name := "consumer group", group
		if mqerr.KindOf(err) == mqerr.KindTopicNotFound {
			what, name = "topic", topic
		}
		return nil, toStatus(err, what, name)
	}
	out := &adminv1.ResetOffsetResponse{Queues: make([]*adminv1.QueueReset, 0, len(moved))}
	for _, q := range moved {
		out.Queues = append(out.Queues, &adminv1.QueueReset{QueueId: q.QueueID, PreviousOffset: q.Previous, Offset: q.Offset})
	}
	// The API answers by queue id; the broker does not promise an order.
	slices.SortFunc(out.Queues, func(a, b *adminv1.QueueReset) int { return cmp.Compare(a.QueueId, b.QueueId) })
	return out, nil
}
