package v2service

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// QueryRoute returns one READ_WRITE queue per queue of the topic, ids
// 0..N-1, on each broker routeBrokers names for the caller (one, except
// in a replica group). The answer is identical on every call for the same
// topic, access point and group membership: the Go client rebuilds its
// load balancers whenever a route differs.
//
// With several data groups, each queue is on the broker of the member
// leading its group (groupRoutes): clients send and receive straight at
// the member that serves it.
func (s *MessagingService) QueryRoute(ctx context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	key, err := checkTopic(req.GetTopic())
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if s.groups != nil {
		return s.groupRoute(ctx, req, key)
	}
	brs := s.routeBrokers(ctx, req.GetEndpoints())
	if brs == nil {
		return &v2.QueryRouteResponse{Status: statusNoEndpoint}, nil
	}
	t, err := s.topic(ctx, key)
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	perm := permissionOf(t.Perm)
	accept := acceptTypes(t.Type)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	qs := make([]*v2.MessageQueue, 0, len(brs)*int(t.Queues))
	for _, br := range brs {
		for i := range t.Queues {
			qs = append(qs, &v2.MessageQueue{Topic: topic, Id: i, Permission: perm, Broker: br, AcceptMessageTypes: accept})
		}
	}
	return &v2.QueryRouteResponse{Status: statusOK, MessageQueues: qs}, nil
}

// QueryAssignment tells a push consumer which queues to receive from.
// Every consumer of the group gets the same answer (POP needs no
// exclusive partitioning), identical on every call — the Go push consumer
// keys its process queues by the assignment's text and recreates them on
// any difference: for a non-FIFO group one assignment per broker of the
// route with queue id −1 ("any queue of this broker"); for a FIFO group
// one per readable queue id 0..N-1, spread over the route's brokers
// (ReceiveMessage then honours the id). No readable queue ⇒ FORBIDDEN.
//
// With several data groups a non-FIFO group gets one assignment per data
// group holding queues of the topic, at the member leading it, with queue
// id −1 − group (any queue of that group: assignmentQueue); a FIFO group
// each queue at the member leading its group.
func (s *MessagingService) QueryAssignment(ctx context.Context, req *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	topicKey, groupKey, err := checkTopicGroup(req.GetTopic(), req.GetGroup())
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.topic(ctx, topicKey)
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	g, err := s.group(ctx, groupKey)
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if !t.Perm.Readable() || t.Queues <= 0 {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log,
			mqerr.Errorf(mqerr.KindForbidden, "topic %q has no readable queue", req.GetTopic().GetName()))}, nil
	}
	if s.groups != nil {
		return s.groupAssignment(ctx, req, t, g)
	}
	brs := s.routeBrokers(ctx, req.GetEndpoints())
	if brs == nil {
		return &v2.QueryAssignmentResponse{Status: statusNoEndpoint}, nil
	}
	perm := permissionOf(t.Perm)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	if !g.FIFO {
		as := make([]*v2.Assignment, len(brs))
		for i, br := range brs {
			as[i] = &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: topic, Id: -1, Permission: perm, Broker: br}}
		}
		return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: as}, nil
	}
	as := make([]*v2.Assignment, t.Queues)
	for i := range as {
		as[i] = &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: topic, Id: int32(i), Permission: perm, Broker: brs[i%len(brs)]}}
	}
	return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: as}, nil
}

// groupRoute is QueryRoute with several data groups.
func (s *MessagingService) groupRoute(ctx context.Context, req *v2.QueryRouteRequest, key string) (*v2.QueryRouteResponse, error) {
	t, err := s.topic(ctx, key)
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	brs, err := s.groupRoutes(ctx)
	if err != nil {
		return &v2.QueryRouteResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	perm := permissionOf(t.Perm)
	accept := acceptTypes(t.Type)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	lite := t.Type == model.TopicLite
	qs := make([]*v2.MessageQueue, 0, int(t.Queues))
	for i := range t.Queues {
		br := brs[s.groups.Layout().GroupOf(t.Name, lite, i)]
		qs = append(qs, &v2.MessageQueue{Topic: topic, Id: i, Permission: perm, Broker: br, AcceptMessageTypes: accept})
	}
	return &v2.QueryRouteResponse{Status: statusOK, MessageQueues: qs}, nil
}

// groupAssignment is QueryAssignment with several data groups.
func (s *MessagingService) groupAssignment(ctx context.Context, req *v2.QueryAssignmentRequest, t model.Topic, g model.Group) (*v2.QueryAssignmentResponse, error) {
	brs, err := s.groupRoutes(ctx)
	if err != nil {
		return &v2.QueryAssignmentResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	perm := permissionOf(t.Perm)
	topic := &v2.Resource{ResourceNamespace: req.GetTopic().GetResourceNamespace(), Name: req.GetTopic().GetName()}
	lite := t.Type == model.TopicLite
	var as []*v2.Assignment
	if g.FIFO {
		for i := range t.Queues {
			br := brs[s.groups.Layout().GroupOf(t.Name, lite, i)]
			as = append(as, &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: topic, Id: i, Permission: perm, Broker: br}})
		}
		return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: as}, nil
	}
	for grp, br := range brs {
		if s.groups.Layout().Of(grp).Count(t.Name, lite, t.Queues) == 0 {
			continue
		}
		as = append(as, &v2.Assignment{MessageQueue: &v2.MessageQueue{Topic: topic, Id: assignmentQueue(grp), Permission: perm, Broker: br}})
	}
	return &v2.QueryAssignmentResponse{Status: statusOK, Assignments: as}, nil
}

