package httpserver

// The component harness: the real gRPC server (interceptor chain, drain
// gate) with the v2 MessagingService, the admin API and mqgate.rest.v1 on
// the real broker over an in-memory store driven by a fake clock, reached
// by REST through the server's in-process connection, served on a loopback
// port; v2 gRPC calls reach it over an in-memory listener (bufconn).
// (Tests may import what the package may not: archtest checks non-test
// imports.)

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/admin"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/restmessaging"
	"github.com/mqgate/mqgate/gateway/session"
	"github.com/mqgate/mqgate/gateway/v2service"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/telemetry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

type harness struct {
	t      testing.TB
	clk    *clock.Fake
	store  *storage.Store
	b      *broker.Broker
	gate   *admission.Gate
	grpc   *grpcserver.Server
	v2conn *grpc.ClientConn // h.v2's connection (bufconn)
	rest   *Server
	base   string // http://127.0.0.1:port
	// grpcAddr is the loopback gRPC port (harnessOpts.grpcTCP).
	grpcAddr string
	http     *http.Client
	v2       v2.MessagingServiceClient
}

type harnessOpts struct {
	maxParked       int
	maxRequestBytes int64
	inflight        int64         // Options.MaxInFlightBytes
	bodyTimeout     time.Duration // Options.BodyTimeout
	tracer          trace.TracerProvider
	meter           metric.MeterProvider // Options.MeterProvider (telemetry overrides it)
	interceptor     grpc.UnaryServerInterceptor
	realClock       bool
	// dir puts the store on the real file system (benchmarks); empty
	// keeps it in memory.
	dir string
	// grpcTCP also serves gRPC on a loopback port (h.grpcAddr).
	grpcTCP bool
	// telemetry gives both servers the node's OpenTelemetry providers
	// (metrics and spans recorded as in production).
	telemetry bool
	// auth turns authentication on (gRPC interceptors and REST checks).
	auth *auth.Authenticator
}

func newHarness(t testing.TB, opts ...harnessOpts) *harness {
	t.Helper()
	var o harnessOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	h := &harness{t: t, clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), gate: admission.NewGate()}
	var clk clock.Clock = h.clk
	now := h.clk.Now
	if o.realClock {
		clk, now = clock.Real{}, time.Now
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sopts := storage.Options{FS: vfs.NewMem(), SegmentSize: 64 << 20, Now: now, StoreHost: "gw:8081"}
	dataDir := "/data"
	if o.dir != "" {
		sopts.FS, dataDir = nil, o.dir
	}
	st, err := storage.Open(dataDir, sopts)
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	b, err := broker.Open(context.Background(), broker.Config{Clock: clk, DefaultQueues: 4, Logger: log,
		PopSnapshotInterval: time.Hour, MaxParkedPolls: o.maxParked}, st)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	sess := session.New(session.Config{Clock: clk, OnGone: b.ReleaseClient, Logger: log})
	svc, err := v2service.NewMessagingService(v2service.ServiceConfig{Clock: clk, Logger: log}, b, sess, h.gate)
	if err != nil {
		t.Fatal(err)
	}
	gopts := grpcserver.Options{Gate: h.gate, Sessions: sess, Logger: log, Auth: o.auth, AdminViews: admin.OpenToUsers}
	ropts := Options{Logger: log, MaxRequestBytes: o.maxRequestBytes, TracerProvider: o.tracer, MeterProvider: o.meter, Ready: func() error { return nil },
		Auth: o.auth, MaxInFlightBytes: o.inflight, BodyTimeout: o.bodyTimeout}
	if o.telemetry {
		tel, err := telemetry.Setup(context.Background(), telemetry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		gopts.MeterProvider, gopts.TracerProvider = tel.Meters, tel.Tracers
		ropts.MeterProvider, ropts.TracerProvider = tel.Meters, tel.Tracers
	}
	if o.interceptor != nil {
		gopts.ExtraUnaryInterceptors = []grpc.UnaryServerInterceptor{o.interceptor}
	}
	h.grpc = grpcserver.New(gopts)
	svc.Register(h.grpc)
	admin.New(b, admin.Options{Auth: o.auth}).Register(h.grpc)
	restmessaging.New(restmessaging.Config{Clock: clk, Logger: log, Auth: o.auth}, b).Register(h.grpc)
	blis := bufconn.Listen(1 << 20)
	h.v2conn, err = grpc.NewClient("passthrough:///harness",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return blis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	grpcDone := make(chan struct{})
	go func() { defer close(grpcDone); _ = h.grpc.Serve(blis) }()
	if o.grpcTCP {
		glis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.grpcAddr = glis.Addr().String()
		go func() { _ = h.grpc.Serve(glis) }()
	}
	ropts.API = h.grpc.InProcess()
	h.rest, err = New(ropts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.base = "http://" + lis.Addr().String()
	httpDone := make(chan struct{})
	go func() { defer close(httpDone); _ = h.rest.Serve(lis) }()
	h.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}
	h.v2 = v2.NewMessagingServiceClient(h.v2conn)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.http.CloseIdleConnections()
		h.gate.StartDrain()
		b.Drain()
		if err := h.rest.Stop(ctx); err != nil {
			t.Errorf("http stop: %v", err)
		}
		<-httpDone
		if err := h.v2conn.Close(); err != nil {
			t.Errorf("gRPC client close: %v", err)
		}
		if err := h.grpc.Stop(ctx); err != nil {
			t.Errorf("grpc stop: %v", err)
		}
		<-grpcDone
		if err := b.Close(ctx); err != nil {
			t.Errorf("broker close: %v", err)
		}
		if err := st.Close(ctx); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return h
}

// reply is an HTTP answer.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", r.code, err, r.body)
	}
	return m
}

