package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// fakeBroker keeps topics and groups in maps and answers with the same
// kinds the real metadata service uses.
type fakeBroker struct {
	topics map[string]model.Topic
	groups map[string]model.Group
	last   model.Group

	// ResetOffset records its request and answers moved or resetErr.
	reset    broker.ResetOffsetRequest
	resets   int
	moved    []broker.QueueReset
	resetErr error

	// RedriveDeadLetters answers redriven and errInternal.
	redriven broker.RedriveResult

	Inspector // nil: inspect_test.go runs those RPCs over a real broker
}

func newFake() *fakeBroker {
	return &fakeBroker{topics: map[string]model.Topic{}, groups: map[string]model.Group{}}
}

func (f *fakeBroker) CreateTopic(_ context.Context, t model.Topic) (model.Topic, error) {
	if strings.Contains(t.Name, " ") {
		return model.Topic{}, mqerr.Errorf(mqerr.KindIllegalTopic, "topic name %q has characters outside [%%|a-zA-Z0-9_-]", t.Name)
	}
	if _, ok := f.topics[t.Name]; ok {
		return model.Topic{}, mqerr.Errorf(mqerr.KindAlreadyExists, "topic %q already exists", t.Name)
	}
	if t.Queues == 0 {
		t.Queues = 8
	}
	t.CreateTime = time.Unix(1_800_000_000, 0)
	f.topics[t.Name] = t
	return t, nil
}
func (f *fakeBroker) GetTopic(_ context.Context, n string) (model.Topic, error) {
	t, ok := f.topics[n]
	if !ok {
		return t, mqerr.Errorf(mqerr.KindTopicNotFound, "does not exist")
	}
	return t, nil
}
func (f *fakeBroker) ListTopics(context.Context) ([]model.Topic, error) {
	var out []model.Topic
	for _, t := range f.topics {
		out = append(out, t)
	}
	return out, nil
}
func (f *fakeBroker) DeleteTopic(_ context.Context, n string) error {
	if _, ok := f.topics[n]; !ok {
		return mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist", n)
	}
	delete(f.topics, n)
	return nil
}
func (f *fakeBroker) CreateGroup(_ context.Context, g model.Group) (model.Group, error) {
	f.last = g
	if g.MaxDeliveryAttempts == 0 {
		g.MaxDeliveryAttempts = 17
	}
	f.groups[g.Name] = g
	return g, nil
}
func (f *fakeBroker) GetGroup(_ context.Context, n string) (model.Group, error) {
	g, ok := f.groups[n]
	if !ok {
		return g, mqerr.Errorf(mqerr.KindGroupNotFound, "consumer group %q does not exist", n)
	}
	return g, nil
}
func (f *fakeBroker) ListGroups(context.Context) ([]model.Group, error) { return nil, nil }
func (f *fakeBroker) DeleteGroup(context.Context, string) error         { return errInternal }
func (f *fakeBroker) ResetOffset(_ context.Context, r broker.ResetOffsetRequest) ([]broker.QueueReset, error) {
	f.reset, f.resets = r, f.resets+1
	return f.moved, f.resetErr
}

func (f *fakeBroker) DeadLetters(context.Context, string, int) (broker.DeadLetterPage, error) {
	return broker.DeadLetterPage{}, errInternal
}
func (f *fakeBroker) RedriveDeadLetters(context.Context, string, int) (broker.RedriveResult, error) {
	return f.redriven, errInternal
}

var errInternal = mqerr.Errorf(mqerr.KindStoreUnavailable, "store closed")

func wantCode(t *testing.T, err error, c codes.Code, sub string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != c || !strings.Contains(st.Message(), sub) {
		t.Fatalf("error %v, want %s containing %q", err, c, sub)
	}
}

func TestAdminTopics(t *testing.T) {
	s := New(newFake(), Options{})
	ctx := context.Background()
	r, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders", Type: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	if tp := r.Topic; tp.Name != "orders" || tp.Type != "FIFO" || tp.Queues != 8 || tp.Permission != "READ_WRITE" || tp.CreateTime == nil {
		t.Fatalf("created %v", tp)
	}
	_, err = s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders"})
	wantCode(t, err, codes.AlreadyExists, `topic "orders" already exists`)
	_, err = s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "a b"})
	wantCode(t, err, codes.InvalidArgument, `"a b"`)
	_, err = s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "x", Type: "PRIORITY"})
	wantCode(t, err, codes.InvalidArgument, `topic "x"`)
	_, err = s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: ""})
	wantCode(t, err, codes.InvalidArgument, "required")
	_, err = s.GetTopic(ctx, &adminv1.GetTopicRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, `topic "nope": does not exist`) // the name is added when the broker omitted it
	_, err = s.DeleteTopic(ctx, &adminv1.DeleteTopicRequest{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.DeleteTopic(ctx, &adminv1.DeleteTopicRequest{Name: "orders"})
	wantCode(t, err, codes.NotFound, `"orders"`)
}

func TestAdminGroups(t *testing.T) {
	f := newFake()
	s := New(f, Options{})
	ctx := context.Background()
	r, err := s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "g", Fifo: true, MaxDeliveryAttempts: 2, RetryPolicy: "exponential"})
	if err != nil {
		t.Fatal(err)
	}
	if f.last.Retry.Kind != model.RetryExponential || !f.last.FIFO || f.last.MaxDeliveryAttempts != 2 {
		t.Fatalf("broker got %+v", f.last)
	}
	if g := r.Group; g.RetryPolicy != "exponential" || !g.Fifo || g.MaxDeliveryAttempts != 2 {
		t.Fatalf("created %v", g)
	}
	_, err = s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "h", RetryPolicy: "linear"})
	wantCode(t, err, codes.InvalidArgument, `consumer group "h"`)
	_, err = s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "h", MaxDeliveryAttempts: -1})
	wantCode(t, err, codes.InvalidArgument, "negative")
	_, err = s.GetGroup(ctx, &adminv1.GetGroupRequest{Name: "zz"})
	wantCode(t, err, codes.NotFound, `"zz"`)
	_, err = s.DeleteGroup(ctx, &adminv1.DeleteGroupRequest{Name: "g"})
	wantCode(t, err, codes.Unavailable, `consumer group "g": store closed`)
}
