package e2e

// Helpers of the message-model tests (FIFO, delay, transactions, push
// consumers, pull and offsets).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

var msgIDSeq atomic.Int64

// msgID is a v1-shaped message id unique within the process,
// for messages sent through the raw client.
func msgID() string { return fmt.Sprintf("01AABBCCDDEEFF0000%016X", msgIDSeq.Add(1)) }

// send sends one message with the official producer and returns its
// receipt.
func send(t *testing.T, pr rmq.Producer, m *rmq.Message) *rmq.SendReceipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rs, err := pr.Send(ctx, m)
	if err != nil {
		t.Fatalf("send %q: %v", m.Body, err)
	}
	return rs[0]
}

// newTxProducer starts a producer of topics with a transaction checker.
func newTxProducer(t *testing.T, p *testutil.Proc, check func(*rmq.MessageView) rmq.TransactionResolution, topics ...string) rmq.Producer {
	t.Helper()
	return e2eutil.StartProducer(t, config(p, ""), rmq.WithTopics(topics...),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: check}))
}

// newPushConsumers starts n official PushConsumers of group on topic;
// listen gets the consumer's index and each message. They are stopped
// together at cleanup: GracefulStop waits for the consumer's parked long
// poll (up to the 20 s the server's Settings allow), so stopping them one
// after the other would add that wait per consumer.
func newPushConsumers(t *testing.T, p *testutil.Proc, n int, group, topic string, listen func(int, *rmq.MessageView) rmq.ConsumerResult) {
	t.Helper()
	var started []rmq.PushConsumer
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range started {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.GracefulStop() }()
		}
		wg.Wait()
	})
	for i := range n {
		c, err := rmq.NewPushConsumer(config(p, group),
			rmq.WithPushSubscriptionExpressions(all(topic)),
			rmq.WithPushConsumptionThreadCount(4),
			rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult { return listen(i, mv) }}))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatalf("push consumer start: %v", err)
		}
		started = append(started, c)
	}
}

// events is a goroutine-safe log of what listeners and receive loops saw.
type events[T any] struct {
	mu      sync.Mutex
	list    []T
	changed chan struct{}
}

func newEvents[T any]() *events[T] { return &events[T]{changed: make(chan struct{})} }

func (e *events[T]) add(v T) {
	e.mu.Lock()
	e.list = append(e.list, v)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

func (e *events[T]) snapshot() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// await waits until cond holds for the log or timeout passes; it returns
// the log at that moment and whether cond held.
func (e *events[T]) await(timeout time.Duration, cond func([]T) bool) ([]T, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		list, ch := slices.Clone(e.list), e.changed
		e.mu.Unlock()
		if cond(list) {
			return list, true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return list, false
		}
	}
}

// sendRaw sends messages through the raw client and returns the response
// (gRPC errors fail the test).
func (r *raw) sendRaw(msgs ...*pb.Message) *pb.SendMessageResponse {
	r.t.Helper()
	resp, err := r.c.SendMessage(r.ctx(15*time.Second), &pb.SendMessageRequest{Messages: msgs})
	if err != nil {
		r.t.Fatalf("SendMessage: gRPC error %v", err)
	}
	return resp
}

func delayedMsg(topic string, at time.Time, body string) *pb.Message {
	return &pb.Message{Topic: res(topic), Body: []byte(body), SystemProperties: &pb.SystemProperties{
		MessageId: msgID(), MessageType: pb.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(at)}}
}

func (r *raw) recall(topic, handle string) *pb.RecallMessageResponse {
	r.t.Helper()
	resp, err := r.c.RecallMessage(r.ctx(10*time.Second), &pb.RecallMessageRequest{Topic: res(topic), RecallHandle: handle})
	if err != nil {
		r.t.Fatalf("RecallMessage: gRPC error %v", err)
	}
	return resp
}

func (r *raw) endTx(topic, messageID, txID string, res0 pb.TransactionResolution) *pb.Status {
	r.t.Helper()
	resp, err := r.c.EndTransaction(r.ctx(10*time.Second), &pb.EndTransactionRequest{Topic: res(topic), MessageId: messageID,
		TransactionId: txID, Resolution: res0})
	if err != nil {
		r.t.Fatalf("EndTransaction: gRPC error %v", err)
	}
	return resp.Status
}

