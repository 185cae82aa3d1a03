package classic

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// One store, two protocols: what the official gRPC client sends, a classic
// push consumer reads, and the reverse — same ids, bodies, tags, keys and
// user properties; and a classic group's dead letters are readable over
// gRPC.

func grpcConfig(p *testutil.Proc, group string) *rmq.Config { return e2eutil.Config(p.GRPC, group) }

func grpcProducer(t testing.TB, p *testutil.Proc, topic string) rmq.Producer {
	t.Helper()
	return e2eutil.StartProducer(t, grpcConfig(p, ""), rmq.WithTopics(topic))
}

func grpcConsumer(t *testing.T, p *testutil.Proc, group, topic string) rmq.SimpleConsumer {
	t.Helper()
	e2eutil.CLI(t, p.GRPC, "group", "create", group)
	return e2eutil.StartSimpleConsumer(t, grpcConfig(p, group), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
}

// receiveAll receives and acks until want distinct ids arrived.
func receiveAll(t *testing.T, c rmq.SimpleConsumer, want int, timeout time.Duration) map[string]*rmq.MessageView {
	t.Helper()
	got := map[string]*rmq.MessageView{}
	deadline := time.Now().Add(timeout)
	for len(got) < want {
		if time.Now().After(deadline) {
			t.Fatalf("gRPC consumer received %d distinct messages within %s, want %d", len(got), timeout, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(ctx, 16, 20*time.Second)
		cancel()
		if e2eutil.IsNoMessage(err) {
			continue // no new message
		}
		if err != nil {
			t.Fatalf("gRPC receive: %v", err)
		}
		for _, mv := range mvs {
			got[mv.GetMessageId()] = mv
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.Ack(ctx, mv); err != nil {
				t.Errorf("ack: %v", err)
			}
			cancel()
		}
	}
	return got
}

func TestInteropGRPCProducerClassicConsumer(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("T")
	createTopic(t, p, topic, 4)
	pr := grpcProducer(t, p, topic)
	sent := map[string]string{} // body → gRPC message id
	for i := range 5 {
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("from-grpc-%d", i))}
		m.SetTag("g")
		m.SetKeys(fmt.Sprintf("key%d", i), "shared")
		m.AddProperty("origin", "grpc")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, m)
		cancel()
		if err != nil || len(rs) != 1 {
			t.Fatalf("gRPC send %d: %v %v", i, rs, err)
		}
		sent[string(m.Body)] = rs[0].MessageID
	}
	col := newCollector()
	newPushConsumer(t, p, uniq("CG"), topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 45*time.Second, "the gRPC-sent messages", func() bool { return len(col.seen) >= len(sent) })
	col.mu.Lock()
	defer col.mu.Unlock()
	for body, id := range sent {
		ms := col.seen[body]
		if len(ms) == 0 {
			t.Fatalf("%s not consumed", body)
		}
		m := ms[0]
		if m.MsgId != id || m.Topic != topic || m.GetTags() != "g" || !strings.HasPrefix(m.GetKeys(), "key") || m.GetProperty("origin") != "grpc" {
			t.Errorf("%s: id %q (sent %q) topic %q tag %q keys %q origin %q", body, m.MsgId, id, m.Topic, m.GetTags(), m.GetKeys(), m.GetProperty("origin"))
		}
	}
}

func TestInteropClassicProducerGRPCConsumer(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("G")
	createTopic(t, p, topic, 4)
	c := grpcConsumer(t, p, group, topic)
	pr := newProducer(t, p)
	ctx := ctxT(t, 60*time.Second)
	sent := map[string]string{} // message id → body
	single := primitive.NewMessage(topic, []byte("from-classic")).WithTag("c").WithKeys([]string{"ck1", "ck2"})
	single.WithProperty("origin", "classic")
	big := bytes.Repeat([]byte("zlib me "), 1000) // compressed by the client, inflated by mqgate
	for _, m := range []*primitive.Message{single, primitive.NewMessage(topic, big)} {
		r, err := pr.SendSync(ctx, m)
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("classic send: %v %v", r, err)
		}
		sent[r.MsgID] = string(m.Body)
	}
	r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte("batch-1")), primitive.NewMessage(topic, []byte("batch-2")))
	if err != nil || r.Status != primitive.SendOK {
		t.Fatalf("classic batch: %v %v", r, err)
	}
	got := receiveAll(t, c, 4, 45*time.Second)
	for id, body := range sent {
		mv := got[id]
		if mv == nil {
			t.Fatalf("gRPC consumer did not get classic message %s (%.20q); got ids %v", id, body, keysOf(got))
		}
		if string(mv.GetBody()) != body {
			t.Errorf("%s: body %.30q, sent %.30q", id, mv.GetBody(), body)
		}
	}
	var mv *rmq.MessageView
	for _, v := range got {
		if string(v.GetBody()) == "from-classic" {
			mv = v
		}
	}
	if mv.GetTag() == nil || *mv.GetTag() != "c" || strings.Join(mv.GetKeys(), ",") != "ck1,ck2" || mv.GetProperties()["origin"] != "classic" {
		t.Errorf("classic message over gRPC: tag %v keys %v properties %v", mv.GetTag(), mv.GetKeys(), mv.GetProperties())
	}
	for k := range mv.GetProperties() {
		if k != "origin" {
			t.Errorf("gRPC consumer sees internal property %q", k)
		}
	}
}

func TestInteropClassicDeadLettersReadOverGRPC(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 1)
	pr := newProducer(t, p)
	ctx := ctxT(t, 60*time.Second)
	r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte("dead")))
	if err != nil || r.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", r, err)
	}
	col := newCollector()
	newPushConsumer(t, p, group, topic, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeRetryLater, nil
	}, consumer.WithMaxReconsumeTimes(0))
	col.wait(t, 30*time.Second, "the delivery", func() bool { return len(col.seen["dead"]) > 0 })
	c := grpcConsumer(t, p, uniq("G"), "%DLQ%"+group)
	got := receiveAll(t, c, 1, 45*time.Second)
	if mv := got[r.MsgID]; mv == nil || string(mv.GetBody()) != "dead" {
		t.Fatalf("dead letter over gRPC: %v (want id %s)", keysOf(got), r.MsgID)
	}
}

func keysOf(m map[string]*rmq.MessageView) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// waitCommitted waits until a group's committed offsets over a topic's
// queues, read back over gRPC GetOffset (the same offset table
// UPDATE_CONSUMER_OFFSET writes), add up to want.
func waitCommitted(t *testing.T, p *testutil.Proc, group, topic string, queues int32, want int64, d time.Duration) {
	t.Helper()
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := v2.NewMessagingServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(ctxT(t, d), "x-mq-client-id", "e2e-offset-reader")
	var sum int64
	for {
		sum = 0
		for q := range queues {
			r, err := c.GetOffset(ctx, &v2.GetOffsetRequest{
				Group:        &v2.Resource{Name: group},
				MessageQueue: &v2.MessageQueue{Topic: &v2.Resource{Name: topic}, Id: q},
			})
			if err != nil {
				t.Fatalf("GetOffset %s/%s/%d: %v", group, topic, q, err)
			}
			if r.GetStatus().GetCode() == v2.Code_OK {
				sum += r.GetOffset()
			}
		}
		if sum >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s committed %d of %d offsets on %s within %s", group, sum, want, topic, d)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
