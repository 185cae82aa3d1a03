package v2service

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/gateway/forwarding"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Groups is a cluster of several data groups as the service routes
// requests over them (docs/architecture.md, "Data groups"); nil when
// there is one, served by the service's Broker. A request concerns one
// group, named by placement (broker/placement) from what it carries: a
// send's message group or lite topic (else any group this member serves
// that holds queues of the topic), a receive's, pull's or offset call's
// queue, the queue inside an ack's receipt handle, the group marked in a
// transaction id or recall handle. The group's broker serves it where
// this member serves the group; elsewhere it is forwarded, as it came
// (the client's metadata too, so the member serving it authenticates it
// again), to the gRPC listener of the member leading the group. A
// request that was forwarded already is never forwarded again: a member
// that no longer serves its group answers that the client retry.
type Groups interface {
	// Count is how many data groups there are; Layout how the queues are
	// spread over them.
	Count() int
	Layout() placement.Layout
	// LookupTopic finds a topic in the catalog without creating it.
	LookupTopic(ctx context.Context, name string) (model.Topic, bool)
	// Topic and Group look topics and groups up in the catalog,
	// creating them as auto-create says (Broker's Topic and Group).
	Topic(ctx context.Context, name string) (model.Topic, error)
	Group(ctx context.Context, name string) (model.Group, error)
	// Serve is group g's broker when this member serves g, waiting (a
	// while) for an election or an activation under way; otherwise the
	// member leading g, for the request to be forwarded there.
	Serve(ctx context.Context, g int) (Broker, RouteMember, error)
	// Served lists the groups this member serves now.
	Served() []int
	// Leaders is each group's leader as routes name it: its id and gRPC
	// address (this member's when no leader is known).
	Leaders(ctx context.Context) []RouteMember
	// Members are the members whose gRPC address is known, in id order
	// (asked every call of a steered channel: keep it cheap), Self is
	// this member, and Leads reports whether member id leads a group.
	Members(ctx context.Context) []RouteMember
	Self() RouteMember
	Leads(id uint64) bool
	// Conn is a connection to member m's gRPC listener.
	Conn(m RouteMember) (grpc.ClientConnInterface, error)
	// Brokers is the broker of every group this member hosts.
	Brokers() []Broker
}

// forwardedKey marks a request one member forwarded to another.
const forwardedKey = forwarding.Key

// forwarded reports whether ctx's request was forwarded by a member.
func forwarded(ctx context.Context) bool {
	return forwarding.Forwarded(ctx)
}

// target is where a request goes: b, a broker this member serves, or the
// member to, over conn.
type target struct {
	b    Broker
	conn grpc.ClientConnInterface
	g    int
	to   RouteMember
}

// at is the target of a request of group g.
func (s *MessagingService) at(ctx context.Context, g int) (target, error) {
	if s.groups == nil {
		return target{b: s.b}, nil
	}
	if g < 0 || g >= s.groups.Count() {
		g = 0
	}
	b, m, err := s.groups.Serve(ctx, g)
	if err != nil {
		return target{}, err
	}
	if b != nil {
		return target{b: b, g: g}, nil
	}
	if forwarded(ctx) {
		return target{}, mqerr.Errorf(mqerr.KindReplicationLost, "this member no longer serves data group %d (member %d leads it now): retry", g, m.ID)
	}
	conn, err := s.groups.Conn(m)
	if err != nil {
		return target{}, mqerr.Wrap(mqerr.KindReplicationLost, err, "data group "+strconv.Itoa(g)+"'s leader cannot be reached: retry")
	}
	s.forwards.Add(1)
	return target{conn: conn, g: g, to: m}, nil
}

// Forwarded is how many requests this member passed on to the member
// leading their data group (a client that reached a member not leading
// the group of what it asked for).
func (s *MessagingService) Forwarded() int64 { return s.forwards.Load() }

// forwardContext is ctx for a call forwarding its request.
func forwardContext(ctx context.Context) context.Context { return forwarding.Context(ctx) }

// invoke forwards a unary request to t's member.
func (t target) invoke(ctx context.Context, method string, req, resp any) error {
	if err := t.conn.Invoke(forwardContext(ctx), method, req, resp); err != nil {
		return t.unreachable(err)
	}
	return nil
}

