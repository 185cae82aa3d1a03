package grpcserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
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
	"google.golang.org/grpc/tap"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/telemetry"
	"github.com/mqgate/mqgate/internal/testutil"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

// telemetryServer serves health (New registers it) with the given
// tracing mode. seen receives the span context each unary handler ran
// with; a call whose metadata has fail=1 ends with INTERNAL.
//
// With local, the call metric is kept by the server and exported through
// Options.AddHistogram (what a node does), read by the same reader;
// otherwise it is recorded through the MeterProvider.
func telemetryServer(t *testing.T, tracing bool, tp trace.TracerProvider, local ...bool) (healthpb.HealthClient, *sdkmetric.ManualReader, <-chan trace.SpanContext) {
	t.Helper()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	ext := telemetry.NewExternal()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(ext))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var add func(telemetry.HistogramSource) func()
	if len(local) > 0 && local[0] {
		add, mp = ext.Add, nil
	}
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
		AddHistogram:           add,
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
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) { testCallTelemetryWithoutTracing(t, local) })
	}
}

func testCallTelemetryWithoutTracing(t *testing.T, local bool) {
	hc, reader, seen := telemetryServer(t, false, nil, local)
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
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) { testCallTelemetryWithTracing(t, local) })
	}
}

func testCallTelemetryWithTracing(t *testing.T, local bool) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hc, reader, seen := telemetryServer(t, true, tp, local)
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

// The call metric kept by the server (Options.AddHistogram) is exported
// as the OpenTelemetry SDK exports it: the same scope and schema, name,
// unit, description, buckets, attributes, counts and extremes.
func TestLocalCallMetricMatchesTheSDKs(t *testing.T) {
	collect := func(local bool) metricdata.ScopeMetrics {
		hc, reader, seen := telemetryServer(t, false, nil, local)
		for _, kv := range [][]string{nil, nil, {"fail", "1"}} {
			_, _ = hc.Check(callCtx(t, kv...), &healthpb.HealthCheckRequest{})
			<-seen
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name == callMeterScope {
				return sm
			}
		}
		t.Fatalf("local=%v: no scope %s in %+v", local, callMeterScope, rm)
		return metricdata.ScopeMetrics{}
	}
	sdk, local := collect(false), collect(true)
	if sdk.Scope != local.Scope {
		t.Errorf("scope %+v, the SDK's %+v", local.Scope, sdk.Scope)
	}
	if len(sdk.Metrics) != 1 || len(local.Metrics) != 1 {
		t.Fatalf("metrics: SDK %d, local %d", len(sdk.Metrics), len(local.Metrics))
	}
	sm, lm := sdk.Metrics[0], local.Metrics[0]
	if sm.Name != lm.Name || sm.Unit != lm.Unit || sm.Description != lm.Description {
		t.Errorf("metric %q %q %q, the SDK's %q %q %q", lm.Name, lm.Unit, lm.Description, sm.Name, sm.Unit, sm.Description)
	}
	sh, lh := sm.Data.(metricdata.Histogram[float64]), lm.Data.(metricdata.Histogram[float64])
	if sh.Temporality != lh.Temporality || len(sh.DataPoints) != 2 || len(lh.DataPoints) != 2 {
		t.Fatalf("temporality %v/%v, points %d/%d", lh.Temporality, sh.Temporality, len(lh.DataPoints), len(sh.DataPoints))
	}
	byAttrs := map[attribute.Distinct]metricdata.HistogramDataPoint[float64]{}
	for _, dp := range sh.DataPoints {
		byAttrs[dp.Attributes.Equivalent()] = dp
	}
	for _, dp := range lh.DataPoints {
		s, ok := byAttrs[dp.Attributes.Equivalent()]
		if !ok {
			t.Fatalf("attributes %v not among the SDK's", dp.Attributes)
		}
		if !slices.Equal(s.Bounds, dp.Bounds) || s.Count != dp.Count || len(s.BucketCounts) != len(dp.BucketCounts) {
			t.Errorf("%v: bounds %v count %d buckets %d; the SDK's %v %d %d", dp.Attributes, dp.Bounds, dp.Count, len(dp.BucketCounts), s.Bounds, s.Count, len(s.BucketCounts))
		}
		_, sMin := s.Min.Value()
		_, lMin := dp.Min.Value()
		if sMin != lMin || dp.Sum <= 0 {
			t.Errorf("%v: min defined %v (SDK %v), sum %v", dp.Attributes, lMin, sMin, dp.Sum)
		}
	}
}

// The call metric's cost per call: recorded through the OpenTelemetry
// SDK (sdk) or kept here and exported as an external histogram (local).
func BenchmarkCallTelemetry(b *testing.B) {
	for _, local := range []bool{false, true} {
		b.Run(map[bool]string{false: "sdk", true: "local"}[local], func(b *testing.B) {
			ext := telemetry.NewExternal()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader(sdkmetric.WithProducer(ext))))
			var tel *callTelemetry
			if local {
				tel = newCallTelemetry(nil, ext.Add, true)
			} else {
				tel = newCallTelemetry(mp, nil, true)
			}
			ic := tel.unary()
			info := &grpc.UnaryServerInfo{FullMethod: "/apache.rocketmq.v2.MessagingService/SendMessage"}
			h := func(context.Context, any) (any, error) { return nil, nil }
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-mq-client-id", "c"))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = ic(ctx, nil, info, h)
				}
			})
		})
	}
}

// The unary interceptor chain around a handler that does nothing, for a
// SendMessage of one 1 KiB message: what every unary call pays on top of
// its handler. tap: the context callInfoTap makes (as a served call has);
// metadata: one with the headers only (the chain reads them itself).
func BenchmarkUnaryChain(b *testing.B) {
	for _, tapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "metadata", true: "tap"}[tapped], func(b *testing.B) {
			ext := telemetry.NewExternal()
			srv := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AddHistogram: ext.Add,
				RequestSize: func(proto.Message) (int, bool) { return 1100, true }})
			defer srv.Close()
			md := metadata.Pairs("x-mq-client-id", "bench@1@1", "x-mq-language", "GO", "x-mq-protocol", "v2",
				"x-mq-request-id", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "user-agent", "grpc-go/1.85.0", "content-type", "application/grpc")
			ctx := metadata.NewIncomingContext(context.Background(), md)
			if tapped {
				var err error
				if ctx, err = srv.tap(ctx, &tap.Info{FullMethodName: v2.MessagingService_SendMessage_FullMethodName, Header: md}); err != nil {
					b.Fatal(err)
				}
			}
			req := &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "t"}, Body: make([]byte, 1024),
				SystemProperties: &v2.SystemProperties{MessageId: "01ABCDEF0123456789ABCDEF0123456789"}}}}
			info := &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_SendMessage_FullMethodName}
			resp := &v2.SendMessageResponse{Status: &v2.Status{Code: v2.Code_OK}}
			h := func(context.Context, any) (any, error) { return resp, nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, err := srv.unary(ctx, req, info, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
