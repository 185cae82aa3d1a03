package node

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/admin"
	"github.com/mqgate/mqgate/gateway/forwarding"
	"github.com/mqgate/mqgate/gateway/restmessaging"
	"github.com/mqgate/mqgate/gateway/v2service"
)

// The admin API and the REST messaging API of a cluster of several data
// groups: topics and consumer groups are the catalog's, served by every
// member; the REST messaging calls (restGroups) and what the admin API
// reads or moves of stored messages (adminGroups) are routed over the
// groups, to their brokers here or to the members leading them.

// routedByGroups answers a call that reached the catalog's facade
// instead of a group's broker (a wiring mistake: the services route
// those calls over the groups).
func routedByGroups(what string) error {
	return mqerr.Errorf(mqerr.KindInternal, "%s with data groups goes to the groups' brokers", what)
}

// groupsAdmin is admin.Broker over the catalog and the data groups.
type groupsAdmin struct{ n *Node }

var _ admin.Broker = groupsAdmin{}

func (a groupsAdmin) CreateTopic(ctx context.Context, t model.Topic) (model.Topic, error) {
	return a.n.catalog.CreateTopic(ctx, t)
}

func (a groupsAdmin) GetTopic(ctx context.Context, name string) (model.Topic, error) {
	a.n.catalog.Current(ctx) // what other members changed before the call
	return a.n.catalog.GetTopic(ctx, name)
}

func (a groupsAdmin) ListTopics(ctx context.Context) ([]model.Topic, error) {
	a.n.catalog.Current(ctx) // what other members changed before the call
	return a.n.catalog.ListTopics(ctx)
}

func (a groupsAdmin) DeleteTopic(ctx context.Context, name string) error {
	return a.n.catalog.DeleteTopic(ctx, name)
}

func (a groupsAdmin) CreateGroup(ctx context.Context, g model.Group) (model.Group, error) {
	return a.n.catalog.CreateGroup(ctx, g)
}

func (a groupsAdmin) GetGroup(ctx context.Context, name string) (model.Group, error) {
	a.n.catalog.Current(ctx) // what other members changed before the call
	return a.n.catalog.GetGroup(ctx, name)
}

func (a groupsAdmin) ListGroups(ctx context.Context) ([]model.Group, error) {
	a.n.catalog.Current(ctx) // what other members changed before the call
	return a.n.catalog.ListGroups(ctx)
}

func (a groupsAdmin) DeleteGroup(ctx context.Context, name string) error {
	return a.n.catalog.DeleteGroup(ctx, name)
}

func (a groupsAdmin) ResetOffset(context.Context, broker.ResetOffsetRequest) ([]broker.QueueReset, error) {
	return nil, routedByGroups("resetting offsets through the admin API")
}

func (a groupsAdmin) DeadLetters(context.Context, string, int) (broker.DeadLetterPage, error) {
	return broker.DeadLetterPage{}, routedByGroups("listing dead letters")
}

func (a groupsAdmin) RedriveDeadLetters(context.Context, string, int) (broker.RedriveResult, error) {
	return broker.RedriveResult{}, routedByGroups("redriving dead letters")
}

func (a groupsAdmin) DescribeTopic(context.Context, string) (broker.TopicDescription, error) {
	return broker.TopicDescription{}, routedByGroups("describing a topic")
}

func (a groupsAdmin) DescribeGroup(context.Context, string) (broker.GroupDescription, error) {
	return broker.GroupDescription{}, routedByGroups("describing a group")
}

func (a groupsAdmin) LookupMessage(context.Context, broker.LookupRequest) ([]broker.FoundMessage, error) {
	return nil, routedByGroups("looking a message up")
}

func (a groupsAdmin) BrowseQueue(context.Context, broker.BrowseRequest) (broker.BrowsePage, error) {
	return broker.BrowsePage{}, routedByGroups("browsing a queue")
}

func (a groupsAdmin) OldestInFlight(context.Context, string, string) (broker.InFlightMessage, bool, error) {
	return broker.InFlightMessage{}, false, routedByGroups("the oldest message in flight")
}

// TopicTraffic sums what every data group's broker counted here.
func (a groupsAdmin) TopicTraffic() []broker.TopicTraffic {
	sum := map[string]broker.TopicTraffic{}
	var order []string
	for _, dg := range a.n.hostedGroups() {
		for _, t := range dg.broker.TopicTraffic() {
			s, ok := sum[t.Topic]
			if !ok {
				order = append(order, t.Topic)
			}
			s.Topic, s.Messages, s.Bytes = t.Topic, s.Messages+t.Messages, s.Bytes+t.Bytes
			sum[t.Topic] = s
		}
	}
	out := make([]broker.TopicTraffic, 0, len(order))
	for _, name := range order {
		out = append(out, sum[name])
	}
	return out
}

