package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A group with one delivery attempt lets three messages fail into its
// dead-letter topic; they are listed, then redriven in two calls, and the
// group receives them again from their topic.
func TestDeadLettersListAndRedrive(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.UnixMilli(1_800_000_000_000))
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(ctx, broker.Config{Clock: clk, DefaultQueues: 2, PopSnapshotInterval: time.Hour}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Close(ctx)
		_ = st.Close(ctx)
	})
	dispatched := func() {
		t.Helper()
		_, written := st.LogRange()
		if err := st.WaitDispatched(ctx, written); err != nil {
			t.Fatal(err)
		}
	}
	s := New(b, Options{})
	if _, err := s.CreateTopic(ctx, &adminv1.CreateTopicRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "billing", MaxDeliveryAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	var msgs []*model.Message
	for i := range 3 {
		msgs = append(msgs, &model.Message{Topic: "orders", ID: fmt.Sprintf("m-%d", i), Tag: "T", Body: []byte(fmt.Sprintf("body-%d", i))})
	}
	if res, err := b.Send(ctx, "orders", msgs, model.Producer{}); err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %+v", err, res)
	}
	dispatched()
	receive := func() []*model.Delivered {
		t.Helper()
		got, err := b.Receive(ctx, broker.ReceiveRequest{Group: "billing", Topic: "orders", Max: 3, Invisible: 10 * time.Second, QueueID: -1})
		if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
			t.Fatal(err)
		}
		return got
	}
	if got := receive(); len(got) != 3 {
		t.Fatalf("received %d of 3", len(got))
	}
	clk.Advance(10 * time.Second)
	if got := receive(); len(got) != 0 {
		t.Fatalf("delivered past the one attempt: %d", len(got))
	}
	dispatched()

	page, err := s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: "billing", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if page.Topic != "%DLQ%billing" || page.Pending != 3 || len(page.Messages) != 2 {
		t.Fatalf("list: %v", page)
	}
	if m := page.Messages[0]; m.DlqOriginTopic != "orders" || m.Tag != "T" || string(m.Body) != "body-"+m.MessageId[2:] || m.Topic != "%DLQ%billing" {
		t.Fatalf("dead letter: %v", m)
	}

	red, err := s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "billing", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(red.Redriven) != 2 || red.Pending != 1 || red.Redriven[0].Topic != "orders" {
		t.Fatalf("redrive: %v", red)
	}
	red, err = s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "billing"})
	if err != nil || len(red.Redriven) != 1 || red.Pending != 0 {
		t.Fatalf("second redrive: %v %v", err, red)
	}
	dispatched()
	if got := receive(); len(got) != 3 {
		t.Fatalf("received %d redriven messages, want 3", len(got))
	}
	page, err = s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: "billing"})
	if err != nil || page.Pending != 0 || len(page.Messages) != 0 {
		t.Fatalf("after redrive: %v %v", err, page)
	}
	red, err = s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "billing"})
	if err != nil || len(red.Redriven) != 0 || red.Pending != 0 {
		t.Fatalf("redrive of nothing: %v %v", err, red)
	}

	_, err = s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
	wantCode(t, err, codes.InvalidArgument, "required")
	_, err = s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "billing", Max: -1})
	wantCode(t, err, codes.InvalidArgument, "max -1")
	_, err = s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: "billing", Max: 257})
	wantCode(t, err, codes.InvalidArgument, "max 257")
	_, err = s.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: "nope"})
	wantCode(t, err, codes.NotFound, `"nope"`)
	_, err = s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "nope"})
	wantCode(t, err, codes.NotFound, `"nope"`)
}

// A redrive that stopped at a failed send answers with what it sent
// before; one that sent nothing answers the error.
func TestRedriveStoppedEarly(t *testing.T) {
	f := newFake()
	s := New(f, Options{})
	ctx := context.Background()
	_, err := s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "g"})
	wantCode(t, err, codes.Unavailable, "store closed")
	f.redriven = broker.RedriveResult{Redriven: []broker.Redriven{{MessageID: "m-1", Topic: "t", QueueID: 1, QueueOffset: 7}}, Pending: 4}
	res, err := s.RedriveDeadLetters(ctx, &adminv1.RedriveDeadLettersRequest{Group: "g"})
	if err != nil || len(res.Redriven) != 1 || res.Redriven[0].QueueOffset != 7 || res.Pending != 4 {
		t.Fatalf("partial redrive: %v %v", err, res)
	}
}
