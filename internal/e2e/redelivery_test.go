package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The shortest invisible duration a receive may ask for:
// the timing tests below wait for it, so they run in parallel.
const minInvisible = 10 * time.Second

// slack absorbs the delay between the server popping a message and the
// client seeing it, which makes the client's first timestamp late.
const slack = 500 * time.Millisecond

// A message not acked within its invisible duration comes back — not
// before — with its delivery attempt incremented.
func TestRedeliveryAfterInvisibleDuration(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("redeliver"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", group)
	sent := sendBodies(t, newProducer(t, p, topic), topic, 1, "")
	c := newConsumer(t, p, group, 0, all(topic))

	first := collect(t, c, 1, minInvisible, 30*time.Second, nil)[0]
	t0 := time.Now()
	if first.GetDeliveryAttempt() != 1 || sent[first.GetMessageId()] == "" {
		t.Fatalf("first delivery: attempt %d id %s", first.GetDeliveryAttempt(), first.GetMessageId())
	}
	var again *rmq.MessageView
	for again == nil {
		if time.Since(t0) > minInvisible+30*time.Second {
			t.Fatal("not redelivered within 30 s after the invisible duration")
		}
		for _, mv := range receive(t, c, 1, minInvisible) {
			again = mv
		}
	}
	if elapsed := time.Since(t0); elapsed < minInvisible-slack {
		t.Fatalf("redelivered after %s, before the %s invisible duration", elapsed, minInvisible)
	}
	if again.GetMessageId() != first.GetMessageId() || again.GetDeliveryAttempt() != 2 || string(again.GetBody()) != string(first.GetBody()) {
		t.Fatalf("redelivery: id %s attempt %d body %q", again.GetMessageId(), again.GetDeliveryAttempt(), again.GetBody())
	}
	// The first delivery's handle died with its deadline.
	r := dialRaw(t, p)
	wantCode(t, "ack with the expired handle", r.ack(group, topic, first.GetReceiptHandle()), pb.Code_INVALID_RECEIPT_HANDLE)
	wantCode(t, "ack with the current handle", r.ack(group, topic, again.GetReceiptHandle()), pb.Code_OK)
}

// ChangeInvisibleDuration extends the invisibility; the new handle acks;
// the superseded one fails and changes nothing.
func TestChangeInvisibleDuration(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("change"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "1")
	cli(t, p, "group", "create", group)
	sendBodies(t, newProducer(t, p, topic), topic, 1, "")
	c := newConsumer(t, p, group, 0, all(topic))

	mv := collect(t, c, 1, minInvisible, 30*time.Second, nil)[0]
	t0 := time.Now()
	old := mv.GetReceiptHandle()
	if err := c.ChangeInvisibleDuration(mv, 30*time.Second); err != nil {
		t.Fatalf("change invisible duration: %v", err)
	}
	renewed := mv.GetReceiptHandle() // the client stores the returned handle
	if renewed == "" || renewed == old {
		t.Fatalf("new handle %q (old %q)", renewed, old)
	}
	// Past the original deadline the message stays invisible.
	for time.Since(t0) < minInvisible+2*time.Second {
		if got := receive(t, c, 1, minInvisible); len(got) != 0 {
			t.Fatalf("redelivered after %s although extended to 30 s", time.Since(t0))
		}
	}
	r := dialRaw(t, p)
	wantCode(t, "ack with the superseded handle", r.ack(group, topic, old), pb.Code_INVALID_RECEIPT_HANDLE)
	// A failed change echoes the handle it was given.
	resp, err := r.c.ChangeInvisibleDuration(r.ctx(10*time.Second), &pb.ChangeInvisibleDurationRequest{
		Group: res(group), Topic: res(topic), ReceiptHandle: old, InvisibleDuration: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "change with the superseded handle", resp.Status, pb.Code_INVALID_RECEIPT_HANDLE)
	if resp.ReceiptHandle != old {
		t.Fatalf("failed change answered handle %q, want the request's", resp.ReceiptHandle)
	}
	wantCode(t, "ack with the new handle", r.ack(group, topic, renewed), pb.Code_OK)
}

// A group created with --max-delivery-attempts 2 gets a message twice,
// then it moves to %DLQ%<group>, readable like any topic, and is not
// delivered to the group again.
func TestMaxAttemptsThenDeadLetter(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group, reader := uniq("dlq"), uniq("g"), uniq("dlq-reader")
	cli(t, p, "topic", "create", topic, "--queues", "1")
	out := cli(t, p, "group", "create", group, "--max-delivery-attempts", "2")
	if want := "max delivery attempts 2"; !strings.Contains(out, want) {
		t.Fatalf("group create said %q", out)
	}
	cli(t, p, "group", "create", reader)
	sent := sendBodies(t, newProducer(t, p, topic), topic, 1, "")
	c := newConsumer(t, p, group, 0, all(topic))

	first := collect(t, c, 1, minInvisible, 30*time.Second, nil)[0]
	var second *rmq.MessageView
	deadline := time.Now().Add(minInvisible + 40*time.Second)
	for second == nil && time.Now().Before(deadline) {
		for _, mv := range receive(t, c, 1, minInvisible) {
			second = mv
		}
	}
	if second == nil || second.GetMessageId() != first.GetMessageId() || second.GetDeliveryAttempt() != 2 {
		t.Fatalf("second delivery %v", second)
	}

	// After the second deadline it goes to the DLQ instead of a third
	// delivery. Like upstream, the move happens when the group next pops,
	// so keep the group receiving (it must get nothing) while reading the
	// DLQ. The DLQ topic is created on first use: wait until it routes.
	r := dialRaw(t, p)
	dlq := "%DLQ%" + group
	until := time.Now().Add(minInvisible + 40*time.Second)
	noThird := func() {
		if got := receive(t, c, 1, minInvisible); len(got) != 0 {
			t.Fatalf("delivered a third time (attempt %d) to a group allowing 2", got[0].GetDeliveryAttempt())
		}
	}
	for {
		resp, err := r.c.QueryRoute(r.ctx(10*time.Second), &pb.QueryRouteRequest{Topic: res(dlq), Endpoints: endpointsOf(t, p)})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status.Code == pb.Code_OK {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("%s not routable: %v", dlq, resp.Status)
		}
		noThird()
	}
	dc := newConsumer(t, p, reader, 0, all(dlq))
	var dead *rmq.MessageView
	for dead == nil {
		if time.Now().After(until) {
			t.Fatal("message never reached the dead-letter queue")
		}
		noThird()
		for _, mv := range receive(t, dc, 1, 30*time.Second) {
			dead = mv
		}
	}
	if dead.GetMessageId() != first.GetMessageId() || string(dead.GetBody()) != sent[first.GetMessageId()] {
		t.Fatalf("DLQ holds %s %q, want %s %q", dead.GetMessageId(), dead.GetBody(), first.GetMessageId(), sent[first.GetMessageId()])
	}
	noThird()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dc.Ack(ctx, dead); err != nil {
		t.Fatal(err)
	}
}
