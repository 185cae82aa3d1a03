package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// realBroker opens a broker on an in-memory store (the inspect RPCs are
// views of real state, so a fake would prove little).
func realBroker(t *testing.T) (*broker.Broker, *storage.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(ctx, broker.Config{DefaultQueues: 2, PopSnapshotInterval: time.Hour}, st)
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

func TestAdminDescribeAndLookup(t *testing.T) {
	b, st := realBroker(t)
	s := New(b, Options{})
	ctx := context.Background()
	if _, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", MaxLookupBody+10)
	msgs := []*model.Message{
		{Topic: "orders", ID: "m-1", Keys: []string{"k1"}, Body: []byte("hello"), Properties: map[string]string{"a": "b"}},
		{Topic: "orders", ID: "m-2", Body: []byte(big)},
		{Topic: "orders", ID: "m-3", Body: []byte("three")},
	}
	res, err := b.Send(ctx, "orders", msgs, model.Producer{})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %+v", err, res)
	}
	_, written := st.LogRange()
	if err := st.WaitDispatched(ctx, written); err != nil { // queues and index are built asynchronously
		t.Fatal(err)
	}
	got, err := b.Receive(ctx, broker.ReceiveRequest{Group: "billing", Topic: "orders", Max: 1, Invisible: time.Minute, QueueID: -1})
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v %d", err, len(got))
	}

	td, err := s.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if td.Messages != 3 || len(td.Queues) != 2 || td.Topic.GetName() != "orders" || len(td.Groups) != 1 {
		t.Fatalf("describe topic: %v", td)
	}
	if g := td.Groups[0]; g.Group != "billing" || g.InFlight != 1 || g.Ready != 2 || g.Backlog != 3 || len(g.Queues) != 2 {
		t.Fatalf("group progress: %v", g)
	}
	gd, err := s.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gd.Topics) != 1 || gd.Topics[0].Topic != "orders" || gd.DeadLetterQueue.GetTopic() != "%DLQ%billing" || gd.DeadLetterQueue.GetMessages() != 0 {
		t.Fatalf("describe group: %v", gd)
	}

	lr, err := s.LookupMessage(ctx, &adminv1.LookupMessageRequest{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Messages) != 1 {
		t.Fatalf("lookup by key: %v", lr)
	}
	if m := lr.Messages[0]; m.MessageId != "m-1" || string(m.Body) != "hello" || m.Properties["a"] != "b" || m.State != "STORED" ||
		m.Type != "NORMAL" || m.StoreTime == nil || m.Topic != "orders" {
		t.Fatalf("lookup by key: %v", m)
	}
	lr, err = s.LookupMessage(ctx, &adminv1.LookupMessageRequest{Topic: "orders", MessageId: "m-2"})
	if err != nil || len(lr.Messages) != 1 {
		t.Fatalf("lookup by id: %v %v", err, lr)
	}
	if m := lr.Messages[0]; !m.BodyTruncated || len(m.Body) != MaxLookupBody || int(m.BodySize) != len(big) {
		t.Fatalf("big body: truncated %v, %d bytes of %d", m.BodyTruncated, len(m.Body), m.BodySize)
	}

	_, err = s.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, `"nope"`)
	_, err = s.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: "nope"})
	wantCode(t, err, codes.NotFound, `"nope"`)
	_, err = s.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{})
	wantCode(t, err, codes.InvalidArgument, "required")
	_, err = s.LookupMessage(ctx, &adminv1.LookupMessageRequest{Topic: "orders"})
	wantCode(t, err, codes.InvalidArgument, "message id or a key")
	_, err = s.LookupMessage(ctx, &adminv1.LookupMessageRequest{Topic: "nope", MessageId: "x"})
	wantCode(t, err, codes.NotFound, `topic "nope"`)
}
