package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/internal/testutil"
)

// kill -9 in the middle of consumption, restart on the same data dir:
// acked messages are not delivered again, in-flight ones come back when
// their deadline passes (not before), and nothing is lost.
func TestKill9MidConsumption(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group := uniq("durable"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "4")
	cli(t, p, "group", "create", group)
	sent := sendBodies(t, newProducer(t, p, topic), topic, 30, "")

	c1 := newConsumer(t, p, group, 0, all(topic))
	r1 := dialRaw(t, p)
	receivedAt := map[string]time.Time{}
	got := collect(t, c1, 20, minInvisible, 60*time.Second, func(mv *rmq.MessageView) { receivedAt[mv.GetMessageId()] = time.Now() })
	acked, inflight := map[string]bool{}, map[string]bool{}
	for i, mv := range got {
		if i < 10 {
			// Raw ack: the official SimpleConsumer.Ack ignores the status.
			wantCode(t, "ack before the crash", r1.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
			acked[mv.GetMessageId()] = true
		} else {
			inflight[mv.GetMessageId()] = true
		}
	}
	if len(acked) != 10 || len(inflight) != 10 {
		t.Fatalf("collected %d deliveries with duplicates: %v", len(got), ids(got))
	}

	p.Kill9()
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	c2 := newConsumer(t, p2, group, 0, all(topic))
	after := map[string]*rmq.MessageView{}
	collect(t, c2, 20, 30*time.Second, minInvisible+60*time.Second, func(mv *rmq.MessageView) {
		id := mv.GetMessageId()
		switch {
		case acked[id]:
			t.Fatalf("acked message %s delivered again after the restart", id)
		case after[id] != nil:
			t.Fatalf("message %s delivered twice after the restart", id)
		case inflight[id]:
			if since := time.Since(receivedAt[id]); since < minInvisible-slack {
				t.Fatalf("in-flight message %s came back %s after it was received, before its %s deadline", id, since, minInvisible)
			}
			if mv.GetDeliveryAttempt() < 2 {
				t.Fatalf("in-flight message %s redelivered with attempt %d", id, mv.GetDeliveryAttempt())
			}
		case sent[id] == "":
			t.Fatalf("unknown message %s", id)
		}
		if string(mv.GetBody()) != sent[id] {
			t.Fatalf("message %s body %q, sent %q", id, mv.GetBody(), sent[id])
		}
		after[id] = mv
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c2.Ack(ctx, mv)
	})
	for id := range inflight {
		if after[id] == nil {
			t.Fatalf("in-flight message %s lost", id)
		}
	}
	total := len(acked) + len(after)
	if total != len(sent) {
		t.Fatalf("%d of %d messages accounted for: lost %v", total, len(sent), missing(sent, acked, after))
	}
	if extra := receive(t, c2, 32, 30*time.Second); len(extra) != 0 {
		t.Fatalf("more deliveries after everything was acked: %v", ids(extra))
	}
}

// A topic whose messages a group received and acked is deleted and
// created again, two messages are sent to it, and the process is killed
// (within the POP snapshot interval of the deletion): after the restart
// the group gets the two new messages, as it would from a new topic, and
// nothing of the deleted one.
func TestKill9AfterTopicRecreated(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group := uniq("recreated"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "1")
	cli(t, p, "group", "create", group)
	sendBodies(t, newProducer(t, p, topic), topic, 3, "old")
	c1 := newConsumer(t, p, group, 0, all(topic))
	r1 := dialRaw(t, p)
	for _, mv := range collect(t, c1, 3, minInvisible, 60*time.Second, nil) {
		wantCode(t, "ack before the deletion", r1.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
	}
	cli(t, p, "topic", "delete", topic)
	cli(t, p, "topic", "create", topic, "--queues", "1")
	sent := sendBodies(t, newProducer(t, p, topic), topic, 2, "new")

	p.Kill9()
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	c2 := newConsumer(t, p2, group, 0, all(topic))
	got := map[string]bool{}
	collect(t, c2, 2, minInvisible, 60*time.Second, func(mv *rmq.MessageView) {
		id := mv.GetMessageId()
		if sent[id] == "" || string(mv.GetBody()) != sent[id] {
			t.Fatalf("after the restart got %s %q, not a message sent to the new topic", id, mv.GetBody())
		}
		if mv.GetDeliveryAttempt() != 1 {
			t.Fatalf("message %s delivered as attempt %d, want 1", id, mv.GetDeliveryAttempt())
		}
		got[id] = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c2.Ack(ctx, mv)
	})
	if len(got) != 2 {
		t.Fatalf("after the restart got %d of the 2 new messages", len(got))
	}
	if extra := receive(t, c2, 32, minInvisible); len(extra) != 0 {
		t.Fatalf("more deliveries after both were acked: %v", ids(extra))
	}
}

func missing(sent map[string]string, acked map[string]bool, after map[string]*rmq.MessageView) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(sent)) {
		if !acked[id] && after[id] == nil {
			out = append(out, id)
		}
	}
	return out
}

