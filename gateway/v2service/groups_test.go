package v2service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Two members of a cluster of two data groups, each serving one: member
// i (id i+1, address "m<i+1>:8081") serves group i with its own broker
// on its own store, and forwards what concerns the other group to the
// other member over an in-process connection. A third member, never
// started, completes the members routes pair the leaders with.

type groupsMember struct {
	id    uint64
	addr  string
	b     *broker.Broker
	st    *storage.Store
	svc   *MessagingService
	srv   *grpcserver.Server
	lis   *bufconn.Listener
	conn  *grpc.ClientConn // to this member, as a client dials it
	c     v2.MessagingServiceClient
	peers *groupsFake
}

// groupsFake is Groups for one member of the test cluster.
type groupsFake struct {
	self    int
	members []*groupsMember
}

func (f *groupsFake) Count() int { return len(f.members) }

func (f *groupsFake) Layout() placement.Layout { return placement.Layout{Groups: len(f.members)} }

func (f *groupsFake) LookupTopic(ctx context.Context, name string) (model.Topic, bool) {
	t, err := f.members[0].b.GetTopic(ctx, name)
	return t, err == nil
}

func (f *groupsFake) Topic(ctx context.Context, name string) (model.Topic, error) {
	return f.members[0].b.Topic(ctx, name)
}

func (f *groupsFake) Group(ctx context.Context, name string) (model.Group, error) {
	return f.members[0].b.Group(ctx, name)
}

func (f *groupsFake) Serve(_ context.Context, g int) (Broker, RouteMember, error) {
	if g == f.self {
		return f.members[g].b, RouteMember{}, nil
	}
	m := f.members[g]
	return nil, RouteMember{ID: m.id, Addr: m.addr}, nil
}

func (f *groupsFake) Served() []int { return []int{f.self} }

func (f *groupsFake) Leaders(context.Context) []RouteMember {
	out := make([]RouteMember, len(f.members))
	for i, m := range f.members {
		out[i] = RouteMember{ID: m.id, Addr: m.addr}
	}
	return out
}

func (f *groupsFake) Members(ctx context.Context) []RouteMember {
	return append(f.Leaders(ctx), RouteMember{ID: 3, Addr: "m3:8081"})
}

func (f *groupsFake) Leads(id uint64) bool { return id == 1 || id == 2 }

func (f *groupsFake) Self() RouteMember {
	m := f.members[f.self]
	return RouteMember{ID: m.id, Addr: m.addr}
}

func (f *groupsFake) Conn(m RouteMember) (grpc.ClientConnInterface, error) {
	for _, o := range f.members {
		if o.id == m.ID {
			return o.conn, nil
		}
	}
	return nil, fmt.Errorf("no member %d", m.ID)
}

func (f *groupsFake) Brokers() []Broker {
	out := make([]Broker, len(f.members))
	for i, m := range f.members {
		out[i] = m.b
	}
	return out
}

// newGroupsPair starts the two members.
func newGroupsPair(t *testing.T) []*groupsMember {
	t.Helper()
	clk := clock.NewFake(time.UnixMilli(1_800_000_000_000))
	log := slog.New(slog.DiscardHandler)
	ms := make([]*groupsMember, 2)
	for i := range ms {
		st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: clk.Now, StoreHost: "gw:8081"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := broker.Open(context.Background(), broker.Config{Clock: clk, DefaultQueues: 4, Logger: log, PopSnapshotInterval: time.Hour,
			Placement: placement.Of{Group: i, Groups: 2}}, st)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = &groupsMember{id: uint64(i + 1), addr: "m" + strconv.Itoa(i+1) + ":8081", b: b, st: st, lis: bufconn.Listen(1 << 20)}
	}
	for i, m := range ms {
		m.peers = &groupsFake{self: i, members: ms}
		sess := session.New(session.Config{Clock: clk, Logger: log})
		gate := admission.NewGate()
		svc, err := NewMessagingService(ServiceConfig{Clock: clk, Logger: log, Groups: m.peers}, m.b, sess, gate)
		if err != nil {
			t.Fatal(err)
		}
		m.svc = svc
		m.srv = grpcserver.New(grpcserver.Options{Gate: gate, Sessions: sess, Logger: log})
		svc.Register(m.srv.GRPC)
		go func() { _ = m.srv.Serve(m.lis) }()
		lis := m.lis
		m.conn, err = grpc.NewClient("passthrough:///"+m.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
		if err != nil {
			t.Fatal(err)
		}
		m.c = v2.NewMessagingServiceClient(m.conn)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, m := range ms {
			m.conn.Close()
			m.b.Drain()
			_ = m.srv.Stop(ctx)
			_ = m.b.Close(ctx)
			_ = m.st.Close(ctx)
		}
	})
	return ms
}

