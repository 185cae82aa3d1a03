package admin

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// MaxLookupBody is how much of each body LookupMessage returns.
const MaxLookupBody = 64 << 10

// inFlightBody is how much of its body an oldest in-flight message shows.
const inFlightBody = 4 << 10

func (s *Service) DescribeTopic(ctx context.Context, req *adminv1.DescribeTopicRequest) (*adminv1.DescribeTopicResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	if err := s.check(ctx, auth.Access{Route: req.GetName()}); err != nil {
		return nil, err
	}
	if s.opts.Groups != nil {
		return inGroups(ctx, s, req, adminv1.AdminService_DescribeTopic_FullMethodName, s.describeTopicAt, mergeTopicDescriptions)
	}
	return s.describeTopicAt(ctx, s.b, req)
}

// describeTopicAt is DescribeTopic at broker b.
func (s *Service) describeTopicAt(ctx context.Context, b Broker, req *adminv1.DescribeTopicRequest) (*adminv1.DescribeTopicResponse, error) {
	d, err := b.DescribeTopic(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "topic", req.GetName())
	}
	out := &adminv1.DescribeTopicResponse{Topic: topicToV1(d.Topic), Messages: d.Messages}
	for _, q := range d.Queues {
		out.Queues = append(out.Queues, &adminv1.QueueOffsets{QueueId: q.QueueID, MinOffset: q.Min, MaxOffset: q.Max})
	}
	for _, g := range d.Groups {
		if s.sees(ctx, auth.Access{Group: g.Group}) {
			out.Groups = append(out.Groups, progressToV1(g))
		}
	}
	return out, nil
}

func (s *Service) DescribeGroup(ctx context.Context, req *adminv1.DescribeGroupRequest) (*adminv1.DescribeGroupResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if err := s.check(ctx, auth.Access{Group: req.GetName()}); err != nil {
		return nil, err
	}
	if s.opts.Groups != nil {
		return inGroups(ctx, s, req, adminv1.AdminService_DescribeGroup_FullMethodName, s.describeGroupAt, mergeGroupDescriptions)
	}
	return s.describeGroupAt(ctx, s.b, req)
}

// describeGroupAt is DescribeGroup at broker b.
func (s *Service) describeGroupAt(ctx context.Context, b Broker, req *adminv1.DescribeGroupRequest) (*adminv1.DescribeGroupResponse, error) {
	d, err := b.DescribeGroup(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "consumer group", req.GetName())
	}
	out := &adminv1.DescribeGroupResponse{Group: groupToV1(d.Group),
		DeadLetterQueue: &adminv1.DeadLetterQueue{Topic: d.DLQ.Topic, Exists: d.DLQ.Exists, Messages: d.DLQ.Messages}}
	for _, p := range d.Topics {
		if !s.sees(ctx, auth.Access{Route: p.Topic}) {
			continue
		}
		pv := progressToV1(p)
		if req.GetOldestInFlight() && p.InFlight+p.Held > 0 {
			m, ok, err := b.OldestInFlight(ctx, d.Group.Name, p.Topic)
			if err != nil {
				return nil, toStatus(err, "topic", p.Topic)
			}
			if ok {
				pv.OldestInFlight = &adminv1.InFlightMessage{Message: storedToV1(broker.FoundMessage{Delivered: m.Delivered}, inFlightBody),
					Deliveries: m.Deliveries, VisibleAt: timestamppb.New(m.VisibleAt), Held: m.Held}
			}
		}
		out.Topics = append(out.Topics, pv)
	}
	return out, nil
}

func (s *Service) LookupMessage(ctx context.Context, req *adminv1.LookupMessageRequest) (*adminv1.LookupMessageResponse, error) {
	if strings.TrimSpace(req.GetMessageId()) == "" && strings.TrimSpace(req.GetKey()) == "" {
		return nil, status.Error(codes.InvalidArgument, "a message id or a key is required")
	}
	if req.GetMax() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max %d is negative", req.GetMax())
	}
	if req.GetTopic() != "" {
		if err := s.check(ctx, auth.Access{Subscribe: req.GetTopic()}); err != nil {
			return nil, err
		}
	}
	br := broker.LookupRequest{Topic: req.GetTopic(), ID: req.GetMessageId(), Key: req.GetKey(), Max: int(req.GetMax())}
	if s.opts.Groups != nil {
		return s.lookupInGroups(ctx, req, br)
	}
	found, err := s.b.LookupMessage(ctx, br)
	if err != nil {
		return nil, lookupStatus(err, req)
	}
	out := &adminv1.LookupMessageResponse{Messages: make([]*adminv1.StoredMessage, 0, len(found))}
	for _, f := range found {
		if s.sees(ctx, auth.Access{Subscribe: f.Topic}) { // bodies are what consumers read
			out.Messages = append(out.Messages, storedToV1(f, MaxLookupBody))
		}
	}
	return out, nil
}

// lookupStatus is the status of a failed lookup.
func lookupStatus(err error, req *adminv1.LookupMessageRequest) error {
	what, name := "message lookup", ""
	if req.GetTopic() != "" {
		what, name = "topic", req.GetTopic()
	}
	return toStatus(err, what, name)
}

func progressToV1(p broker.GroupTopicProgress) *adminv1.GroupTopicProgress {
	out := &adminv1.GroupTopicProgress{Group: p.Group, Topic: p.Topic, Ready: p.Ready, InFlight: p.InFlight, Held: p.Held, Backlog: p.Backlog}
	for _, q := range p.Queues {
		out.Queues = append(out.Queues, &adminv1.GroupQueueProgress{QueueId: q.QueueID, ConsumedOffset: q.Consumed, MaxOffset: q.Max, Ready: q.Ready})
	}
	return out
}

// storedToV1 converts a stored message, its body cut at maxBody bytes.
func storedToV1(f broker.FoundMessage, maxBody int) *adminv1.StoredMessage {
	m := &adminv1.StoredMessage{
		Topic:              f.Topic,
		MessageId:          f.ID,
		Tag:                f.Tag,
		Keys:               f.Keys,
		Properties:         f.Properties,
		MessageGroup:       f.MessageGroup,
		BornHost:           f.BornHost,
		QueueId:            f.QueueID,
		QueueOffset:        f.QueueOffset,
		BodySize:           int32(len(f.Body)),
		State:              "STORED",
		ReconsumeTimes:     f.ReconsumeTimes,
		DlqOriginTopic:     f.DLQOriginTopic,
		DlqOriginMessageId: f.DLQOriginID,
	}
	if t := f.ActualType(); t != 0 {
		m.Type = t.String()
	}
	if f.Scheduled {
		m.State = "SCHEDULED"
	}
	m.Body = f.Body
	if len(m.Body) > maxBody {
		m.Body, m.BodyTruncated = m.Body[:maxBody], true
	}
	if !f.DeliveryTime.IsZero() {
		m.DeliveryTime = timestamppb.New(f.DeliveryTime)
	}
	if !f.BornTime.IsZero() && f.BornTime.UnixMilli() != 0 {
		m.BornTime = timestamppb.New(f.BornTime)
	}
	if !f.StoreTime.IsZero() {
		m.StoreTime = timestamppb.New(f.StoreTime)
	}
	for _, g := range f.Groups {
		gs := &adminv1.MessageGroupState{Group: g.Group, State: g.State, DeliveryAttempt: int32(g.Attempt)}
		if !g.Until.IsZero() {
			gs.InvisibleUntil = timestamppb.New(g.Until)
		}
		m.Groups = append(m.Groups, gs)
	}
	return m
}