// unreachable is the retryable refusal of a request whose forward
// failed.
func (t target) unreachable(err error) error {
	return mqerr.Wrap(mqerr.KindReplicationLost, err, "member "+strconv.FormatUint(t.to.ID, 10)+", which leads data group "+
		strconv.Itoa(t.g)+", did not answer: retry")
}

// lookupTopic is the catalog's topic (ok false when unknown, or with one
// group, where nothing is looked up).
func (s *MessagingService) lookupTopic(ctx context.Context, name string) (model.Topic, bool) {
	if s.groups == nil {
		return model.Topic{}, false
	}
	return s.groups.LookupTopic(ctx, name)
}

// topic and group are Broker's Topic and Group, from the catalog when
// there are several data groups.
func (s *MessagingService) topic(ctx context.Context, name string) (model.Topic, error) {
	if s.groups != nil {
		return s.groups.Topic(ctx, name)
	}
	return s.b.Topic(ctx, name)
}

func (s *MessagingService) group(ctx context.Context, name string) (model.Group, error) {
	if s.groups != nil {
		return s.groups.Group(ctx, name)
	}
	return s.b.Group(ctx, name)
}

// rr spreads the requests that may go to any of several groups.
var rr atomic.Uint32

// servedGroup is one of the groups this member serves that holds queues
// of t (any of them when t is unknown), round robin; ok is false when
// none does.
func (s *MessagingService) servedGroup(t model.Topic, known bool) (int, bool) {
	return servedGroupOf(s.groups, t, known)
}

func servedGroupOf(groups Groups, t model.Topic, known bool) (int, bool) {
	l := groups.Layout()
	served := slicesFilter(groups.Served(), func(g int) bool { return g >= l.First })
	if known {
		lite := t.Type == model.TopicLite
		served = slicesFilter(served, func(g int) bool { return l.Of(g).Count(t.Name, lite, t.Queues) > 0 })
	}
	if len(served) == 0 {
		return 0, false
	}
	return served[int(rr.Add(1))%len(served)], true
}

