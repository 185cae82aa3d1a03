package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mqgate/mqgate/internal/testutil"
)

func healthCheck(t *testing.T, addr string, creds credentials.TransportCredentials) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "apache.rocketmq.v2.MessagingService"})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	return resp.Status
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeHealthyThenCleanShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	p := testutil.Start(t, testutil.StartOptions{Args: []string{"--shutdown-timeout", "10s"}})

	// One port, two transports: plaintext h2c and TLS with ALPN h2.
	if st := healthCheck(t, p.GRPC, insecure.NewCredentials()); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("plaintext health = %v", st)
	}
	tlsCreds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})
	if st := healthCheck(t, p.GRPC, tlsCreds); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("TLS health = %v", st)
	}
	if code, body := httpGet(t, "http://"+p.HTTP+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if code, _ := httpGet(t, "http://"+p.HTTP+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	// The gRPC call metric (otelgrpc's instrument, recorded by the call
	// telemetry interceptor) appears once a call was served.
	code, body := httpGet(t, "http://"+p.Metrics+"/metrics")
	if code != 200 || !strings.Contains(body, `rpc_server_call_duration_seconds_count{otel_scope_name="github.com/mqgate/mqgate/gateway/grpcserver"`) {
		t.Fatalf("/metrics = %d, no gRPC call metric:\n%.2000s", code, body)
	}
	// The store's dispatch counter, by where the records came from.
	for _, src := range []string{"feed", "log"} {
		if !strings.Contains(body, `mqgate_store_dispatched_total{mqgate_source="`+src+`"`) {
			t.Fatalf("/metrics has no mqgate_store_dispatched_total for %s:\n%.4000s", src, body)
		}
	}

	start := time.Now()
	p.Stop(10 * time.Second)
	if time.Since(start) > 10*time.Second {
		t.Fatal("shutdown took longer than its deadline")
	}
	rep, ok := p.WaitLog(time.Second, func(m map[string]any) bool { return m["msg"] == "shutdown report" })
	if !ok {
		t.Fatal("no shutdown report logged")
	}
	r := rep["report"].(map[string]any)
	if r["healthy"] != true {
		t.Fatalf("report not healthy: %v", r)
	}
	for _, c := range []string{"grpc", "http", "telemetry", "goroutines"} {
		comp, _ := r[c].(map[string]any)
		if comp == nil || comp["outcome"] != "clean" {
			t.Fatalf("component %s: %v", c, comp)
		}
	}
}

func TestServeHungComponentExitsAtDeadlineNonZero(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const deadline = 1500 * time.Millisecond
	p := testutil.Start(t, testutil.StartOptions{
		Args: []string{"--shutdown-timeout", deadline.String()},
		Env:  []string{"MQGATE_TEST_HANG_STOP=http"},
	})
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	// A second signal once shutdown has begun must not extend the deadline.
	if _, ok := p.WaitLog(deadline, func(m map[string]any) bool { return m["msg"] == "shutting down" }); !ok {
		t.Fatal("shutdown did not begin")
	}
	p.Signal(syscall.SIGTERM)
	code := p.Wait(deadline + 3*time.Second)
	elapsed := time.Since(start)
	if code == 0 || code == -1 {
		t.Fatalf("exit code %d, want non-zero exit", code)
	}
	// The deadline plus the owner's bounded post-deadline grace and process
	// exit; far below two deadlines.
	if elapsed > deadline+time.Second {
		t.Fatalf("exited after %s, deadline was %s", elapsed, deadline)
	}
	if elapsed < deadline {
		t.Fatalf("exited after %s, before the %s deadline: the hang hook did not hold", elapsed, deadline)
	}
	rep, ok := p.WaitLog(time.Second, func(m map[string]any) bool { return m["msg"] == "shutdown report" })
	if !ok {
		t.Fatal("no shutdown report logged")
	}
	r := rep["report"].(map[string]any)
	if r["healthy"] != false || r["http"].(map[string]any)["outcome"] != "timed-out" {
		t.Fatalf("report: %v", r)
	}
	if !p.HasLine("already shutting down; the deadline stays") {
		t.Fatal("second signal not acknowledged")
	}
}
