package restmessaging

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/auth"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
	"github.com/mqgate/mqgate/internal/clock"
)

// Broker is the part of the broker facade the service calls;
// *broker.Broker implements it.
type Broker interface {
	GetTopic(ctx context.Context, name string) (model.Topic, error)
	GetGroup(ctx context.Context, name string) (model.Group, error)
	Send(ctx context.Context, topic string, msgs []*model.Message, p model.Producer) ([]model.SendResult, error)
	Receive(ctx context.Context, req broker.ReceiveRequest) ([]*model.Delivered, error)
	Ack(ctx context.Context, group, topic string, handles []string) []error
	ChangeInvisible(ctx context.Context, group, topic, handle string, d time.Duration) (string, error)
	Release(ctx context.Context, group, topic string, handles []string) []error
}

var _ Broker = (*broker.Broker)(nil)

// Defaults and limits of a receive (documented in rest.proto).
const (
	DefaultMaxMessages = 16
	DefaultInvisible   = 30 * time.Second
	DefaultWait        = 5 * time.Second
	MaxWait            = 20 * time.Second
	// WaitReserve is kept between the end of a long poll and the caller's
	// deadline so the answer arrives in time.
	WaitReserve = 200 * time.Millisecond
)

// Config configures the service.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// Auth, when set, checks what each call touches against the user the
	// gRPC server's interceptor authenticated (nil: auth off).
	Auth *auth.Authenticator
	// Groups routes the messaging calls over a cluster's data groups
	// (groups.go); nil: the Broker serves them.
	Groups Groups
}

// Service implements restv1.MessagingServiceServer. It embeds the Unsafe
// interface, so an RPC added to rest.proto is a compile error until it is
// answered deliberately.
type Service struct {
	restv1.UnsafeMessagingServiceServer

	b      Broker
	clock  clock.Clock
	log    *slog.Logger
	ids    *idSource
	auth   *auth.Authenticator
	groups Groups
}

// New returns the service.
func New(cfg Config, b Broker) *Service {
	s := &Service{b: b, clock: cfg.Clock, log: cfg.Logger, ids: newIDSource(), auth: cfg.Auth, groups: cfg.Groups}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// allow checks what a call touches against the user the gRPC server
// authenticated (nothing when auth is off), counting and logging a
// refusal.
func (s *Service) allow(ctx context.Context, acc auth.Access) error {
	err := s.auth.Allow(ctx, acc)
	if err != nil {
		method, _ := grpc.Method(ctx)
		s.auth.Refused(ctx, s.log, auth.Refusal{Listener: "grpc", Peer: callerHost(ctx), Call: method, Authorization: true, Err: err})
	}
	return err
}

// Register adds the service to gs.
func (s *Service) Register(gs grpc.ServiceRegistrar) { restv1.RegisterMessagingServiceServer(gs, s) }