// createEverywhere creates topic t and consumer group cg in both
// members' brokers (their catalogs, as a cluster's replicated one).
func createEverywhere(t *testing.T, ms []*groupsMember, topic model.Topic, cg model.Group) {
	t.Helper()
	for _, m := range ms {
		if _, err := m.b.CreateTopic(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
		if _, err := m.b.CreateGroup(context.Background(), cg); err != nil {
			t.Fatal(err)
		}
	}
}

func callCtx(t *testing.T, md ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, append([]string{"x-mq-client-id", "client-1"}, md...)...)
}

// stored is how many messages member m's store holds in topic's queues.
func stored(t *testing.T, m *groupsMember, topic string, queues int32) int64 {
	t.Helper()
	_, written := m.st.LogRange()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.st.WaitDispatched(ctx, written); err != nil {
		t.Fatal(err)
	}
	var n int64
	for q := range queues {
		lo, hi := m.st.QueueRange(topic, q)
		n += hi - lo
	}
	return n
}

// Requests are served by the group they concern, forwarded when another
// member serves it: a send without a message group by a group this
// member serves, one with a message group by the group of its queue; a
// receive of a queue of the other group, and the ack of what it
// delivered, through the member that does not serve it; a transaction
// ended through the other member. A request forwarded once is not
// forwarded again.
func TestGroupsRouting(t *testing.T) {
	ms := newGroupsPair(t)
	topic := model.Topic{Name: "orders", Type: model.TopicMixed, Queues: 8}
	createEverywhere(t, ms, topic, model.Group{Name: "cg", MaxDeliveryAttempts: 16})
	a := ms[0]

	// A plain send through member 1 stays in group 0.
	resp, err := a.c.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01PLAIN", "", "plain")}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("plain send: %v %v", resp.GetStatus(), err)
	}
	// A message group whose queue is in group 1 goes there.
	var mg string
	for i := 0; mg == ""; i++ {
		if c := fmt.Sprintf("mg-%d", i); placement.GroupOf("orders", false, produce.HashQueue(topic, c), 2) == 1 {
			mg = c
		}
	}
	fifo := newMsg("orders", "01FIFO", "", "fifo")
	fifo.SystemProperties.MessageType = v2.MessageType_FIFO
	fifo.SystemProperties.MessageGroup = &mg
	resp, err = a.c.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{fifo}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("send of message group %s: %v %v", mg, resp.GetStatus(), err)
	}
	if n0, n1 := stored(t, ms[0], "orders", 8), stored(t, ms[1], "orders", 8); n0 != 1 || n1 != 1 {
		t.Fatalf("group 0 holds %d, group 1 %d; want the plain message in 0, the FIFO one in 1", n0, n1)
	}

	// A receive of a queue of group 1 through member 1 is forwarded; so is
	// the ack of what it delivered, and the second ack is refused.
	q1 := placement.Of{Group: 1, Groups: 2}.Nth("orders", false, 0)
	req := recvReq("cg", "orders", 4, 30*time.Second, "*")
	req.MessageQueue.Id = q1
	msgs := receiveFrom(t, a, req)
	if len(msgs) != 1 || string(msgs[0].GetBody()) != "fifo" {
		t.Fatalf("receive of queue %d through member 1: %d messages", q1, len(msgs))
	}
	h := msgs[0].GetSystemProperties().GetReceiptHandle()
	for i, want := range []v2.Code{v2.Code_OK, v2.Code_INVALID_RECEIPT_HANDLE} {
		ack, err := a.c.AckMessage(callCtx(t), &v2.AckMessageRequest{Group: res("cg"), Topic: res("orders"),
			Entries: []*v2.AckMessageEntry{{MessageId: "01FIFO", ReceiptHandle: h}}})
		if err != nil || len(ack.GetEntries()) != 1 || ack.GetEntries()[0].GetStatus().GetCode() != want {
			t.Fatalf("ack %d through member 1: %v %v, want %v", i+1, ack, err, want)
		}
	}

	// A transaction staged in group 1 (through member 2) is committed
	// through member 1.
	tx := newMsg("orders", "01TXN", "", "txn")
	tx.SystemProperties.MessageType = v2.MessageType_TRANSACTION
	resp, err = ms[1].c.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{tx}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("transactional send: %v %v", resp.GetStatus(), err)
	}
	txID := resp.GetEntries()[0].GetTransactionId()
	if broker.TokenGroup(txID) != 1 {
		t.Fatalf("transaction id %q of group 1 names group %d", txID, broker.TokenGroup(txID))
	}
	end, err := a.c.EndTransaction(callCtx(t), &v2.EndTransactionRequest{Topic: res("orders"), MessageId: "01TXN", TransactionId: txID,
		Resolution: v2.TransactionResolution_COMMIT})
	if err != nil || end.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("commit through member 1: %v %v", end.GetStatus(), err)
	}
	if n := stored(t, ms[1], "orders", 8); n != 2 {
		t.Fatalf("group 1 holds %d messages after the commit, want 2", n)
	}

	// A request member 2 forwarded (marked) and that reached member 1 for
	// group 1 is refused as retryable, not forwarded back.
	resp, err = a.c.SendMessage(callCtx(t, forwardedKey, "1"), &v2.SendMessageRequest{Messages: []*v2.Message{fifo}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_SLAVE_PERSISTENCE_TIMEOUT {
		t.Fatalf("a forwarded send of group 1 at member 1: %v %v, want SLAVE_PERSISTENCE_TIMEOUT", resp.GetStatus(), err)
	}
}

// receiveFrom receives once through member m.
func receiveFrom(t *testing.T, m *groupsMember, req *v2.ReceiveMessageRequest) []*v2.Message {
	t.Helper()
	stream, err := m.c.ReceiveMessage(callCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []*v2.Message
	for {
		f, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("receive stream: %v", err)
		}
		if msg := f.GetMessage(); msg != nil {
			out = append(out, msg)
		}
	}
}

// A simple consumer's receive names a queue of its route; when that
// queue's group has nothing, it takes messages of the topic's other
// groups (here through the member leading them) instead of waiting
// (at least 5 s) on the empty one; their acks reach their group
// through the member that delivered them.
func TestGroupsReceiveNamedGroupEmpty(t *testing.T) {
	ms := newGroupsPair(t)
	topic := model.Topic{Name: "orders", Type: model.TopicMixed, Queues: 8}
	createEverywhere(t, ms, topic, model.Group{Name: "cg", MaxDeliveryAttempts: 16})
	a, b := ms[0], ms[1]
	resp, err := b.c.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01INGROUP1", "", "01INGROUP1")}})
	if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("send: %v %v", resp.GetStatus(), err)
	}
	q := int32(0)
	for placement.GroupOf("orders", false, q, 2) != 0 {
		q++
	}
	req := recvReq("cg", "orders", 4, 30*time.Second, "*")
	req.MessageQueue.Id = q
	req.LongPollingTimeout = durationpb.New(20 * time.Second)
	// Within the call's 5 s: a receive waiting on group 0 would get nothing.
	got := receiveFrom(t, a, req)
	if len(got) != 1 || string(got[0].GetBody()) != "01INGROUP1" {
		t.Fatalf("a receive naming queue %d (group 0, empty) through member 1 got %d messages, want group 1's", q, len(got))
	}
	ack, err := a.c.AckMessage(callCtx(t), &v2.AckMessageRequest{Group: res("cg"), Topic: res("orders"),
		Entries: []*v2.AckMessageEntry{{MessageId: got[0].GetSystemProperties().GetMessageId(), ReceiptHandle: handleOf(got[0])}}})
	if err != nil || ack.GetStatus().GetCode() != v2.Code_OK || ack.GetEntries()[0].GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("ack through member 1 of group 1's message: %v %v", ack, err)
	}
	short, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "client-1"), nonBlocking)
	defer cancel()
	stream, err := b.c.ReceiveMessage(short, recvReq("cg", "orders", 4, 30*time.Second, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := stream.Recv()
		if err != nil {
			break
		}
		if f.GetMessage() != nil {
			t.Fatalf("the acknowledged message was delivered again: %s", f.GetMessage().GetBody())
		}
	}
}

