package admin

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/errcodes"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// Broker is the part of the broker facade the admin service uses;
// *broker.Broker implements it.
type Broker interface {
	CreateTopic(ctx context.Context, t model.Topic) (model.Topic, error)
	GetTopic(ctx context.Context, name string) (model.Topic, error)
	ListTopics(ctx context.Context) ([]model.Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	CreateGroup(ctx context.Context, g model.Group) (model.Group, error)
	GetGroup(ctx context.Context, name string) (model.Group, error)
	ListGroups(ctx context.Context) ([]model.Group, error)
	DeleteGroup(ctx context.Context, name string) error
	// ResetOffset moves a group's position in a topic (reset.go).
	ResetOffset(ctx context.Context, req broker.ResetOffsetRequest) ([]broker.QueueReset, error)
	// DeadLetters and RedriveDeadLetters list and redrive a group's dead
	// letters (deadletter.go).
	DeadLetters(ctx context.Context, group string, max int) (broker.DeadLetterPage, error)
	RedriveDeadLetters(ctx context.Context, group string, max int) (broker.RedriveResult, error)
	Inspector
}

// Inspector is the read-only part of the facade behind DescribeTopic,
// DescribeGroup, LookupMessage (inspect.go), BrowseMessages and GetStats
// (views.go).
type Inspector interface {
	DescribeTopic(ctx context.Context, name string) (broker.TopicDescription, error)
	DescribeGroup(ctx context.Context, name string) (broker.GroupDescription, error)
	LookupMessage(ctx context.Context, req broker.LookupRequest) ([]broker.FoundMessage, error)
	BrowseQueue(ctx context.Context, req broker.BrowseRequest) (broker.BrowsePage, error)
	TopicTraffic() []broker.TopicTraffic
	DeliveredCounts() map[broker.GroupTopic]int64
	StoredMessages(ctx context.Context, topic string) (int64, error)
	Started() time.Time
	OldestInFlight(ctx context.Context, group, topic string) (broker.InFlightMessage, bool, error)
}

var _ Broker = (*broker.Broker)(nil)

// Options are the service's sources beyond the broker.
type Options struct {
	// Auth is the listeners' authenticator (nil: auth off): the views
	// (OpenToUsers) answer a user who is not an admin with what it may
	// see only (access.go).
	Auth *auth.Authenticator
	// Clients lists the connected clients (ListClients); nil: none.
	Clients func() []Client
	// Cluster reports and moves the cluster's leadership
	// (GetClusterStatus, TransferLeadership); nil: a single node.
	Cluster Cluster
	// Groups routes message lookups and browsing over a cluster's data
	// groups (groups.go); nil: the Broker holds every queue.
	Groups Groups
}

// Service implements adminv1.AdminServiceServer. It embeds the Unsafe
// interface so a new admin RPC is a compile error until answered.
type Service struct {
	adminv1.UnsafeAdminServiceServer
	b    Broker
	opts Options
}

// New returns the service.
func New(b Broker, o Options) *Service { return &Service{b: b, opts: o} }

// Register adds the service to gs.
func (s *Service) Register(gs grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(gs, s) }

func (s *Service) CreateTopic(ctx context.Context, req *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
	name := req.GetName()
	if strings.TrimSpace(name) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	typ, err := model.ParseTopicType(req.GetType())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "topic %q: %v", name, err)
	}
	if req.GetQueues() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "topic %q: queue count %d is negative", name, req.GetQueues())
	}
	mt := model.Topic{Name: name, Type: typ, Queues: req.GetQueues(), Perm: model.PermReadWrite}
	if d := req.GetLiteTtl(); d != nil {
		if typ != model.TopicLite {
			return nil, status.Errorf(codes.InvalidArgument, "topic %q: lite_ttl is for LITE topics only", name)
		}
		if d.CheckValid() != nil || d.AsDuration() == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "topic %q: lite_ttl must be a non-zero duration (negative: forever)", name)
		}
		mt.LiteTTL = d.AsDuration()
	}
	t, err := s.b.CreateTopic(ctx, mt)
	if err != nil {
		return nil, toStatus(err, "topic", name)
	}
	return &adminv1.CreateTopicResponse{Topic: topicToV1(t)}, nil
}

func (s *Service) GetTopic(ctx context.Context, req *adminv1.GetTopicRequest) (*adminv1.GetTopicResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	if err := s.check(ctx, auth.Access{Route: req.GetName()}); err != nil {
		return nil, err
	}
	t, err := s.b.GetTopic(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "topic", req.GetName())
	}
	return &adminv1.GetTopicResponse{Topic: topicToV1(t)}, nil
}