func slicesFilter(in []int, keep func(int) bool) []int {
	out := in[:0:0]
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// sendGroup is the group a send of msgs to topic goes to: the one
// holding the queue its lite topic or message group names, else one this
// member serves holding queues of the topic, else the group of a queue
// of the topic chosen round robin. An unknown topic goes to a group this
// member serves that may hold queues (the broker answers, or creates
// it), else the first group holding queues.
func (s *MessagingService) sendGroup(ctx context.Context, topic string, msgs []*model.Message) int {
	if s.groups == nil {
		return 0
	}
	t, ok := s.lookupTopic(ctx, topic)
	return SendGroup(s.groups, t, ok, msgs)
}

// SendGroup is sendGroup for topic t over groups (known: t is in the
// catalog), for the other edges that route sends over data groups.
func SendGroup(groups Groups, t model.Topic, known bool, msgs []*model.Message) int {
	if !known {
		if g, ok := servedGroupOf(groups, t, false); ok {
			return g
		}
		return groups.Layout().First
	}
	l := groups.Layout()
	lite := t.Type == model.TopicLite
	switch m := msgs[0]; {
	case lite:
		return l.GroupOf(t.Name, true, 0)
	case m.MessageGroup != "":
		return l.GroupOf(t.Name, false, produce.HashQueue(t, m.MessageGroup))
	}
	if g, ok := servedGroupOf(groups, t, true); ok {
		return g
	}
	if t.Queues <= 0 {
		return l.First
	}
	return l.GroupOf(t.Name, false, int32(rr.Add(1)%uint32(t.Queues)))
}

// queueGroup is the group holding queue q of topic. A negative q names
// the group (−1 − q) of a push consumer's assignment (QueryAssignment),
// or for a LITE topic the topic's group.
func (s *MessagingService) queueGroup(ctx context.Context, topic string, q int32) int {
	if s.groups == nil {
		return 0
	}
	t, ok := s.lookupTopic(ctx, topic)
	lite := ok && t.Type == model.TopicLite
	n := s.groups.Count()
	switch {
	case lite || q >= 0:
		return s.groups.Layout().GroupOf(topic, lite, q)
	case int(-1-q) < n:
		return int(-1 - q)
	}
	g, _ := s.servedGroup(t, ok)
	return g
}

// handleGroup is the group holding the queue a receipt handle names (one
// this member serves when it names none: the broker refuses it).
func (s *MessagingService) handleGroup(ctx context.Context, topic, handle string) int {
	if s.groups == nil {
		return 0
	}
	if q, ok := broker.HandleQueue(handle); ok {
		return s.queueGroup(ctx, topic, q)
	}
	g, _ := s.servedGroup(model.Topic{}, false)
	return g
}

// tokenGroup is the group that minted a transaction id or recall handle.
func (s *MessagingService) tokenGroup(token string) int {
	if s.groups == nil {
		return 0
	}
	return broker.TokenGroup(token)
}

// assignmentQueue is the queue id of a non-FIFO push consumer's
// assignment of group g: −1 − g, which no queue has (ReceiveMessage
// delivers from any queue of the group); −1 with one group.
func assignmentQueue(g int) int32 { return int32(-1 - g) }

// groupRoutes are the route brokers of each group (by group): the
// broker "<name>-<id>" of the member leading it, whose endpoints are that
// member's address alone, or for the Go client (takesAddressLists) that
// address and its successor's (pair).
//
// The Go client v5.1.3 dials a broker's endpoints with a blocking dial of
// up to 5 s under a lock every call waits for, so a broker whose only
// address is down stalls all its calls until its routes no longer name
// that member: with a second address, its channel moves to the other
// member when one goes away, as the routes of a cluster of one group
// let it. It keeps one channel per set of addresses (it sorts them), so
// each leader is given its own pair, the leader and the member after it
// in id order (cyclic): the pairs differ, and a pair names its leader.
// It connects a channel to either address of the pair at random: one
// that reaches the successor is steered to the leader (misplaced, steer),
// and its calls are forwarded meanwhile.
func (s *MessagingService) groupRoutes(ctx context.Context) ([]*v2.Broker, error) {
	leaders := s.groups.Leaders(ctx)
	var members []RouteMember
	if takesAddressLists(ctx) {
		members = s.groups.Members(ctx)
	}
	out := make([]*v2.Broker, len(leaders))
	byID := map[uint64]*v2.Broker{}
	for g, m := range leaders {
		if br, ok := byID[m.ID]; ok {
			out[g] = br
			continue
		}
		ep, err := endpointsFromHostPort(m.Addr, 0)
		if err != nil {
			return nil, mqerr.Wrap(mqerr.KindUnavailable, err, "the address of data group "+strconv.Itoa(g)+"'s leader")
		}
		if next, ok := successor(members, m.ID); ok {
			if nep, err := endpointsFromHostPort(next.Addr, 0); err == nil && nep.GetScheme() == ep.GetScheme() {
				ep.Addresses = append(ep.Addresses, nep.Addresses...)
			}
		}
		br := &v2.Broker{Name: s.brokerName + "-" + strconv.FormatUint(m.ID, 10), Id: 0, Endpoints: ep}
		byID[m.ID] = br
		out[g] = br
	}
	return out, nil
}

// successor is the member after id among members (in id order, cyclic),
// when there is another one.
func successor(members []RouteMember, id uint64) (RouteMember, bool) {
	if len(members) < 3 {
		return RouteMember{}, false // with two members a pair would name both ways
	}
	for i, m := range members {
		if m.ID == id {
			return members[(i+1)%len(members)], true
		}
	}
	return RouteMember{}, false
}

// misplaced reports whether ctx's call came on a channel its client
// meant for another member: a Go client's channel to a pair of a route
// (groupRoutes), whose :authority is the pair's addresses sorted and
// joined by ';', that reached the successor while the leader it names
// still leads a group. Such a channel is steered to the leader (steer).
func (s *MessagingService) misplaced(ctx context.Context) bool {
	if s.groups == nil {
		return false
	}
	v := metadata.ValueFromIncomingContext(ctx, ":authority")
	if len(v) == 0 {
		return false
	}
	a, b, pair := strings.Cut(v[len(v)-1], ";")
	if !pair || strings.Contains(b, ";") {
		return false
	}
	self := s.groups.Self()
	other := a
	switch self.Addr {
	case a:
		other = b
	case b:
	default:
		return false
	}
	members := s.groups.Members(ctx)
	var o RouteMember
	for _, m := range members {
		if m.Addr == other {
			o = m
		}
	}
	if next, ok := successor(members, o.ID); !ok || next.ID != self.ID {
		return false // the pair names this member as its leader, or is none of the routes'
	}
	return s.groups.Leads(o.ID)
}

// steer is the answer to a call on a misplaced channel that must make
// the Go client build the channel again (it does on UNAVAILABLE, and
// connects anew, in a new order): nothing was done.
func (s *MessagingService) steer() error {
	return status.Error(codes.Unavailable, "this connection reached a member that does not lead the data groups its route names: reconnect (nothing was done)")
}

// steered remembers the sends refused to steer their channel (steerSend).
type steered struct {
	// mu guards the message ids refused by when, and when they were last
	// swept.
	mu    sync.Mutex
	ids   map[string]time.Time
	swept time.Time
}

// steerKeep is how long a refused send is remembered; past steerMax
// sends remembered, none is refused (sends that keep reaching the wrong
// member, a client that cannot reach the leader, are forwarded).
const (
	steerKeep = time.Minute
	steerMax  = 1 << 16
)

// once reports whether message id was not refused here within steerKeep,
// and remembers it.
func (st *steered) once(id string, now time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ids == nil {
		st.ids = map[string]time.Time{}
	}
	if now.Sub(st.swept) > steerKeep {
		for k, at := range st.ids {
			if now.Sub(at) > steerKeep {
				delete(st.ids, k)
			}
		}
		st.swept = now
	}
	if _, ok := st.ids[id]; ok || len(st.ids) >= steerMax {
		return false
	}
	st.ids[id] = now
	return true
}

// steerSend reports whether a send on a misplaced channel is refused to
// steer the channel: the first attempt of a message here is (the Go
// client tries again at once, on a new channel); a message refused
// before is served (forwarded), so a send never runs out of attempts
// for this.
func (s *MessagingService) steerSend(ctx context.Context, msgs []*model.Message) bool {
	if len(msgs) == 0 || msgs[0].ID == "" || !s.misplaced(ctx) {
		return false
	}
	return s.steered.once(msgs[0].ID, time.Now())
}

// forwardStream forwards a server-streaming request to t's member and
// passes its answers on with send; fail answers a request whose forward
// failed before any answer came.
func forwardStream[T any](ctx context.Context, t target, method string, req any, send func(*T) error, fail func(error) error) error {
	cs, err := t.conn.NewStream(forwardContext(ctx), &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return fail(t.unreachable(err))
	}
	if err := cs.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return fail(t.unreachable(err))
	}
	if err := cs.CloseSend(); err != nil {
		return fail(t.unreachable(err))
	}
	sent := false
	for {
		m := new(T)
		err := cs.RecvMsg(m)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && !sent:
			return fail(t.unreachable(err))
		case err != nil:
			return err
		}
		if err := send(m); err != nil {
			return err
		}
		sent = true
	}
}