// do sends one request; hdr is key, value, key, value...
func (h *harness) do(method, path, body string, hdr ...string) reply {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: b}
}

// ok sends a request that must answer 200 and returns the decoded body.
func (h *harness) ok(method, path, body string, hdr ...string) map[string]any {
	h.t.Helper()
	r := h.do(method, path, body, hdr...)
	if r.code != http.StatusOK {
		h.t.Fatalf("%s %s: HTTP %d, want 200: %s", method, path, r.code, r.body)
	}
	return r.json(h.t)
}

// setup creates a topic and a group through the admin REST API.
func (h *harness) setup(topic, typ, group string) {
	h.t.Helper()
	h.ok("POST", "/v1/topics", `{"name":"`+topic+`","type":"`+typ+`","queues":2}`)
	h.ok("POST", "/v1/groups", `{"name":"`+group+`"}`)
}

// dispatched waits until everything appended is readable.
func (h *harness) dispatched() {
	h.t.Helper()
	_, written := h.store.LogRange()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.store.WaitDispatched(ctx, written); err != nil {
		h.t.Fatal(err)
	}
}

// grpcCtx is a v2 call context with a client id.
func (h *harness) grpcCtx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "grpc-client-1")
}

// messages returns a receive answer's messages.
func messages(t testing.TB, m map[string]any) []map[string]any {
	t.Helper()
	return objects(t, m, "messages")
}

// results returns a send or ack answer's results.
func results(t testing.TB, m map[string]any) []map[string]any {
	t.Helper()
	return objects(t, m, "results")
}

// objects returns the array of objects under key.
func objects(t testing.TB, m map[string]any, key string) []map[string]any {
	t.Helper()
	raw, ok := m[key].([]any)
	if !ok {
		t.Fatalf("no %s array in %v", key, m)
	}
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

// codeOf is a Status object's v2 code.
func codeOf(t testing.TB, st any) v2.Code {
	t.Helper()
	m, ok := st.(map[string]any)
	if !ok {
		t.Fatalf("not a status object: %v", st)
	}
	c, ok := m["code"].(float64)
	if !ok {
		t.Fatalf("status without a numeric code: %v", m)
	}
	if name, _ := m["name"].(string); name != v2.Code(c).String() {
		t.Fatalf("status name %q does not match code %v", name, c)
	}
	return v2.Code(c)
}