func (s *Service) ListTopics(ctx context.Context, _ *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
	ts, err := s.b.ListTopics(ctx)
	if err != nil {
		return nil, toStatus(err, "topics", "")
	}
	out := make([]*adminv1.Topic, 0, len(ts))
	for _, t := range ts {
		if s.sees(ctx, auth.Access{Route: t.Name}) {
			out = append(out, topicToV1(t))
		}
	}
	return &adminv1.ListTopicsResponse{Topics: out}, nil
}

func (s *Service) DeleteTopic(ctx context.Context, req *adminv1.DeleteTopicRequest) (*adminv1.DeleteTopicResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "topic name is required")
	}
	if err := s.b.DeleteTopic(ctx, req.GetName()); err != nil {
		return nil, toStatus(err, "topic", req.GetName())
	}
	return &adminv1.DeleteTopicResponse{}, nil
}

func (s *Service) CreateGroup(ctx context.Context, req *adminv1.CreateGroupRequest) (*adminv1.CreateGroupResponse, error) {
	name := req.GetName()
	if strings.TrimSpace(name) == "" {
		return nil, status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if req.GetMaxDeliveryAttempts() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "consumer group %q: max delivery attempts %d is negative", name, req.GetMaxDeliveryAttempts())
	}
	retry, err := model.ParseRetryPolicy(req.GetRetryPolicy())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "consumer group %q: %v", name, err)
	}
	g, err := s.b.CreateGroup(ctx, model.Group{Name: name, FIFO: req.GetFifo(), MaxDeliveryAttempts: req.GetMaxDeliveryAttempts(), Retry: retry})
	if err != nil {
		return nil, toStatus(err, "consumer group", name)
	}
	return &adminv1.CreateGroupResponse{Group: groupToV1(g)}, nil
}

func (s *Service) GetGroup(ctx context.Context, req *adminv1.GetGroupRequest) (*adminv1.GetGroupResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if err := s.check(ctx, auth.Access{Group: req.GetName()}); err != nil {
		return nil, err
	}
	g, err := s.b.GetGroup(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "consumer group", req.GetName())
	}
	return &adminv1.GetGroupResponse{Group: groupToV1(g)}, nil
}

func (s *Service) ListGroups(ctx context.Context, _ *adminv1.ListGroupsRequest) (*adminv1.ListGroupsResponse, error) {
	gs, err := s.b.ListGroups(ctx)
	if err != nil {
		return nil, toStatus(err, "consumer groups", "")
	}
	out := make([]*adminv1.Group, 0, len(gs))
	for _, g := range gs {
		if s.sees(ctx, auth.Access{Group: g.Name}) {
			out = append(out, groupToV1(g))
		}
	}
	return &adminv1.ListGroupsResponse{Groups: out}, nil
}

func (s *Service) DeleteGroup(ctx context.Context, req *adminv1.DeleteGroupRequest) (*adminv1.DeleteGroupResponse, error) {
	if strings.TrimSpace(req.GetName()) == "" {
		return nil, status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if err := s.b.DeleteGroup(ctx, req.GetName()); err != nil {
		return nil, toStatus(err, "consumer group", req.GetName())
	}
	return &adminv1.DeleteGroupResponse{}, nil
}

func topicToV1(t model.Topic) *adminv1.Topic {
	out := &adminv1.Topic{Name: t.Name, Type: t.Type.String(), Queues: t.Queues, Permission: t.Perm.String()}
	if !t.CreateTime.IsZero() {
		out.CreateTime = timestamppb.New(t.CreateTime)
	}
	if t.Type == model.TopicLite {
		ttl := t.LiteExpiry()
		if ttl == 0 {
			ttl = -1
		}
		out.LiteTtl = durationpb.New(ttl)
	}
	return out
}

func groupToV1(g model.Group) *adminv1.Group {
	out := &adminv1.Group{Name: g.Name, Fifo: g.FIFO, MaxDeliveryAttempts: g.MaxDeliveryAttempts, RetryPolicy: g.Retry.Kind.String()}
	if !g.CreateTime.IsZero() {
		out.CreateTime = timestamppb.New(g.CreateTime)
	}
	return out
}

// toStatus converts a broker error into a gRPC status whose message names
// the resource (what, name). The code comes from gateway/errcodes's table,
// the one every gRPC edge maps error kinds through.
func toStatus(err error, what, name string) error {
	code := codes.Internal
	if m, ok := errcodes.Of(mqerr.KindOf(err)); ok {
		code = m.GRPC
	}
	msg := mqerr.Message(err)
	if name != "" && !strings.Contains(msg, name) {
		msg = what + " " + quote(name) + ": " + msg
	} else if name == "" && !strings.Contains(msg, what) {
		msg = what + ": " + msg
	}
	return status.Error(code, msg)
}

func quote(s string) string { return `"` + s + `"` }