// ackByGroup acknowledges handles (entries idx of req; nil idx: the
// entries in order) in the groups their queues are in, each group's at
// once, and sets the status of each handle's result, out[j].
func (s *MessagingService) ackByGroup(ctx context.Context, req *v2.AckMessageRequest, group, topic string, handles []string, idx []int, out []*v2.AckMessageResultEntry) {
	byGroup := map[int][]int{}
	for j, h := range handles {
		g := s.handleGroup(ctx, topic, h)
		byGroup[g] = append(byGroup[g], j)
	}
	var wg sync.WaitGroup
	for g, js := range byGroup {
		wg.Go(func() {
			set := func(err error) {
				st := statusOf(ctx, s.log, err)
				for _, j := range js {
					out[j].Status = st
				}
			}
			t, err := s.at(ctx, g)
			if err != nil {
				set(err)
				return
			}
			if t.conn != nil {
				sub := &v2.AckMessageRequest{Group: req.GetGroup(), Topic: req.GetTopic(), Entries: make([]*v2.AckMessageEntry, 0, len(js))}
				for _, j := range js {
					i := j
					if idx != nil {
						i = idx[j]
					}
					sub.Entries = append(sub.Entries, req.GetEntries()[i])
				}
				resp := new(v2.AckMessageResponse)
				if err := t.invoke(ctx, v2.MessagingService_AckMessage_FullMethodName, sub, resp); err != nil {
					set(err)
					return
				}
				if len(resp.GetEntries()) != len(js) {
					st := resp.GetStatus()
					if st.GetCode() == v2.Code_OK || st == nil {
						st = statusNoEntries
					}
					for _, j := range js {
						out[j].Status = st
					}
					return
				}
				for k, j := range js {
					out[j].Status = resp.GetEntries()[k].GetStatus()
				}
				return
			}
			hs := make([]string, len(js))
			for k, j := range js {
				hs[k] = handles[j]
			}
			errs := t.b.Ack(ctx, group, topic, hs)
			if len(errs) != len(hs) {
				s.log.ErrorContext(ctx, "broker returned a wrong number of ack results", "want", len(hs), "got", len(errs))
				set(mqerr.Errorf(mqerr.KindInternal, "the broker answered %d acks of %d", len(errs), len(hs)))
				return
			}
			for k, j := range js {
				out[j].Status = statusOf(ctx, s.log, errs[k])
			}
		})
	}
	wg.Wait()
}

