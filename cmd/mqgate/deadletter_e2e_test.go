package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

// Dead letters are listed and redriven with the real binary: three
// messages a consumer forwarded to the group's dead-letter queue are
// listed, two are redriven with --max, then the rest, and the group
// receives all three again from their topic.
func TestGroupDeadLettersEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true})
	c := cli{t: t, bin: testutil.Binary(t), addr: p.GRPC}
	c.ok("", "topic", "create", "orders", "--queues", "1")
	c.ok("", "group", "create", "billing")
	c.ok("one\ntwo\nthree\n", "send", "--topic", "orders", "--key", "dl", "-")

	out := c.ok("", "group", "dead-letters", "billing")
	if out != "0 pending in %DLQ%billing\n" {
		t.Fatalf("dead-letters before any: %q", out)
	}
	forwardAll(t, p.GRPC, "billing", "orders", 3)

	out = c.ok("", "group", "dead-letters", "billing", "--max", "2", "--json")
	var page struct {
		Topic    string `json:"topic"`
		Pending  string `json:"pending"`
		Messages []struct {
			Body           []byte `json:"body"`
			DlqOriginTopic string `json:"dlqOriginTopic"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("dead-letters --json: %v: %q", err, out)
	}
	if page.Topic != "%DLQ%billing" || page.Pending != "3" || len(page.Messages) != 2 || page.Messages[0].DlqOriginTopic != "orders" {
		t.Fatalf("dead-letters --json: %q", out)
	}
	out = c.ok("", "group", "dead-letters", "billing")
	if !strings.HasPrefix(out, "3 pending in %DLQ%billing\n") || !strings.Contains(out, "one") || !strings.Contains(out, "three") {
		t.Fatalf("dead-letters: %q", out)
	}

	out = c.ok("", "group", "redrive", "billing", "--max", "2")
	if !strings.HasPrefix(out, "redrove 2 dead letters of group billing, 1 still pending\n") || strings.Count(out, "orders") != 2 {
		t.Fatalf("redrive --max 2: %q", out)
	}
	out = c.ok("", "group", "redrive", "billing")
	if !strings.HasPrefix(out, "redrove 1 dead letters of group billing, 0 still pending\n") {
		t.Fatalf("redrive: %q", out)
	}
	out = c.ok("", "receive", "--group", "billing", "--topic", "orders", "--max", "3", "--json")
	if got := jsonLines(t, out); len(got) != 3 {
		t.Fatalf("received %d redriven messages: %q", len(got), out)
	}

	c.fails(exitUsage, "--max 300", "group", "dead-letters", "billing", "--max", "300")
	c.fails(exitUsage, "--max -1", "group", "redrive", "billing", "--max", "-1")
	c.fails(exitFail, "nope", "group", "redrive", "nope")
}

// forwardAll receives n messages of topic as group and forwards each to
// the group's dead-letter queue, as a consumer does with a message it
// gives up on.
func forwardAll(t *testing.T, addr, group, topic string, n int) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := v2.NewMessagingServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "dead-letter-test")
	g, tp := &v2.Resource{Name: group}, &v2.Resource{Name: topic}
	var got []*v2.Message
	for len(got) < n {
		stream, err := api.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: g, MessageQueue: &v2.MessageQueue{Topic: tp, Id: -1},
			FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}, BatchSize: int32(n - len(got)),
			InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(5 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := r.GetMessage(); m != nil {
				got = append(got, m)
			}
		}
	}
	for _, m := range got {
		res, err := api.ForwardMessageToDeadLetterQueue(ctx, &v2.ForwardMessageToDeadLetterQueueRequest{Group: g, Topic: tp,
			ReceiptHandle: m.GetSystemProperties().GetReceiptHandle(), MessageId: m.GetSystemProperties().GetMessageId(),
			DeliveryAttempt: 1, MaxDeliveryAttempts: 16})
		if err != nil || res.GetStatus().GetCode() != v2.Code_OK {
			t.Fatalf("forward to the dead-letter queue: %v %v", err, res.GetStatus())
		}
	}
}
