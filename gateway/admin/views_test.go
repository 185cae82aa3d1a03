package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/auth"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// countingBroker is realBroker with its counters on (a MeterProvider).
func countingBroker(t *testing.T) (*broker.Broker, *storage.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(ctx, broker.Config{DefaultQueues: 2, PopSnapshotInterval: time.Hour, Meters: noop.NewMeterProvider()}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := st.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return b, st
}

func sendAndWait(t *testing.T, b *broker.Broker, st *storage.Store, topic string, msgs ...*model.Message) {
	t.Helper()
	ctx := context.Background()
	res, err := b.Send(ctx, topic, msgs, model.Producer{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %+v", err, res)
	}
	_, written := st.LogRange()
	if err := st.WaitDispatched(ctx, written); err != nil {
		t.Fatal(err)
	}
}

func TestBrowseMessages(t *testing.T) {
	b, st := realBroker(t)
	s := New(b, Options{})
	ctx := context.Background()
	if _, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, b, st, "orders",
		&model.Message{Topic: "orders", ID: "m-0", Body: []byte("zero")},
		&model.Message{Topic: "orders", ID: "m-1", Body: []byte(strings.Repeat("y", 100))},
		&model.Message{Topic: "orders", ID: "m-2", Body: []byte("two")})

	r, err := s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders", Max: 2, MaxBodyBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.MinOffset != 0 || r.MaxOffset != 3 || r.StartOffset != 0 || r.NextOffset != 2 || len(r.Messages) != 2 {
		t.Fatalf("first page: %v", r)
	}
	if m := r.Messages[1]; m.MessageId != "m-1" || len(m.Body) != 10 || !m.BodyTruncated || m.BodySize != 100 || m.QueueOffset != 1 {
		t.Fatalf("second message cut at 10 bytes: %v", m)
	}
	r, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders", From: &adminv1.BrowseMessagesRequest_Offset{Offset: 2}})
	if err != nil || len(r.Messages) != 1 || r.Messages[0].MessageId != "m-2" || r.NextOffset != 3 {
		t.Fatalf("from offset 2: %v %v", r, err)
	}
	r, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders",
		From: &adminv1.BrowseMessagesRequest_Time{Time: timestamppb.New(time.Now().Add(time.Hour))}})
	if err != nil || len(r.Messages) != 0 || r.StartOffset != 3 {
		t.Fatalf("from a time after every message: %v %v", r, err)
	}
	r, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders",
		From: &adminv1.BrowseMessagesRequest_Time{Time: timestamppb.New(time.Unix(0, 0))}})
	if err != nil || len(r.Messages) != 3 || r.StartOffset != 0 {
		t.Fatalf("from the epoch: %v %v", r, err)
	}

	_, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{})
	wantCode(t, err, codes.InvalidArgument, "required")
	_, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders", Max: 257})
	wantCode(t, err, codes.InvalidArgument, "max 257")
	_, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders", QueueId: 1})
	wantCode(t, err, codes.InvalidArgument, "not 1")
	_, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "nope"})
	wantCode(t, err, codes.NotFound, `"nope"`)
	_, err = s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders",
		From: &adminv1.BrowseMessagesRequest_Time{Time: &timestamppb.Timestamp{Seconds: -1 << 62}}})
	wantCode(t, err, codes.InvalidArgument, "time")
}