// anyGroup reports whether req is a receive from any queue of its topic
// over data groups: queue −1 on no broker, as mqgate's SDK asks (the
// official clients name a queue of a route, or a push assignment's
// broker and group).
func (s *MessagingService) anyGroup(req *v2.ReceiveMessageRequest) bool {
	mq := req.GetMessageQueue()
	return s.groups != nil && mq.GetId() == -1 && mq.GetBroker().GetName() == ""
}

// receiveAnyGroup is a receive from any group holding queues of the
// topic: the groups this member serves first, then (unless the request
// was forwarded) one member leading others, each asked without waiting;
// finding nothing, it waits on the first up to the receive's wait.
func (s *MessagingService) receiveAnyGroup(ctx context.Context, req *v2.ReceiveMessageRequest, rr broker.ReceiveRequest, topic *v2.Resource,
	stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	targets := s.anyGroupTargets(ctx, rr.Topic)
	if len(targets) == 0 {
		t, err := s.at(ctx, s.queueGroup(ctx, rr.Topic, req.GetMessageQueue().GetId()))
		if err != nil {
			return sendReceiveStatus(stream, statusOf(ctx, s.log, err))
		}
		targets = []target{t}
	}
	if len(targets) == 1 {
		return s.receiveAt(ctx, req, rr, topic, targets[0], stream)
	}
	return s.lookThenWait(ctx, req, req, rr, topic, targets[0], targets[1:], stream)
}

