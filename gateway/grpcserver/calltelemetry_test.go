package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/mqgate/mqgate/internal/testutil"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

// telemetryServer serves health (New registers it) with the given
// tracing mode. seen receives the span context each unary handler ran
// with; a call whose metadata has fail=1 ends with INTERNAL.
func telemetryServer(t *testing.T, tracing bool, tp trace.TracerProvider) (healthpb.HealthClient, *sdkmetric.ManualReader, <-chan trace.SpanContext) {
	t.Helper()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	seen := make(chan trace.SpanContext, 16)
	probe := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		seen <- trace.SpanContextFromContext(ctx)
		if v := metadata.ValueFromIncomingContext(ctx, "fail"); len(v) > 0 {
			return nil, status.Error(codes.Internal, "asked to fail")
		}
		return h(ctx, req)
	}
	srv := New(Options{
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		MeterProvider:          mp,
		TracerProvider:         tp,
		Tracing:                tracing,
		ExtraUnaryInterceptors: []grpc.UnaryServerInterceptor{probe},
	})
	return healthpb.NewHealthClient(serveBufconn(t, srv)), reader, seen
}

// serveBufconn serves srv on an in-memory listener and returns a client
// connection to it; both stop when the test ends.
func serveBufconn(t *testing.T, srv *Server) *grpc.ClientConn {
	t.Helper()
	srv.SetServing(true)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return conn
}

func callCtx(t *testing.T, kv ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// durations collects rpc.server.call.duration: count per attribute set,
// the set written as "rpc.method|status|error.type".
func durations(t *testing.T, r *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "rpc.server.call.duration" {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("unit %q, want s", m.Unit)
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("rpc.server.call.duration is %T, want a float64 histogram", m.Data)
			}
			for _, dp := range h.DataPoints {
				get := func(k string) string { v, _ := dp.Attributes.Value(attribute.Key(k)); return v.AsString() }
				if get("rpc.system.name") != "grpc" {
					t.Errorf("rpc.system.name = %q", get("rpc.system.name"))
				}
				out[get("rpc.method")+"|"+get("rpc.response.status_code")+"|"+get("error.type")] += dp.Count
			}
		}
	}
	return out
}

func TestCallTelemetryWithoutTracing(t *testing.T) {
	hc, reader, seen := telemetryServer(t, false, nil)
	const check = "grpc.health.v1.Health/Check"

	// The caller's trace context reaches the handler without a stats handler.
	if _, err := hc.Check(callCtx(t, "traceparent", "00-"+testTraceID+"-"+testSpanID+"-01"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	sc := <-seen
	if sc.TraceID().String() != testTraceID || sc.SpanID().String() != testSpanID || !sc.IsRemote() {
		t.Fatalf("handler span context %v, want the caller's %s/%s (remote)", sc, testTraceID, testSpanID)
	}
	// No trace context sent: none invented.
	if _, err := hc.Check(callCtx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if sc := <-seen; sc.IsValid() {
		t.Fatalf("span context %v without a traceparent", sc)
	}
	// A client-side outcome (NOT_FOUND) carries no error.type; a server
	// failure (INTERNAL) does.
	if _, err := hc.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}
	<-seen
	if _, err := hc.Check(callCtx(t, "fail", "1"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("fail: %v", err)
	}
	<-seen
	// A server stream is timed until its handler returns.
	ctx, cancel := context.WithCancel(callCtx(t))
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	want := map[string]uint64{
		check + "|OK|":                           2,
		check + "|NOT_FOUND|":                    1,
		check + "|INTERNAL|INTERNAL":             1,
		"grpc.health.v1.Health/Watch|CANCELLED|": 1,
	}
	var got map[string]uint64
	testutil.Eventually(t, "the Watch stream's end to be recorded", func() bool {
		got = durations(t, reader)
		return len(got) == len(want)
	})
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d calls recorded, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

// With spans recorded, otelgrpc makes the server span (a child of the
// caller's) and the metric is still recorded once per call.
func TestCallTelemetryWithTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hc, reader, seen := telemetryServer(t, true, tp)
	if _, err := hc.Check(callCtx(t, "traceparent", "00-"+testTraceID+"-"+testSpanID+"-01"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	sc := <-seen
	if sc.TraceID().String() != testTraceID || sc.SpanID().String() == testSpanID || sc.IsRemote() {
		t.Fatalf("handler span context %v, want a local server span in trace %s", sc, testTraceID)
	}
	testutil.Eventually(t, "the server span to end", func() bool { return len(rec.Ended()) == 1 })
	s := rec.Ended()[0]
	if s.Name() != "grpc.health.v1.Health/Check" || s.Parent().SpanID().String() != testSpanID {
		t.Fatalf("span %q parent %v", s.Name(), s.Parent().SpanID())
	}
	if got := durations(t, reader); len(got) != 1 || got["grpc.health.v1.Health/Check|OK|"] != 1 {
		t.Fatalf("durations %v, want one OK Check", got)
	}
}