// Routes name each queue at its group's leader: one address for every
// client but the Go client, which gets the leader and the member after
// it. Push assignments of a non-FIFO group name one per group, with
// queue id −1 − group.
func TestGroupsRoutes(t *testing.T) {
	ms := newGroupsPair(t)
	topic := model.Topic{Name: "orders", Type: model.TopicNormal, Queues: 6}
	createEverywhere(t, ms, topic, model.Group{Name: "cg", MaxDeliveryAttempts: 16})
	for _, lang := range []string{"JAVA", "GO"} {
		r, err := ms[1].c.QueryRoute(callCtx(t, "x-mq-language", lang), &v2.QueryRouteRequest{Topic: res("orders")})
		if err != nil || r.GetStatus().GetCode() != v2.Code_OK {
			t.Fatal(r.GetStatus(), err)
		}
		for _, mq := range r.GetMessageQueues() {
			g := placement.GroupOf("orders", false, mq.GetId(), 2)
			var got []string
			for _, a := range mq.GetBroker().GetEndpoints().GetAddresses() {
				got = append(got, net.JoinHostPort(a.GetHost(), strconv.Itoa(int(a.GetPort()))))
			}
			want := []string{ms[g].addr}
			if lang == "GO" {
				want = append(want, []string{"m2:8081", "m3:8081"}[g])
			}
			if strings.Join(got, ";") != strings.Join(want, ";") || mq.GetBroker().GetName() != DefaultBrokerName+"-"+strconv.Itoa(g+1) {
				t.Fatalf("%s: queue %d of group %d on %s at %v, want %v", lang, mq.GetId(), g, mq.GetBroker().GetName(), got, want)
			}
		}
	}
	as, err := ms[0].c.QueryAssignment(callCtx(t), &v2.QueryAssignmentRequest{Topic: res("orders"), Group: res("cg")})
	if err != nil || len(as.GetAssignments()) != 2 {
		t.Fatalf("assignment: %v %v", as, err)
	}
	for g, a := range as.GetAssignments() {
		if a.GetMessageQueue().GetId() != int32(-1-g) || a.GetMessageQueue().GetBroker().GetName() != DefaultBrokerName+"-"+strconv.Itoa(g+1) {
			t.Fatalf("assignment %d: %v", g, a.GetMessageQueue())
		}
	}
}

