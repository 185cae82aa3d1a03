package v2service

import (
	"context"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// QueryRoute returns one READ_WRITE queue per queue of the topic, ids
// 0..N-1, all on broker {name, id 0, endpoints}. The answer is
// identical on every call for the same topic and access point: the Go
// client rebuilds its load balancers whenever a route differs.
func (s *MessagingService) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	key, err := checkTopic(req.GetTopic())
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	ep := s.routeEndpoints(ctx, req.GetEndpoints())
	if ep == nil {
		return &v2.QueryRouteResponse{Status: statusNoEndpoint}, nil
	}
	t, err := s.b.Topic(ctx, key)
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	br := &v2.Broker{Name: s.brokerName, Id: 0, Endpoints: ep}
	perm := permissionOf(t.Perm)
	accept := acceptTypes(t.Type)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	qs := make([]*v2.MessageQueue, t.Queues)
	for i := range qs {
		qs[i] = &v2.MessageQueue{Topic: topic, Id: int32(i), Permission: perm, Broker: br, AcceptMessageTypes: accept}
	}
	return &v2.QueryRouteResponse{Status: statusOK, MessageQueues: qs}, nil
}

// QueryAssignment tells a push consumer which queues to receive from.
// Every consumer of the group gets the same answer (POP needs no
// exclusive partitioning), identical on every call — the Go push consumer
// keys its process queues by the assignment's text and recreates them on
// any difference: for a non-FIFO group one assignment with queue id −1
// ("any queue of this broker"); for a FIFO group one per readable queue
// id 0..N-1 (ReceiveMessage then honours the id). No readable queue ⇒
// FORBIDDEN.
func (s *MessagingService) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	topicKey, groupKey, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.b.Topic(ctx, topicKey)
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	g, err := s.b.Group(ctx, groupKey)
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if !t.Perm.Readable() || t.Queues <= 0 {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log,
			mqerr.Errorf(mqerr.KindForbidden, "topic %q has no readable queue", req.GetTopic().GetName()))}, nil
	}
	ep := s.routeEndpoints(ctx, req.GetEndpoints())
	if ep == nil {
		return &v2.QueryAssignmentResponse{Status: statusNoEndpoint}, nil
	}
	br := &v2.Broker{Name: s.brokerName, Id: 0, Endpoints: ep}
	perm := permissionOf(t.Perm)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	if !g.FIFO {
		return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: []*v2.Assignment{
			{MessageQueue: &v2.MessageQueue{Topic: topic, Id: -1, Permission: perm, Broker: br}},
		}}, nil
	}
	as := make([]*v2.Assignment, t.Queues)
	for i := range as {
		as[i] = &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: topic, Id: int32(i), Permission: perm, Broker: br}}
	}
	return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: as}, nil
}

// routeEndpoints picks what clients should dial: --advertise-addr when
// set; else the access point the client sent, echoed exactly (survives
// NAT and port mapping); else the :authority of this call (the host:port
// the client dialed, e.g. through Envoy); nil when none is usable.
func (s *MessagingService) routeEndpoints(ctx context.Context, req *v2.Endpoints) *v2.Endpoints {
	if s.routeAddrs != nil {
		var out *v2.Endpoints
		for _, a := range s.routeAddrs(ctx) {
			ep, err := endpointsFromHostPort(a, 0)
			if err != nil {
				continue
			}
			if out == nil {
				out = &v2.Endpoints{Scheme: ep.Scheme}
			}
			out.Addresses = append(out.Addresses, ep.Addresses...)
		}
		if out != nil {
			return out
		}
	}
	if s.advertised != nil {
		return s.advertised
	}
	if addrs := req.GetAddresses(); len(addrs) > 0 && addrs[0].GetHost() != "" && addrs[0].GetPort() > 0 {
		out := &v2.Endpoints{Scheme: req.GetScheme(), Addresses: make([]*v2.Address, 0, len(addrs))}
		for _, a := range addrs {
			if a.GetHost() != "" && a.GetPort() > 0 {
				out.Addresses = append(out.Addresses, &v2.Address{Host: a.GetHost(), Port: a.GetPort()})
			}
		}
		if out.Scheme == v2.AddressScheme_ADDRESS_SCHEME_UNSPECIFIED {
			out.Scheme = schemeOf(out.Addresses[0].Host)
		}
		return out
	}
	localPort := 0
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		if ep, err := endpointsFromHostPort(p.LocalAddr.String(), 0); err == nil {
			localPort = int(ep.Addresses[0].Port)
		}
	}
	if vals := metadata.ValueFromIncomingContext(ctx, ":authority"); len(vals) > 0 {
		if ep, err := endpointsFromHostPort(vals[len(vals)-1], localPort); err == nil {
			return ep
		}
	}
	return nil
}

func permissionOf(p model.Perm) v2.Permission {
	switch p {
	case model.PermRead:
		return v2.Permission_READ
	case model.PermWrite:
		return v2.Permission_WRITE
	case model.PermNone:
		return v2.Permission_NONE
	}
	return v2.Permission_READ_WRITE
}

// acceptTypes is the route's accept_message_types for a topic type:
// what model.TopicType.Accepts admits (the rule the broker checks
// sends against), in v2 terms. The slices are built once, shared and never
// modified.
func acceptTypes(t model.TopicType) []v2.MessageType {
	if ts, ok := acceptByTopicType[t]; ok {
		return ts
	}
	return acceptUnspecified
}

var (
	acceptByTopicType = func() map[model.TopicType][]v2.MessageType {
		m := map[model.TopicType][]v2.MessageType{}
		for _, t := range []model.TopicType{model.TopicNormal, model.TopicFIFO, model.TopicDelay, model.TopicTransaction, model.TopicMixed} {
			for _, mt := range t.AcceptedTypes() {
				m[t] = append(m[t], messageTypeToV2(mt))
			}
		}
		return m
	}()
	acceptUnspecified = []v2.MessageType{v2.MessageType_MESSAGE_TYPE_UNSPECIFIED}
)