func (r *raw) queryOffset(topic string, queue int32, p pb.QueryOffsetPolicy, at *time.Time) *pb.QueryOffsetResponse {
	r.t.Helper()
	req := &pb.QueryOffsetRequest{MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: queue}, QueryOffsetPolicy: p}
	if at != nil {
		req.Timestamp = timestamppb.New(*at)
	}
	resp, err := r.c.QueryOffset(r.ctx(10*time.Second), req)
	if err != nil {
		r.t.Fatalf("QueryOffset: gRPC error %v", err)
	}
	return resp
}

// endOffset is QueryOffset END of one queue (must be OK).
func (r *raw) endOffset(topic string, queue int32) int64 {
	r.t.Helper()
	resp := r.queryOffset(topic, queue, pb.QueryOffsetPolicy_END, nil)
	wantCode(r.t, "QueryOffset END", resp.Status, pb.Code_OK)
	return resp.Offset
}

// awaitEnd polls QueryOffset END of a queue until it reaches at least
// want (queues are filled asynchronously, just after the append) or 10 s
// pass, and returns the last value.
func (r *raw) awaitEnd(topic string, queue int32, want int64) int64 {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		end := r.endOffset(topic, queue)
		if end >= want || time.Now().After(deadline) {
			return end
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitTotal polls QueryOffset END of queues 0..n-1 until they add up to
// want (or 10 s pass) and returns them.
func (r *raw) awaitTotal(topic string, n int32, want int64) map[int32]int64 {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, total := map[int32]int64{}, int64(0)
		for q := range n {
			ends[q] = r.endOffset(topic, q)
			total += ends[q]
		}
		if total >= want || time.Now().After(deadline) {
			return ends
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type pullResult struct {
	status *pb.Status
	msgs   []*pb.Message
	next   *int64
}

// pull runs PullMessage and checks its frames: the status first, messages
// only after an OK status, at most one next_offset last, then gRPC OK.
func (r *raw) pull(group, topic string, queue int32, from int64, batch int32, d time.Duration) pullResult {
	r.t.Helper()
	stream, err := r.c.PullMessage(r.ctx(d), &pb.PullMessageRequest{Group: res(group),
		MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: queue}, Offset: from, BatchSize: batch,
		FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}})
	if err != nil {
		r.t.Fatal(err)
	}
	var out pullResult
	for i := 0; ; i++ {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.t.Fatalf("PullMessage ended with %v, want gRPC OK", err)
		}
		switch c := f.Content.(type) {
		case *pb.PullMessageResponse_Status:
			if i != 0 {
				r.t.Fatalf("PullMessage status in frame %d", i)
			}
			out.status = c.Status
		case *pb.PullMessageResponse_Message:
			if out.status.GetCode() != pb.Code_OK || out.next != nil {
				r.t.Fatalf("PullMessage message frame after %v / next offset", out.status)
			}
			if c.Message.GetSystemProperties().GetReceiptHandle() != "" {
				r.t.Fatal("pulled message carries a receipt handle")
			}
			out.msgs = append(out.msgs, c.Message)
		case *pb.PullMessageResponse_NextOffset:
			if out.status == nil || out.next != nil {
				r.t.Fatal("PullMessage next_offset before the status or twice")
			}
			n := c.NextOffset
			out.next = &n
		}
	}
	if out.status == nil {
		r.t.Fatal("PullMessage sent no status frame")
	}
	return out
}

// latencies summarises durations: p50, p90, max (sorted copy).
func latencies(ds []time.Duration) (p50, p90, maxD time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0, 0
	}
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.9), s[len(s)-1]
}

// probe is one ReceiveMessage that tolerates transport errors (a probe
// under load may miss its short deadline): it returns the status, the
// messages and when the answer was complete.
func (r *raw) probe(req *pb.ReceiveMessageRequest, d time.Duration) (*pb.Status, []*pb.Message, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", r.id)
	stream, err := r.c.ReceiveMessage(ctx, req)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	var st *pb.Status
	var msgs []*pb.Message
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return st, msgs, time.Now(), nil
		}
		if err != nil {
			return nil, nil, time.Time{}, err
		}
		switch c := f.Content.(type) {
		case *pb.ReceiveMessageResponse_Status:
			st = c.Status
		case *pb.ReceiveMessageResponse_Message:
			msgs = append(msgs, c.Message)
		}
	}
}