// DeliveredCounts sums what every data group's broker counted here.
func (a groupsAdmin) DeliveredCounts() map[broker.GroupTopic]int64 {
	out := map[broker.GroupTopic]int64{}
	for _, dg := range a.n.hostedGroups() {
		for k, v := range dg.broker.DeliveredCounts() {
			out[k] += v
		}
	}
	return out
}

// StoredMessages sums each queue of topic in this member's replica of
// the group holding it (with replica sets, the queues of the groups this
// member hosts).
func (a groupsAdmin) StoredMessages(ctx context.Context, topic string) (int64, error) {
	t, err := a.n.catalog.GetTopic(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	for q := range t.Queues {
		dg := a.n.groups[a.n.layout().GroupOf(t.Name, t.Type == model.TopicLite, q)]
		if !dg.hosted() {
			continue
		}
		lo, hi := dg.rep.Store().QueueRange(t.Name, q)
		n += hi - lo
	}
	return n, nil
}

func (a groupsAdmin) Started() time.Time { return a.n.broker.Started() }

// groupsREST is restmessaging.Broker of a cluster of several data groups:
// topics and consumer groups from the catalog. Its messaging calls are
// routed over the groups (restGroups) and never reach it.
type groupsREST struct{ n *Node }

var _ restmessaging.Broker = groupsREST{}

func (r groupsREST) GetTopic(ctx context.Context, name string) (model.Topic, error) {
	return r.n.catalog.GetTopic(ctx, name)
}

func (r groupsREST) GetGroup(ctx context.Context, name string) (model.Group, error) {
	return r.n.catalog.GetGroup(ctx, name)
}

// errRoutedByGroups answers a messaging call that reached groupsREST
// instead of a group's broker.
var errRoutedByGroups = routedByGroups("REST messaging")

func (r groupsREST) Send(context.Context, string, []*model.Message, model.Producer) ([]model.SendResult, error) {
	return nil, errRoutedByGroups
}

func (r groupsREST) Receive(context.Context, broker.ReceiveRequest) ([]*model.Delivered, error) {
	return nil, errRoutedByGroups
}

func (r groupsREST) Ack(_ context.Context, _, _ string, handles []string) []error {
	errs := make([]error, len(handles))
	for i := range errs {
		errs[i] = errRoutedByGroups
	}
	return errs
}

func (r groupsREST) ChangeInvisible(context.Context, string, string, string, time.Duration) (string, error) {
	return "", errRoutedByGroups
}

func (r groupsREST) Release(ctx context.Context, group, topic string, handles []string) []error {
	return r.Ack(ctx, group, topic, handles)
}

// restGroups routes the REST messaging calls over the data groups
// (restmessaging.Groups), as the v2 service routes its calls: to the
// group's broker where this member serves the group, else to the member
// leading it.
type restGroups struct{ v *groupsView }

var _ restmessaging.Groups = restGroups{}

func (r restGroups) Send(ctx context.Context, topic string, msgs []*model.Message) (restmessaging.Target, error) {
	t, err := r.v.Topic(ctx, topic)
	if err != nil {
		return restmessaging.Target{}, err
	}
	return r.target(ctx, v2service.SendGroup(r.v, t, true, msgs))
}

// Receive lists the groups holding queues of topic that this member
// serves, then (unless the request was forwarded) one target per member
// leading others; groups without a known leader are left out (an
// election is under way: their messages are found at a later receive).
func (r restGroups) Receive(ctx context.Context, topic string) ([]restmessaging.Target, error) {
	t, err := r.v.n.catalog.GetTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	l, lite := r.v.n.layout(), t.Type == model.TopicLite
	holds := func(g int) bool { return l.Of(g).Count(t.Name, lite, t.Queues) > 0 }
	var out []restmessaging.Target
	for _, dg := range r.v.n.groups {
		if dg.serving.Load() && holds(dg.id) {
			out = append(out, restmessaging.Target{B: dg.broker})
		}
	}
	for _, l := range r.v.leadersElsewhere(ctx, holds) {
		out = append(out, restmessaging.Target{Conn: l.conn, Member: l.id})
	}
	return out, nil
}

func (r restGroups) Handle(ctx context.Context, topic, h string) (restmessaging.Target, error) {
	q, ok := broker.HandleQueue(h)
	if !ok {
		return restmessaging.Target{}, mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "receipt handle %q is not one this cluster issued", h)
	}
	lite := false
	if t, ok := r.v.LookupTopic(ctx, topic); ok {
		lite = t.Type == model.TopicLite
	}
	return r.target(ctx, r.v.n.layout().GroupOf(topic, lite, q))
}

