package admin

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/mqerr"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// resetTo is a ResetOffsetRequest for group and topic with target to (nil:
// none).
func resetTo(group, topic string, to any) *adminv1.ResetOffsetRequest {
	r := &adminv1.ResetOffsetRequest{Group: group, Topic: topic}
	switch to := to.(type) {
	case adminv1.ResetPosition:
		r.To = &adminv1.ResetOffsetRequest_Position{Position: to}
	case *timestamppb.Timestamp:
		r.To = &adminv1.ResetOffsetRequest_Time{Time: to}
	}
	return r
}

// Requests the service refuses before the broker sees them.
func TestResetOffsetValidation(t *testing.T) {
	f := newFake()
	s := New(f, Options{})
	latest := adminv1.ResetPosition_RESET_POSITION_LATEST
	cases := []struct {
		name string
		req  *adminv1.ResetOffsetRequest
		says string
	}{
		{"no group", resetTo("", "orders", latest), "consumer group name is required"},
		{"blank group", resetTo("  ", "orders", latest), "consumer group name is required"},
		{"no topic", resetTo("billing", "", latest), "topic name is required"},
		{"no target", resetTo("billing", "orders", nil),
			`consumer group "billing" in topic "orders": where to reset is required: a time, a position (RESET_POSITION_EARLIEST or RESET_POSITION_LATEST), or an offset with queue_id`},
		{"unspecified position", resetTo("billing", "orders", adminv1.ResetPosition_RESET_POSITION_UNSPECIFIED),
			"position RESET_POSITION_UNSPECIFIED: want RESET_POSITION_EARLIEST or RESET_POSITION_LATEST"},
		{"unknown position", resetTo("billing", "orders", adminv1.ResetPosition(7)), "position 7: want"},
		{"time set to nil", resetTo("billing", "orders", (*timestamppb.Timestamp)(nil)), `consumer group "billing" in topic "orders": time:`},
		{"time beyond year 9999", resetTo("billing", "orders", &timestamppb.Timestamp{Seconds: 1 << 40}), "time:"},
		{"offset without a queue", &adminv1.ResetOffsetRequest{Group: "billing", Topic: "orders", To: &adminv1.ResetOffsetRequest_Offset{Offset: 5}},
			`consumer group "billing" in topic "orders": a reset to an offset needs queue_id`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.ResetOffset(context.Background(), c.req)
			wantCode(t, err, codes.InvalidArgument, c.says)
		})
	}
	if f.resets != 0 {
		t.Fatalf("the broker was called %d times for refused requests", f.resets)
	}
}

// Each target reaches the broker as its ResetTo (with the time for
// ResetToTime only), and the answer comes back by queue id.
func TestResetOffsetTargets(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC)
	cases := []struct {
		to   any
		want broker.ResetOffsetRequest
	}{
		{timestamppb.New(at), broker.ResetOffsetRequest{Group: "billing", Topic: "orders", To: broker.ResetToTime, Time: at}},
		{adminv1.ResetPosition_RESET_POSITION_EARLIEST, broker.ResetOffsetRequest{Group: "billing", Topic: "orders", To: broker.ResetToEarliest}},
		{adminv1.ResetPosition_RESET_POSITION_LATEST, broker.ResetOffsetRequest{Group: "billing", Topic: "orders", To: broker.ResetToLatest}},
	}
	for _, c := range cases {
		f := newFake()
		f.moved = []broker.QueueReset{{QueueID: 1, Previous: 7, Offset: 0}, {QueueID: 0, Previous: 3, Offset: 12}}
		resp, err := New(f, Options{}).ResetOffset(context.Background(), resetTo("billing", "orders", c.to))
		if err != nil {
			t.Fatalf("%v: %v", c.to, err)
		}
		if f.resets != 1 || f.reset.Group != c.want.Group || f.reset.Topic != c.want.Topic || f.reset.To != c.want.To || !f.reset.Time.Equal(c.want.Time) {
			t.Fatalf("%v: broker got %+v (%d calls), want %+v", c.to, f.reset, f.resets, c.want)
		}
		q := resp.GetQueues()
		if len(q) != 2 || q[0].GetQueueId() != 0 || q[0].GetPreviousOffset() != 3 || q[0].GetOffset() != 12 ||
			q[1].GetQueueId() != 1 || q[1].GetPreviousOffset() != 7 || q[1].GetOffset() != 0 {
			t.Fatalf("%v: response %v", c.to, resp)
		}
	}
}

// An offset goes to the broker with its queue; a queue restricts any
// target.
func TestResetOffsetQueue(t *testing.T) {
	for _, c := range []struct {
		req  *adminv1.ResetOffsetRequest
		to   broker.ResetTo
		off  int64
		want int32
	}{
		{&adminv1.ResetOffsetRequest{Group: "billing", Topic: "orders", To: &adminv1.ResetOffsetRequest_Offset{Offset: 42}, QueueId: proto.Int32(3)},
			broker.ResetToOffset, 42, 3},
		{&adminv1.ResetOffsetRequest{Group: "billing", Topic: "orders",
			To: &adminv1.ResetOffsetRequest_Position{Position: adminv1.ResetPosition_RESET_POSITION_LATEST}, QueueId: proto.Int32(0)},
			broker.ResetToLatest, 0, 0},
	} {
		f := newFake()
		if _, err := New(f, Options{}).ResetOffset(context.Background(), c.req); err != nil {
			t.Fatal(err)
		}
		if f.reset.To != c.to || f.reset.Offset != c.off || f.reset.Queue == nil || *f.reset.Queue != c.want {
			t.Fatalf("%v: broker got %+v", c.req, f.reset)
		}
	}
	// Without queue_id every queue moves.
	f := newFake()
	if _, err := New(f, Options{}).ResetOffset(context.Background(), resetTo("billing", "orders", adminv1.ResetPosition_RESET_POSITION_EARLIEST)); err != nil || f.reset.Queue != nil {
		t.Fatalf("broker got %+v (%v)", f.reset, err)
	}
}

// Broker errors go through toStatus and name what they are about.
func TestResetOffsetBrokerErrors(t *testing.T) {
	f := newFake()
	s := New(f, Options{})
	ctx := context.Background()
	req := resetTo("billing", "orders", adminv1.ResetPosition_RESET_POSITION_EARLIEST)

	f.resetErr = mqerr.Errorf(mqerr.KindTopicNotFound, "does not exist")
	_, err := s.ResetOffset(ctx, req)
	wantCode(t, err, codes.NotFound, `topic "orders": does not exist`)

	f.resetErr = mqerr.Errorf(mqerr.KindGroupNotFound, "does not exist")
	_, err = s.ResetOffset(ctx, req)
	wantCode(t, err, codes.NotFound, `consumer group "billing": does not exist`)

	f.resetErr = errInternal
	_, err = s.ResetOffset(ctx, req)
	wantCode(t, err, codes.Unavailable, `consumer group "billing": store closed`)

	f.resetErr = mqerr.Errorf(mqerr.KindNotImplemented, "reset offset: not yet")
	_, err = s.ResetOffset(ctx, req)
	wantCode(t, err, codes.Unimplemented, "not yet")

	// An empty answer (a topic without queues) is an empty list, not an
	// error.
	f.resetErr, f.moved = nil, nil
	resp, err := s.ResetOffset(ctx, req)
	if err != nil || len(resp.GetQueues()) != 0 {
		t.Fatalf("empty answer: %v %v", resp, err)
	}
}