func TestGetStats(t *testing.T) {
	b, st := countingBroker(t)
	s := New(b, Options{})
	ctx := context.Background()
	for _, n := range []string{"orders", "idle"} {
		if _, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, b, st, "orders", &model.Message{Topic: "orders", ID: "a", Body: []byte("12345")},
		&model.Message{Topic: "orders", ID: "b", Body: []byte("123")})
	if got, err := b.Receive(ctx, broker.ReceiveRequest{Group: "billing", Topic: "orders", Max: 1, Invisible: time.Minute, QueueID: -1}); err != nil || len(got) != 1 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	r, err := s.GetStats(ctx, &adminv1.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 2 || r.Delivered != 1 || r.Time == nil || r.StartTime == nil || r.StartTime.AsTime().After(r.Time.AsTime()) {
		t.Fatalf("totals: %v", r)
	}
	topics := map[string]*adminv1.TopicStats{}
	for _, ts := range r.Topics {
		topics[ts.Topic] = ts
	}
	if o := topics["orders"]; o == nil || o.Sent != 2 || o.SentBytes != 8 || o.Stored != 2 {
		t.Fatalf("orders: %v", o)
	}
	if i := topics["idle"]; i == nil || i.Sent != 0 || i.Stored != 0 {
		t.Fatalf("idle: %v", i)
	}
	if len(r.Subscriptions) != 1 || r.Subscriptions[0].Group != "billing" || r.Subscriptions[0].Topic != "orders" || r.Subscriptions[0].Delivered != 1 {
		t.Fatalf("subscriptions: %v", r.Subscriptions)
	}
}

func TestListClients(t *testing.T) {
	s := New(newFake(), Options{})
	if r, err := s.ListClients(context.Background(), &adminv1.ListClientsRequest{}); err != nil || len(r.Clients) != 0 {
		t.Fatalf("without a source: %v %v", r, err)
	}
	since := time.Unix(1_800_000_000, 0)
	s = New(newFake(), Options{Clients: func() []Client {
		return []Client{
			{Protocol: "remoting", ID: "10.0.0.1@1", Roles: []string{"PRODUCER", "PUSH_CONSUMER"}, Groups: []string{"PG", "CG"}, Since: since},
			{Protocol: "grpc", ID: "z", Roles: []string{"SIMPLE_CONSUMER"}, Language: "GOLANG", Version: "5.1.3", Address: "10.0.0.2:1",
				Topics: []string{"orders"}, Groups: []string{"billing"}, Since: since, LastSeen: since.Add(time.Second)},
			{Protocol: "grpc", ID: "a"},
		}
	}})
	r, err := s.ListClients(context.Background(), &adminv1.ListClientsRequest{})
	if err != nil || len(r.Clients) != 3 {
		t.Fatalf("%v %v", r, err)
	}
	if r.Clients[0].ClientId != "a" || r.Clients[0].Since != nil || r.Clients[1].ClientId != "z" || r.Clients[2].Protocol != "remoting" {
		t.Fatalf("order (protocol, then id): %v", r.Clients)
	}
	if c := r.Clients[1]; c.Language != "GOLANG" || c.Address != "10.0.0.2:1" || !c.Since.AsTime().Equal(since) ||
		!c.LastSeen.AsTime().Equal(since.Add(time.Second)) || c.Roles[0] != "SIMPLE_CONSUMER" || c.Groups[0] != "billing" {
		t.Fatalf("gRPC client: %v", c)
	}
}

// fakeCluster answers Status with st and records StartTransfer.
type fakeCluster struct {
	st          ClusterStatus
	transferErr error
	to          uint64
}

func (f *fakeCluster) Status(context.Context) (ClusterStatus, error) { return f.st, nil }
func (f *fakeCluster) StartTransfer(_ context.Context, group string, to uint64) (uint64, error) {
	f.to = to
	return 1, f.transferErr
}

func TestClusterStatusAndTransfer(t *testing.T) {
	ctx := context.Background()
	// A single node: one member, no group, nothing to transfer.
	single := New(newFake(), Options{})
	r, err := single.GetClusterStatus(ctx, &adminv1.GetClusterStatusRequest{})
	if err != nil || r.Clustered || len(r.Members) != 1 || r.Members[0].Role != "STANDALONE" || !r.Members[0].Self || len(r.Groups) != 0 {
		t.Fatalf("single node: %v %v", r, err)
	}
	_, err = single.TransferLeadership(ctx, &adminv1.TransferLeadershipRequest{Group: "broker", To: 2})
	wantCode(t, err, codes.FailedPrecondition, "single node")

	contact := time.Unix(1_800_000_000, 0)
	fc := &fakeCluster{st: ClusterStatus{Clustered: true, ClusterID: "demo", NodeID: 1,
		Members: []ClusterMember{{ID: 1, Role: "LEADER", Health: "UP", Self: true}, {ID: 2, Role: "UNKNOWN", Health: "DOWN", HealthDetail: "connection refused"}},
		Groups: []RaftGroup{{Name: "broker", Leader: 1, Term: 3, Commit: 40, Replicas: []RaftReplica{
			{Member: 1, Voter: true, Match: 40, Applied: 40, ReplicationState: "REPLICATE"},
			{Member: 2, Voter: true, Match: 30, Lag: 10, LastContact: contact, ReplicationState: "PROBE"}}}}}}
	s := New(newFake(), Options{Cluster: fc})
	r, err = s.GetClusterStatus(ctx, &adminv1.GetClusterStatusRequest{})
	if err != nil || !r.Clustered || r.ClusterId != "demo" || len(r.Members) != 2 || len(r.Groups) != 1 {
		t.Fatalf("cluster: %v %v", r, err)
	}
	if m := r.Members[1]; m.Health != "DOWN" || m.HealthDetail != "connection refused" {
		t.Fatalf("member 2: %v", m)
	}
	g := r.Groups[0]
	if g.Name != "broker" || g.Leader != 1 || g.CommitIndex != 40 || len(g.Replicas) != 2 || g.Replicas[0].LastContact != nil ||
		!g.Replicas[1].LastContact.AsTime().Equal(contact) || g.Replicas[1].Lag != 10 || g.Replicas[1].ReplicationState != "PROBE" {
		t.Fatalf("group: %v", g)
	}
	tr, err := s.TransferLeadership(ctx, &adminv1.TransferLeadershipRequest{Group: "broker", To: 2})
	if err != nil || tr.From != 1 || tr.To != 2 || fc.to != 2 {
		t.Fatalf("transfer: %v %v", tr, err)
	}
	for _, c := range []struct {
		err  error
		code codes.Code
	}{{ErrNoGroup, codes.NotFound}, {ErrNotVoter, codes.InvalidArgument}, {ErrNotLead, codes.Unavailable}} {
		fc.transferErr = c.err
		_, err := s.TransferLeadership(ctx, &adminv1.TransferLeadershipRequest{Group: "broker", To: 2})
		wantCode(t, err, c.code, c.err.Error())
	}
	_, err = s.TransferLeadership(ctx, &adminv1.TransferLeadershipRequest{To: 2})
	wantCode(t, err, codes.InvalidArgument, "group")
	_, err = s.TransferLeadership(ctx, &adminv1.TransferLeadershipRequest{Group: "broker"})
	wantCode(t, err, codes.InvalidArgument, "to")
}

// Every view (OpenToUsers) answers a user who may use nothing with a
// refusal or with nothing at all: no view leaks a topic, a group or a
// message to a user without permission. Admin users and auth off see
// everything.
func TestViewsShowUsersOnlyWhatTheyMay(t *testing.T) {
	b, st := countingBroker(t)
	users, err := auth.Parse([]byte(`
users:
  - {accessKey: nobody, secretKey: s, publish: [], subscribe: [], groups: []}
  - {accessKey: ops, secretKey: s, admin: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(users)
	asUser := func(ak string) context.Context {
		u, err := a.V2(auth.V2Sign(ak, "s", time.Now().UTC().Format(auth.DateTimeLayout)), time.Now().UTC().Format(auth.DateTimeLayout))
		if err != nil {
			t.Fatal(err)
		}
		return auth.NewContext(context.Background(), u)
	}
	s := New(b, Options{Auth: a})
	ops, nobody := asUser("ops"), asUser("nobody")
	if _, err := s.CreateTopic(ops, &adminv1.CreateTopicRequest{Name: "orders", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateGroup(ops, &adminv1.CreateGroupRequest{Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, b, st, "orders", &model.Message{Topic: "orders", ID: "m-1", Keys: []string{"k"}, Body: []byte("secret")})
	if got, err := b.Receive(context.Background(), broker.ReceiveRequest{Group: "billing", Topic: "orders", Max: 1, Invisible: time.Minute, QueueID: -1}); err != nil || len(got) != 1 {
		t.Fatalf("receive: %v %d", err, len(got))
	}

	calls := map[string]func(ctx context.Context) (proto.Message, error){
		adminv1.AdminService_ListTopics_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.ListTopics(ctx, &adminv1.ListTopicsRequest{})
		},
		adminv1.AdminService_GetTopic_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.GetTopic(ctx, &adminv1.GetTopicRequest{Name: "orders"})
		},
		adminv1.AdminService_DescribeTopic_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: "orders"})
		},
		adminv1.AdminService_ListGroups_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.ListGroups(ctx, &adminv1.ListGroupsRequest{})
		},
		adminv1.AdminService_GetGroup_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.GetGroup(ctx, &adminv1.GetGroupRequest{Name: "billing"})
		},
		adminv1.AdminService_DescribeGroup_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: "billing"})
		},
		adminv1.AdminService_LookupMessage_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.LookupMessage(ctx, &adminv1.LookupMessageRequest{Key: "k"})
		},
		adminv1.AdminService_BrowseMessages_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.BrowseMessages(ctx, &adminv1.BrowseMessagesRequest{Topic: "orders"})
		},
		adminv1.AdminService_ListDeadLetters_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: "billing"})
		},
		adminv1.AdminService_GetStats_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.GetStats(ctx, &adminv1.GetStatsRequest{})
		},
		adminv1.AdminService_WhoAmI_FullMethodName: func(ctx context.Context) (proto.Message, error) {
			return s.WhoAmI(ctx, &adminv1.WhoAmIRequest{})
		},
	}
	for method := range views {
		call := calls[method]
		if call == nil {
			t.Errorf("%s is open to users but not checked here", method)
			continue
		}
		got, err := call(nobody)
		if err != nil {
			wantCode(t, err, codes.PermissionDenied, "nobody")
		} else if text := prototext.Format(got); strings.Contains(text, "orders") || strings.Contains(text, "billing") || strings.Contains(text, "secret") {
			t.Errorf("%s shows a user without permissions: %v", method, got)
		}
		full, err := call(ops)
		if err != nil {
			t.Errorf("%s as an admin: %v", method, err)
		} else if method != adminv1.AdminService_WhoAmI_FullMethodName && method != adminv1.AdminService_ListDeadLetters_FullMethodName &&
			!strings.Contains(prototext.Format(full), "orders") && !strings.Contains(prototext.Format(full), "billing") {
			t.Errorf("%s shows an admin nothing: %v", method, full)
		}
	}
	// The gRPC listener lets users call exactly these.
	if !OpenToUsers(adminv1.AdminService_GetStats_FullMethodName) || OpenToUsers(adminv1.AdminService_ListClients_FullMethodName) ||
		OpenToUsers(adminv1.AdminService_GetClusterStatus_FullMethodName) || OpenToUsers(adminv1.AdminService_CreateTopic_FullMethodName) {
		t.Fatal("OpenToUsers")
	}
}

// DescribeGroup names each topic's oldest message in flight when asked.
func TestDescribeGroupOldestInFlight(t *testing.T) {
	b, st := realBroker(t)
	s := New(b, Options{})
	ctx := context.Background()
	if _, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, b, st, "orders", &model.Message{Topic: "orders", ID: "stuck-1", Body: []byte("poison")},
		&model.Message{Topic: "orders", ID: "fine-2", Body: []byte("ok")})
	if got, err := b.Receive(ctx, broker.ReceiveRequest{Group: "billing", Topic: "orders", Max: 2, Invisible: time.Minute, QueueID: -1}); err != nil || len(got) != 2 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	d, err := s.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: "billing"})
	if err != nil || len(d.Topics) != 1 || d.Topics[0].OldestInFlight != nil {
		t.Fatalf("without asking: %v %v", d, err)
	}
	d, err = s.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: "billing", OldestInFlight: true})
	if err != nil || len(d.Topics) != 1 {
		t.Fatalf("%v %v", d, err)
	}
	o := d.Topics[0].OldestInFlight
	if o == nil || o.Message.GetMessageId() != "stuck-1" || string(o.Message.GetBody()) != "poison" || o.Deliveries != 1 || o.VisibleAt == nil || o.Held {
		t.Fatalf("oldest in flight: %v", o)
	}
}