// RouteMember is a replica group's member that routes may name: ID tells
// it apart (its broker is named "<broker name>-<ID>" where a route has
// one broker per member), Addr is the host:port of its gRPC listener.
type RouteMember struct {
	ID   uint64
	Addr string
}

// routeBrokers are the brokers of the routes and assignments answered to
// ctx's client; nil when no address is usable.
//
// Outside a replica group: one broker, named BrokerName, whose endpoints
// are routeEndpoints'. In a replica group (RouteMembers set and naming
// some member), every member it names, in one of two shapes chosen by
// what the client does with a route (docs/compatibility.md):
//
//   - the Go client (x-mq-language GO): one broker, named BrokerName,
//     whose endpoints list every member. Its channel to a list of IP
//     addresses moves to the next one when the one it uses goes away,
//     within the same call's retries, and it cannot move otherwise: its
//     producer's retries of a send stay on the queue (so the broker) the
//     first attempt chose, and each attempt at a broker whose only
//     address is down waits out its 5 s dial timeout.
//   - every other client: one broker per member, "<BrokerName>-<ID>",
//     each with that one address and every queue of the topic. Node.js
//     joins the addresses of one endpoint into a single host name that
//     cannot resolve, C# dials only the first, and Java, Python and C++
//     refuse several host names in one endpoint; several brokers of one
//     address each is what every client is built for (an upstream
//     cluster of broker sets), and their producers move a failed send to
//     another broker.
func (s *MessagingService) routeBrokers(ctx context.Context, req *v2.Endpoints) []*v2.Broker {
	if s.routeMembers != nil {
		type named struct {
			id uint64
			ep *v2.Endpoints
		}
		var ms []named
		for _, m := range s.routeMembers(ctx) {
			if ep, err := endpointsFromHostPort(m.Addr, 0); err == nil {
				ms = append(ms, named{m.ID, ep})
			}
		}
		switch {
		case len(ms) == 0:
		case takesAddressLists(ctx):
			all := &v2.Endpoints{Scheme: ms[0].ep.Scheme}
			for _, m := range ms {
				all.Addresses = append(all.Addresses, m.ep.Addresses...)
			}
			return []*v2.Broker{{Name: s.brokerName, Id: 0, Endpoints: all}}
		default:
			brs := make([]*v2.Broker, len(ms))
			for i, m := range ms {
				brs[i] = &v2.Broker{Name: s.brokerName + "-" + strconv.FormatUint(m.id, 10), Id: 0, Endpoints: m.ep}
			}
			return brs
		}
	}
	if ep := s.routeEndpoints(ctx, req); ep != nil {
		return []*v2.Broker{{Name: s.brokerName, Id: 0, Endpoints: ep}}
	}
	return nil
}

// takesAddressLists reports whether ctx's client is one that routes give
// several addresses in one endpoint (routeBrokers).
func takesAddressLists(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, "x-mq-language")
	return len(v) == 1 && v[0] == "GO"
}

// routeEndpoints picks what clients of a single node should dial:
// --advertise-addr when set; else the access point the client sent, echoed exactly (survives
// NAT and port mapping); else the :authority of this call (the host:port
// the client dialed, e.g. through Envoy); nil when none is usable.
func (s *MessagingService) routeEndpoints(ctx context.Context, req *v2.Endpoints) *v2.Endpoints {
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
		for _, t := range []model.TopicType{model.TopicNormal, model.TopicFIFO, model.TopicDelay, model.TopicTransaction, model.TopicMixed, model.TopicLite} {
			for _, mt := range t.AcceptedTypes() {
				m[t] = append(m[t], messageTypeToV2(mt))
			}
		}
		return m
	}()
	acceptUnspecified = []v2.MessageType{v2.MessageType_MESSAGE_TYPE_UNSPECIFIED}
)
