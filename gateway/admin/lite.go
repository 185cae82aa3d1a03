package admin

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/lite"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// LiteLister lists a LITE topic's lite topics; *broker.Broker implements
// it. A Broker that does not answers ListLiteTopics with Unimplemented.
type LiteLister interface {
	LiteTopics(ctx context.Context, topic, prefix, after string, limit int) (lite.Page, error)
}

var _ LiteLister = (*broker.Broker)(nil)

// maxLitePage bounds one ListLiteTopics page.
const maxLitePage = 1000

func (s *Service) ListLiteTopics(ctx context.Context, req *adminv1.ListLiteTopicsRequest) (*adminv1.ListLiteTopicsResponse, error) {
	l, ok := s.b.(LiteLister)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this server serves no lite topics")
	}
	if strings.TrimSpace(req.GetTopic()) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	size := int(req.GetPageSize())
	if size < 0 || size > maxLitePage {
		return nil, status.Errorf(codes.InvalidArgument, "page_size %d is outside 0..%d", size, maxLitePage)
	}
	page, err := l.LiteTopics(ctx, req.GetTopic(), req.GetPrefix(), req.GetPageToken(), size)
	if err != nil {
		return nil, toStatus(err, "topic", req.GetTopic())
	}
	out := &adminv1.ListLiteTopicsResponse{Total: int64(page.Total), NextPageToken: page.Next}
	for _, in := range page.Topics {
		lt := &adminv1.LiteTopic{Name: in.Name, Queue: in.Queue, MinOffset: in.MinOffset, MaxOffset: in.MaxOffset,
			LastStored: timestamppb.New(in.LastStored), Subscribers: in.Subscribers}
		if !in.ExpiresAt.IsZero() {
			lt.ExpireTime = timestamppb.New(in.ExpiresAt)
		}
		for _, g := range in.Groups {
			lt.Groups = append(lt.Groups, &adminv1.LiteTopicGroup{Group: g.Group, ConsumedOffset: g.Consumed, Ready: g.Ready, InFlight: g.InFlight})
		}
		out.LiteTopics = append(out.LiteTopics, lt)
	}
	return out, nil
}
