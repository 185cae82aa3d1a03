package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The node's tests and benchmarks run with the buffer pool cmd/mqgate
// installs as grpc-go's process-wide default.
func init() { grpcserver.SetDefaultBufferPool() }

// BenchmarkNodeSend measures one-message SendMessage calls over loopback
// against a whole node (interceptors, broker, store), 16 connections.
// For the ratio against a plain gRPC echo ceiling use `mqgate bench`.
func BenchmarkNodeSend(b *testing.B) {
	for _, flush := range []string{"async", "sync"} {
		b.Run(flush, func(b *testing.B) { benchNodeSend(b, flush, 1) })
	}
	// A batch of 32 1 KiB messages per call (one request of ~36 KiB).
	b.Run("async-batch32", func(b *testing.B) { benchNodeSend(b, "async", 32) })
}

// benchNode opens a node for a benchmark (topics and groups auto-created,
// remoting off, logs discarded) and dials conns client connections to its
// gRPC port; both are closed when the benchmark ends.
func benchNode(b *testing.B, flush string, conns int) chan v2.MessagingServiceClient {
	b.Helper()
	cfg := Defaults()
	cfg.DataDir = b.TempDir()
	cfg.GRPCAddr, cfg.HTTPAddr, cfg.RemotingAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Flush = flush
	cfg.AutoCreate = true
	cfg.SegmentSize = 256 << 20
	n, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	clients := make(chan v2.MessagingServiceClient, conns)
	for i := 0; i < conns; i++ {
		cc, err := grpc.NewClient(n.Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		clients <- v2.NewMessagingServiceClient(cc)
	}
	return clients
}

// benchBody is every benchmark message's body (1 KiB, shared: nothing
// writes to it).
var benchBody = make([]byte, 1024)

// benchMessages builds count 1 KiB messages for topic with fresh ids.
func benchMessages(topic string, count int, seq *atomic.Int64) []*v2.Message {
	msgs := make([]*v2.Message, count)
	for i := range msgs {
		id := fmt.Sprintf("01BENCH%027d", seq.Add(1))
		msgs[i] = &v2.Message{
			Topic:            &v2.Resource{Name: topic},
			SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY},
			Body:             benchBody,
		}
	}
	return msgs
}

func benchNodeSend(b *testing.B, flush string, batch int) {
	const conns = 16
	clients := benchNode(b, flush, conns)
	var seq atomic.Int64
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "bench")
	b.SetBytes(int64(1024 * batch))
	b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0))) // about one goroutine per connection
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := <-clients
		defer func() { clients <- c }()
		for pb.Next() {
			msgs := benchMessages("bench", batch, &seq)
			resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: msgs})
			if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
				b.Errorf("send: %v %v", err, resp.GetStatus())
				return
			}
		}
	})
}

// BenchmarkNodeReceiveAck measures POP consumption against a whole node:
// b.N 1 KiB messages are stored first (batches of 32, not timed), then 4
// consumers on 4 connections receive batches of 32 and ack each batch
// with one AckMessage call until every message is acked. ns/op is per
// message, client and server together (they share the process). The
// consumers send no x-mq-language header, so bodies carry MD5 digests as
// for every official client but the Go one. `mqgate bench consume` gives
// the ratio to an echo ceiling.
func BenchmarkNodeReceiveAck(b *testing.B) { benchNodeConsume(b, 32) }

// BenchmarkNodeAckEach is BenchmarkNodeReceiveAck with every message
// acknowledged by an AckMessage call of its own, each awaited before the
// next (`mqgate bench consume --ack-batch 1 --pipeline-acks=false`): 32
// of every 33 calls are single acks, so ns/op and allocs/op are those of
// an ack call and a 32nd of a receive.
func BenchmarkNodeAckEach(b *testing.B) { benchNodeConsume(b, 1) }

// benchNodeConsume stores b.N messages, then consumes them with 4
// consumers acknowledging ackBatch handles per AckMessage call.
func benchNodeConsume(b *testing.B, ackBatch int) {
	const consumers = 4
	clients := benchNode(b, "async", consumers)
	topic, group := "bench-consume", "bench-consumers"
	var seq atomic.Int64
	c := <-clients
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "bench-producer")
	for left := b.N; left > 0; left -= 32 {
		resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: benchMessages(topic, min(32, left), &seq)})
		if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
			b.Fatalf("preload: %v %v", err, resp.GetStatus())
		}
	}
	clients <- c
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	// The last ack cancels the receives still waiting for more.
	runCtx, done := context.WithCancel(context.Background())
	defer done()
	var acked atomic.Int64
	errs := make(chan error, consumers)
	for i := 0; i < consumers; i++ {
		go func() {
			ctx := metadata.AppendToOutgoingContext(runCtx, "x-mq-client-id", fmt.Sprintf("bench-consumer-%d", i))
			errs <- benchConsume(ctx, <-clients, topic, group, ackBatch, int64(b.N), &acked, done)
		}()
	}
	for i := 0; i < consumers; i++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// benchConsume receives batches and acks them in calls of ackBatch
// handles until acked reaches total, then calls done.
func benchConsume(ctx context.Context, c v2.MessagingServiceClient, topic, group string, ackBatch int, total int64, acked *atomic.Int64, done func()) error {
	req := &v2.ReceiveMessageRequest{
		Group:              &v2.Resource{Name: group},
		MessageQueue:       &v2.MessageQueue{Topic: &v2.Resource{Name: topic}, Id: -1},
		FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:          32,
		InvisibleDuration:  durationpb.New(time.Minute),
		LongPollingTimeout: durationpb.New(5 * time.Second),
	}
	for acked.Load() < total {
		entries, err := benchReceive(ctx, c, req)
		if ctx.Err() != nil {
			return nil // another consumer acked the last message
		}
		if err != nil {
			return err
		}
		for len(entries) > 0 {
			n := min(ackBatch, len(entries))
			resp, err := c.AckMessage(ctx, &v2.AckMessageRequest{Group: req.Group, Topic: req.MessageQueue.Topic, Entries: entries[:n]})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
				return fmt.Errorf("ack: %v %v", err, resp.GetStatus())
			}
			entries = entries[n:]
			if acked.Add(int64(n)) >= total {
				done()
			}
		}
	}
	return nil
}

// benchReceive makes one ReceiveMessage call and returns the ack entries
// of the messages it delivered.
func benchReceive(ctx context.Context, c v2.MessagingServiceClient, req *v2.ReceiveMessageRequest) ([]*v2.AckMessageEntry, error) {
	st, err := c.ReceiveMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	var entries []*v2.AckMessageEntry
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		if m := r.GetMessage(); m != nil {
			sp := m.GetSystemProperties()
			entries = append(entries, &v2.AckMessageEntry{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle()})
		}
	}
}