// target is where a call of group g goes: its broker when this member
// serves g, else the member leading it (never for a forwarded call).
func (r restGroups) target(ctx context.Context, g int) (restmessaging.Target, error) {
	b, conn, m, err := r.v.route(ctx, g)
	if err != nil || b != nil {
		return restmessaging.Target{B: b}, err
	}
	return restmessaging.Target{Conn: conn, Member: m}, nil
}

// route is where a call of group g goes: b, its broker, when this member
// serves g, else a connection to member m leading it (never for a
// forwarded call: that one is answered retry).
func (v *groupsView) route(ctx context.Context, g int) (b *broker.Broker, conn grpc.ClientConnInterface, m uint64, err error) {
	served, lead, err := v.Serve(ctx, g)
	switch {
	case err != nil:
		return nil, nil, 0, err
	case served != nil:
		return v.n.groups[g].broker, nil, 0, nil
	case forwarding.Forwarded(ctx):
		return nil, nil, 0, mqerr.Errorf(mqerr.KindReplicationLost, "this member no longer serves data group %d (member %d leads it now): retry", g, lead.ID)
	}
	conn, err = v.Conn(lead)
	if err != nil {
		return nil, nil, 0, mqerr.Wrap(mqerr.KindReplicationLost, err, fmt.Sprintf("data group %d's leader cannot be reached: retry", g))
	}
	return nil, conn, lead.ID, nil
}

// leader is a member leading data groups, and a connection to it.
type leader struct {
	id   uint64
	conn grpc.ClientConnInterface
}

// leadersElsewhere is, once each, the other members leading groups that
// holds keeps and this member does not serve: where a call that asks
// every group goes besides this member's brokers. A group without a known
// leader is left out (an election is under way); a forwarded call asks
// no one (it is answered from this member's groups only).
func (v *groupsView) leadersElsewhere(ctx context.Context, holds func(g int) bool) []leader {
	if forwarding.Forwarded(ctx) {
		return nil
	}
	self := uint64(v.n.cfg.NodeID)
	asked := map[uint64]bool{}
	var out []leader
	for _, dg := range v.n.groups {
		lead := dg.leader()
		if dg.serving.Load() || !holds(dg.id) || lead == 0 || lead == self || asked[lead] {
			continue
		}
		if _, conn, m, err := v.route(ctx, dg.id); err == nil && conn != nil {
			asked[m] = true
			out = append(out, leader{id: m, conn: conn})
		}
	}
	return out
}

// adminGroups routes what the admin API reads or moves of stored messages over
// the data groups (admin.Groups).
type adminGroups struct{ v *groupsView }

var _ admin.Groups = adminGroups{}

func (a adminGroups) Local() []admin.Broker {
	var out []admin.Broker
	for _, dg := range a.v.n.groups {
		if dg.serving.Load() {
			out = append(out, dg.broker)
		}
	}
	return out
}

// Remote is one connection per other member leading groups this member
// does not serve; a group without a known leader is left out (an
// election is under way).
func (a adminGroups) Remote(ctx context.Context) []grpc.ClientConnInterface {
	var out []grpc.ClientConnInterface
	for _, l := range a.v.leadersElsewhere(ctx, func(int) bool { return true }) {
		out = append(out, l.conn)
	}
	return out
}

func (a adminGroups) Queue(ctx context.Context, topic string, q int32) (admin.Broker, grpc.ClientConnInterface, error) {
	t, err := a.v.n.catalog.GetTopic(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	if q < 0 || q >= t.Queues {
		return nil, nil, mqerr.Errorf(mqerr.KindBadRequest, "topic %q has queues 0 to %d, not %d", t.Name, t.Queues-1, q)
	}
	b, conn, _, err := a.v.route(ctx, a.v.n.layout().GroupOf(t.Name, t.Type == model.TopicLite, q))
	if b != nil {
		return b, nil, err
	}
	return nil, conn, err
}
