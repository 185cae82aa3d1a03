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

func benchNodeSend(b *testing.B, flush string, batch int) {
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
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	}()
	const conns = 16
	clients := make(chan v2.MessagingServiceClient, conns)
	for i := 0; i < conns; i++ {
		cc, err := grpc.NewClient(n.Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		clients <- v2.NewMessagingServiceClient(cc)
	}
	body := make([]byte, 1024)
	var seq atomic.Int64
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "bench")
	b.SetBytes(int64(1024 * batch))
	b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0))) // about one goroutine per connection
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := <-clients
		defer func() { clients <- c }()
		for pb.Next() {
			msgs := make([]*v2.Message, batch)
			for i := range msgs {
				id := fmt.Sprintf("01BENCH%027d", seq.Add(1))
				msgs[i] = &v2.Message{
					Topic:            &v2.Resource{Name: "bench"},
					SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL, BodyEncoding: v2.Encoding_IDENTITY},
					Body:             body,
				}
			}
			resp, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: msgs})
			if err != nil || resp.GetStatus().GetCode() != v2.Code_OK {
				b.Errorf("send: %v %v", err, resp.GetStatus())
				return
			}
		}
	})
}
