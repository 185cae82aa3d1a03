package httpserver

// Send throughput over REST (HTTP/1.1 keep-alive, one connection per
// worker) against unary gRPC SendMessage (one HTTP/2 connection, as the
// official clients use), same payload, same concurrency, same process,
// same broker on the same store:
//
//	go test -run '^$' -bench 'Send$' -benchtime 20000x ./gateway/httpserver/
//
// BenchmarkHTTPvsGRPCSend runs both in one benchmark and reports the
// ratio (target ≥ 0.4).

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

const (
	benchWorkers = 16
	benchPayload = 1 << 10
)

type sendBench struct {
	h      *harness
	http   *http.Client
	body   []byte // the REST request
	grpc   v2.MessagingServiceClient
	conn   *grpc.ClientConn
	msgSeq atomic.Int64
}

func newSendBench(b *testing.B) *sendBench {
	h := newHarness(b, harnessOpts{realClock: true, dir: b.TempDir(), grpcTCP: true, telemetry: true})
	h.ok("POST", "/v1/topics", `{"name":"bench","queues":8}`)
	conn, err := grpc.NewClient("passthrough:///"+h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	tr := &http.Transport{MaxIdleConnsPerHost: benchWorkers, MaxConnsPerHost: benchWorkers, ForceAttemptHTTP2: false}
	b.Cleanup(tr.CloseIdleConnections)
	return &sendBench{
		h:    h,
		http: &http.Client{Transport: tr},
		body: []byte(`{"messages":[{"text":"` + strings.Repeat("x", benchPayload) + `"}]}`),
		grpc: v2.NewMessagingServiceClient(conn),
		conn: conn,
	}
}

func (s *sendBench) httpSend() error {
	resp, err := s.http.Post(s.h.base+"/v1/topics/bench/messages", "application/json", bytes.NewReader(s.body))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusErr{resp.StatusCode}
	}
	return nil
}

var grpcPayload = bytes.Repeat([]byte{'x'}, benchPayload)

func (s *sendBench) grpcSend(ctx context.Context) error {
	id := "BENCH-" + string(rune('A'+s.msgSeq.Add(1)%26))
	resp, err := s.grpc.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
		Topic: &v2.Resource{Name: "bench"}, Body: grpcPayload,
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_NORMAL},
	}}})
	if err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != v2.Code_OK {
		return &statusErr{int(resp.GetStatus().GetCode())}
	}
	return nil
}

type statusErr struct{ code int }

func (e *statusErr) Error() string { return "send answered " + http.StatusText(e.code) }

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load runs n sends on benchWorkers goroutines and returns the elapsed
// time.
func load(b *testing.B, n int, send func() error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := send(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return took
}

func (s *sendBench) grpcCtx() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "bench-producer")
}

func BenchmarkHTTPSend(b *testing.B) {
	s := newSendBench(b)
	b.SetBytes(benchPayload)
	b.ResetTimer()
	took := load(b, b.N, s.httpSend)
	b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
}

func BenchmarkGRPCSend(b *testing.B) {
	s := newSendBench(b)
	ctx := s.grpcCtx()
	b.SetBytes(benchPayload)
	b.ResetTimer()
	took := load(b, b.N, func() error { return s.grpcSend(ctx) })
	b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
}

// BenchmarkHTTPvsGRPCSend measures both, alternating halves to even out
// drift, and reports the REST/gRPC throughput ratio (target ≥ 0.4). It
// also reports each path's CPU time per message (server and client, both
// in this process): on a shared machine the wall-clock rates follow
// everyone's load, the CPU cost per message does not.
func BenchmarkHTTPvsGRPCSend(b *testing.B) {
	s := newSendBench(b)
	ctx := s.grpcCtx()
	grpcSend := func() error { return s.grpcSend(ctx) }
	// Warm both paths (connections, allocations) outside the timing.
	load(b, 2*benchWorkers, s.httpSend)
	load(b, 2*benchWorkers, grpcSend)
	b.ResetTimer()
	half := max(b.N/2, 1)
	var tg, th, cg, ch time.Duration
	phase := func(send func() error, wall, cpu *time.Duration) {
		c0 := cpuTime(b)
		*wall += load(b, half, send)
		*cpu += cpuTime(b) - c0
	}
	phase(grpcSend, &tg, &cg)
	phase(s.httpSend, &th, &ch)
	phase(s.httpSend, &th, &ch)
	phase(grpcSend, &tg, &cg)
	grpcRate := float64(2*half) / tg.Seconds()
	httpRate := float64(2*half) / th.Seconds()
	b.ReportMetric(grpcRate, "grpc-msgs/s")
	b.ReportMetric(httpRate, "http-msgs/s")
	b.ReportMetric(httpRate/grpcRate, "http/grpc")
	b.ReportMetric(float64(cg.Microseconds())/float64(2*half), "grpc-cpu-µs/msg")
	b.ReportMetric(float64(ch.Microseconds())/float64(2*half), "http-cpu-µs/msg")
}