// A call on a Go client's channel meant for another member (the pair of
// member 1, which leads a group, reached member 2, the member after it)
// is steered: a heartbeat answers UNAVAILABLE, so the client connects
// anew; a send's first attempt too, nothing stored, and its next attempt
// is served. On the pair member 2 leads, or on one address, nothing is
// steered.
func TestGroupsSteer(t *testing.T) {
	ms := newGroupsPair(t)
	createEverywhere(t, ms, model.Topic{Name: "orders", Type: model.TopicNormal, Queues: 4}, model.Group{Name: "cg", MaxDeliveryAttempts: 16})
	b := ms[1]
	pairOf1 := clientWithAuthority(t, b, "m1:8081;m2:8081")
	if _, err := pairOf1.Heartbeat(callCtx(t), &v2.HeartbeatRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("heartbeat on member 1's pair at member 2: %v, want UNAVAILABLE", err)
	}
	for _, a := range []string{"m2:8081;m3:8081", "m2:8081"} {
		if r, err := clientWithAuthority(t, b, a).Heartbeat(callCtx(t), &v2.HeartbeatRequest{}); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
			t.Fatalf("heartbeat on %s at member 2: %v %v", a, r, err)
		}
	}
	send := func() (*v2.SendMessageResponse, error) {
		return pairOf1.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", "01STEER", "", "x")}})
	}
	if _, err := send(); status.Code(err) != codes.Unavailable {
		t.Fatalf("first attempt on a misplaced channel: %v, want UNAVAILABLE", err)
	}
	if n := stored(t, b, "orders", 4) + stored(t, ms[0], "orders", 4); n != 0 {
		t.Fatalf("%d messages stored after a steered attempt", n)
	}
	if r, err := send(); err != nil || r.GetStatus().GetCode() != v2.Code_OK {
		t.Fatalf("second attempt: %v %v", r.GetStatus(), err)
	}
}