// receiveNamedFirst is a simple consumer's receive over data groups: it
// names a queue of its route, and takes messages from that queue's group
// first; when that group has none, it looks at the topic's other groups
// (those this member serves, then one member leading others, each asked
// without waiting) before it waits on the named group. A simple
// consumer goes round its route's queues one receive at a time, and
// each receive that waits on an empty group holds it up for the whole
// long poll (at least 5 s, as upstream); so one idle group would slow
// its reading of every other group to a crawl. The messages delivered
// carry their own queue in their handles, so their acks reach their
// groups wherever they are sent. (A push consumer's receive, which
// names its assignment rather than a route queue, keeps to the group of
// its assignment: the assignments share the groups out among a consumer
// group's clients.)
func (s *MessagingService) receiveNamedFirst(ctx context.Context, req *v2.ReceiveMessageRequest, rr broker.ReceiveRequest, topic *v2.Resource, t target,
	stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	var others []target
	for _, o := range s.anyGroupTargets(ctx, rr.Topic) {
		if o.g != t.g {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return s.receiveAt(ctx, req, rr, topic, t, stream)
	}
	// Another member is asked for any of the groups it serves.
	anyReq := proto.Clone(req).(*v2.ReceiveMessageRequest)
	anyReq.MessageQueue = &v2.MessageQueue{Topic: req.GetMessageQueue().GetTopic(), Id: -1, Broker: &v2.Broker{}}
	return s.lookThenWait(ctx, req, anyReq, rr, topic, t, others, stream)
}

// lookThenWait asks first (with req), then each of others (with
// othersReq), for messages without waiting; finding none, it waits on
// first for what is left of the receive's wait.
func (s *MessagingService) lookThenWait(ctx context.Context, req, othersReq *v2.ReceiveMessageRequest, rr broker.ReceiveRequest, topic *v2.Resource,
	first target, others []target, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	start := time.Now()
	now := rr
	now.Wait = 0
	if done, err := s.receiveNow(ctx, req, now, topic, first, stream); done {
		return err
	}
	for _, o := range others {
		if done, err := s.receiveNow(ctx, othersReq, now, topic, o, stream); done {
			return err
		}
	}
	rr.Wait = max(rr.Wait-time.Since(start), 0) // the wait asked for, not more
	return s.receiveAt(ctx, req, rr, topic, first, stream)
}

// anyGroupTargets are the groups this member serves that hold queues of
// topic, then one target per member leading others (none for a forwarded
// request; groups without a known leader are left out: an election is
// under way, and their messages are found at a later receive).
func (s *MessagingService) anyGroupTargets(ctx context.Context, topic string) []target {
	t, ok := s.lookupTopic(ctx, topic)
	if !ok {
		return nil
	}
	l, lite := s.groups.Layout(), t.Type == model.TopicLite
	holds := func(g int) bool { return l.Of(g).Count(t.Name, lite, t.Queues) > 0 }
	var out []target
	served := map[int]bool{}
	for _, g := range s.groups.Served() {
		if !holds(g) {
			continue
		}
		if b, _, err := s.groups.Serve(ctx, g); err == nil && b != nil {
			out = append(out, target{b: b, g: g})
			served[g] = true
		}
	}
	if forwarded(ctx) {
		return out
	}
	self := s.groups.Self().ID
	asked := map[uint64]bool{}
	for g, m := range s.groups.Leaders(ctx) {
		if served[g] || !holds(g) || m.ID == self || asked[m.ID] {
			continue
		}
		conn, err := s.groups.Conn(m)
		if err != nil {
			continue
		}
		asked[m.ID] = true
		out = append(out, target{conn: conn, g: g, to: m})
	}
	return out
}

// probeWait bounds how long a member asked for messages without waiting
// (receiveNow) may take to answer: it does not park (pollWait), so only
// a slow or unreachable member uses it up.
const probeWait = PollReserve + 100*time.Millisecond

// receiveNow asks t for messages without waiting: done reports that it
// answered the client (with messages or an error), false that t had none
// or could not be reached.
func (s *MessagingService) receiveNow(ctx context.Context, req *v2.ReceiveMessageRequest, rr broker.ReceiveRequest, topic *v2.Resource, t target,
	stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) (bool, error) {
	if t.b != nil {
		msgs, err := t.b.Receive(ctx, rr)
		switch {
		case err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound:
			return true, sendReceiveStatus(stream, statusOf(ctx, s.log, err))
		case err != nil || len(msgs) == 0:
			return false, nil
		}
		return true, s.sendReceived(ctx, t, rr, topic, msgs, stream)
	}
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	probe := proto.Clone(req).(*v2.ReceiveMessageRequest)
	probe.LongPollingTimeout = durationpb.New(0) // answered at once (pollWait)
	var frames []*v2.ReceiveMessageResponse
	err := forwardStream[v2.ReceiveMessageResponse](pctx, t, v2.MessagingService_ReceiveMessage_FullMethodName, probe,
		func(m *v2.ReceiveMessageResponse) error { frames = append(frames, m); return nil },
		func(err error) error { return err })
	if err != nil || len(frames) == 0 || frames[0].GetStatus().GetCode() != v2.Code_OK {
		return false, nil // nothing there (or not now): the next target
	}
	for _, f := range frames {
		if err := stream.Send(f); err != nil {
			return true, err
		}
	}
	return true, nil
}
