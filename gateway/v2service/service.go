package v2service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/clock"
)

// Broker is the part of the broker facade the MessagingService calls.
// *broker.Broker implements it; tests of edge-only behaviour (validation
// order, frame shapes) use fakes.
type Broker interface {
	Topic(ctx context.Context, name string) (model.Topic, error)
	Group(ctx context.Context, name string) (model.Group, error)
	Send(ctx context.Context, topic string, msgs []*model.Message, p model.Producer) ([]model.SendResult, error)
	Receive(ctx context.Context, req broker.ReceiveRequest) ([]*model.Delivered, error)
	Ack(ctx context.Context, group, topic string, handles []string) []error
	ChangeInvisible(ctx context.Context, group, topic, handle string, d time.Duration) (string, error)
	ForwardToDLQ(ctx context.Context, group, topic, handle string) error
	Release(ctx context.Context, group, topic string, handles []string) []error
	// Limits are the message limits, reported to producers in Settings.
	Limits() produce.Limits
	EndTransaction(ctx context.Context, topic, messageID, transactionID string, r txn.Resolution) error
	Recall(ctx context.Context, topic, handle string) (string, error)
	Pull(ctx context.Context, group, topic string, queue int32, from int64, max int, f model.Filter, wait time.Duration) (offset.PullResult, error)
	UpdateOffset(ctx context.Context, group, topic string, queue int32, off int64) error
	GetOffset(ctx context.Context, group, topic string, queue int32) (int64, error)
	QueryOffset(ctx context.Context, topic string, queue int32, p offset.Policy, at time.Time) (int64, error)
}

var _ Broker = (*broker.Broker)(nil)

// Protocol constants the server reports or enforces.
const (
	DefaultBrokerName = "mqgate-0"
	ReceiveBatchSize  = 32
	MinLongPolling    = 5 * time.Second
	MaxLongPolling    = 20 * time.Second
	// PollReserve is kept between the end of a long poll and the client's
	// deadline so the answer arrives in time.
	PollReserve = 200 * time.Millisecond
	// DefaultRequestTimeout is assumed for clients that sent no Settings.
	DefaultRequestTimeout = 3 * time.Second
)

// ServiceConfig configures the MessagingService.
type ServiceConfig struct {
	// BrokerName is the broker name in routes (default "mqgate-0").
	BrokerName string
	// AdvertiseAddr is the host:port routes tell clients to dial; empty
	// means the access point the client sent, else the :authority it
	// dialed.
	AdvertiseAddr string
	// RouteMembers, when set, lists the replica group's members that
	// routes tell clients to dial, in a stable order (routeBrokers says
	// how); when it returns none, AdvertiseAddr and the rules after it
	// apply.
	RouteMembers func(ctx context.Context) []RouteMember
	// Groups, when set, is the cluster's data groups the requests are
	// routed over (groups.go); the Broker then serves only what concerns
	// no group (limits, lite settings).
	Groups Groups
	Clock  clock.Clock
	Logger *slog.Logger
}

// MessagingService answers apache.rocketmq.v2.MessagingService. It embeds
// the Unsafe interface, so an RPC added to the proto is a compile error
// until it is answered deliberately (unsupported.go lists the ones mqgate
// does not serve).
type MessagingService struct {
	v2.UnsafeMessagingServiceServer

	b            Broker
	sess         *session.Registry
	gate         *admission.Gate
	clock        clock.Clock
	log          *slog.Logger
	brokerName   string
	advertised   *v2.Endpoints // nil: derive per call
	routeMembers func(ctx context.Context) []RouteMember
	groups       Groups
	steered      steered
	// forwards counts the requests passed on to another member
	// (Forwarded).
	forwards atomic.Int64
}

// NewMessagingService builds the service. Register it on a grpc.Server
// created with Options.Sessions set to the same registry.
func NewMessagingService(cfg ServiceConfig, b Broker, sessions *session.Registry, gate *admission.Gate) (*MessagingService, error) {
	s := &MessagingService{b: b, sess: sessions, gate: gate, clock: cfg.Clock, log: cfg.Logger, brokerName: cfg.BrokerName, routeMembers: cfg.RouteMembers,
		groups: cfg.Groups}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.brokerName == "" {
		s.brokerName = DefaultBrokerName
	}
	if s.gate == nil {
		s.gate = admission.NewGate()
	}
	brokers := []Broker{b}
	if s.groups != nil {
		brokers = s.groups.Brokers()
	}
	for _, b := range brokers {
		if lb, ok := b.(LiteBroker); ok {
			lb.SetLiteNotifier(s.notifyUnsubscribeLite)
		}
	}
	if s.sess == nil {
		s.sess = session.New(session.Config{Clock: s.clock, Logger: s.log})
	}
	if cfg.AdvertiseAddr != "" {
		ep, err := endpointsFromHostPort(cfg.AdvertiseAddr, 0)
		if err != nil {
			return nil, fmt.Errorf("advertise-addr: %w", err)
		}
		s.advertised = ep
	}
	return s, nil
}

// Register adds the service to gs.
func (s *MessagingService) Register(gs grpc.ServiceRegistrar) {
	v2.RegisterMessagingServiceServer(gs, s)
}

// endpointsFromHostPort parses host:port into Endpoints with the scheme
// matching the host. defPort is used when addr has no port.
func endpointsFromHostPort(addr string, defPort int) (*v2.Endpoints, error) {
	host, portStr, err := net.SplitHostPort(addr)
	port := defPort
	if err != nil {
		// No port: the whole thing is the host.
		host, err = addr, nil
	} else {
		p, perr := strconv.Atoi(portStr)
		if perr != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("bad port in %q", addr)
		}
		port = p
	}
	if host == "" || port <= 0 {
		return nil, fmt.Errorf("%q is not host:port", addr)
	}
	return &v2.Endpoints{Scheme: schemeOf(host), Addresses: []*v2.Address{{Host: host, Port: int32(port)}}}, nil
}

func schemeOf(host string) v2.AddressScheme {
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return v2.AddressScheme_DOMAIN_NAME
	case ip.To4() != nil:
		return v2.AddressScheme_IPv4
	default:
		return v2.AddressScheme_IPv6
	}
}