// A forged or modified receipt handle is rejected with
// INVALID_RECEIPT_HANDLE and changes nothing: the genuine handle still
// acks afterwards.
func TestForgedReceiptHandleRejected(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group, other := uniq("forge"), uniq("g"), uniq("other")
	cli(t, p, "topic", "create", topic, "--queues", "1")
	cli(t, p, "group", "create", group)
	cli(t, p, "group", "create", other)
	sendBodies(t, newProducer(t, p, topic), topic, 1, "")
	r := dialRaw(t, p)

	var msgs []*pb.Message
	for deadline := time.Now().Add(30 * time.Second); len(msgs) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("nothing to receive")
		}
		st, m := r.receiveRaw(r.id, recvReq(group, topic, 1, time.Minute), 5*time.Second)
		if st.GetCode() != pb.Code_OK && st.GetCode() != pb.Code_MESSAGE_NOT_FOUND {
			t.Fatalf("receive: %v", st)
		}
		msgs = m
	}
	h := msgs[0].GetSystemProperties().GetReceiptHandle()
	if h == "" || !isPrintableASCII(h) || len(h) > 255 {
		t.Fatalf("receipt handle %q: want printable ASCII under 256 bytes", h)
	}
	forgeries := map[string]string{
		"one character changed": flip(h, len(h)/2),
		"truncated":             h[:len(h)-4],
		"extended":              h + "AAAA",
		"made up":               "r1." + strings.Repeat("A", len(h)-3),
		"empty":                 "",
	}
	for name, f := range forgeries {
		wantCode(t, "ack with a "+name+" handle", r.ack(group, topic, f), pb.Code_INVALID_RECEIPT_HANDLE)
		ci, err := r.c.ChangeInvisibleDuration(r.ctx(10*time.Second), &pb.ChangeInvisibleDurationRequest{
			Group: res(group), Topic: res(topic), ReceiptHandle: f, InvisibleDuration: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, "change with a "+name+" handle", ci.Status, pb.Code_INVALID_RECEIPT_HANDLE)
	}
	// The genuine handle used with another group is refused too.
	wantCode(t, "ack from another group", r.ack(other, topic, h), pb.Code_INVALID_RECEIPT_HANDLE)
	// None of that touched the delivery.
	wantCode(t, "ack with the genuine handle", r.ack(group, topic, h), pb.Code_OK)
}

// flip changes the character at i to another base64url character.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// The same official producer and SimpleConsumer keep working across a
// kill -9 and a restart of mqgate on the same address and data dir, as
// behind a rolling restart: their connections come back, and the new
// process takes the next sends, receives and acks from clients it has
// only heard of through their calls.
func TestClientsSurviveRestart(t *testing.T) {
	e2e(t)
	opts := testutil.StartOptions{DataDir: t.TempDir(), Args: []string{"--grpc-addr", testutil.UnusedAddr(t)}}
	p := start(t, opts)
	topic, group := uniq("restart"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", group)
	pr := newProducer(t, p, topic)
	c := newConsumer(t, p, group, 0, all(topic))
	ackAll := func(mv *rmq.MessageView) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Ack(ctx, mv); err != nil {
			t.Fatalf("ack %s: %v", mv.GetMessageId(), err)
		}
	}
	sent := sendBodies(t, pr, topic, 5, "before")
	collect(t, c, len(sent), minInvisible, 30*time.Second, ackAll)

	p.Kill9()
	p2 := start(t, opts)
	if p2.GRPC != p.GRPC {
		t.Fatalf("restarted on %s, want %s", p2.GRPC, p.GRPC)
	}
	// The first send after the restart may meet a connection that is not
	// back yet; the producer's own retries are not counted on.
	after := map[string]string{}
	failed := 0
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; len(after) < 5; i++ {
		body := fmt.Sprintf("after-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(body)})
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the producer could not send within 30 s of the restart: %v", err)
			}
			failed++
			continue
		}
		after[rs[0].MessageID] = body
	}
	t.Logf("%d sends failed after the restart before the producer got through", failed)
	got := collect(t, c, len(after), minInvisible, 60*time.Second, ackAll)
	for _, mv := range got {
		id := mv.GetMessageId()
		if sent[id] != "" {
			t.Fatalf("message %s, acked before the crash, delivered again", id)
		}
		if after[id] != string(mv.GetBody()) {
			t.Fatalf("message %s body %q, sent %q", id, mv.GetBody(), after[id])
		}
	}
	if extra := receive(t, c, 32, minInvisible); len(extra) != 0 {
		t.Fatalf("more deliveries after everything was acked: %v", ids(extra))
	}
}