// clientWithAuthority is a client of member m on a connection of its own
// whose :authority is a (as the Go client sets it from a broker's
// addresses).
func clientWithAuthority(t *testing.T, m *groupsMember, a string) v2.MessagingServiceClient {
	t.Helper()
	lis := m.lis
	conn, err := grpc.NewClient("passthrough:///x", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(a),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return v2.NewMessagingServiceClient(conn)
}

// A send is refused to steer its channel once per message id, and no
// more once many are remembered.
func TestSteeredOnce(t *testing.T) {
	var st steered
	now := time.Now()
	if !st.once("a", now) || st.once("a", now) {
		t.Fatal("a message id is refused once, then served")
	}
	if !st.once("a", now.Add(steerKeep+time.Second)) {
		t.Fatal("a message id is forgotten after steerKeep")
	}
	for i := range steerMax {
		st.once(strconv.Itoa(i), now.Add(steerKeep+time.Second))
	}
	if st.once("new", now.Add(steerKeep+time.Second)) {
		t.Fatal("refused past steerMax remembered")
	}
}

// A receive naming no queue and no broker (mqgate's SDK and CLI) takes
// messages from any group: the one this member serves, else the other's
// through its leader. A push consumer's assignment (queue −1 on a named
// broker) still names group 0.
func TestGroupsReceiveFromAnyGroup(t *testing.T) {
	ms := newGroupsPair(t)
	topic := model.Topic{Name: "orders", Type: model.TopicMixed, Queues: 8}
	createEverywhere(t, ms, topic, model.Group{Name: "cg", MaxDeliveryAttempts: 16})
	a, b := ms[0], ms[1]
	anyQueue := func() *v2.ReceiveMessageRequest {
		req := recvReq("cg", "orders", 4, 30*time.Second, "*")
		req.MessageQueue = &v2.MessageQueue{Topic: res("orders"), Id: -1, Broker: &v2.Broker{}}
		return req
	}
	send := func(m *groupsMember, id string) {
		t.Helper()
		resp, err := m.c.SendMessage(callCtx(t), &v2.SendMessageRequest{Messages: []*v2.Message{newMsg("orders", id, "", id)}})
		if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
			t.Fatalf("send %s: %v %v", id, resp.GetStatus(), err)
		}
	}
	send(b, "01INGROUP1") // member 2 serves group 1: stored there
	if got := receiveFrom(t, a, anyQueue()); len(got) != 1 || string(got[0].GetBody()) != "01INGROUP1" {
		t.Fatalf("a receive of any queue through member 1 (serving group 0, empty) got %d messages, want group 1's", len(got))
	}
	send(a, "01INGROUP0")
	if got := receiveFrom(t, a, anyQueue()); len(got) != 1 || string(got[0].GetBody()) != "01INGROUP0" {
		t.Fatalf("a receive of any queue through member 1 got %d messages, want its own group's", len(got))
	}

	send(b, "01PUSH")
	push := anyQueue()
	push.MessageQueue.Broker.Name = "mqgate-1"
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "client-1"), time.Second)
	defer cancel()
	stream, err := a.c.ReceiveMessage(ctx, push)
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := stream.Recv()
		if err != nil {
			break
		}
		if f.GetMessage() != nil {
			t.Fatalf("a push assignment of group 0 received %s, a message of group 1", f.GetMessage().GetBody())
		}
	}
}
