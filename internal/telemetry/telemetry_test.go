package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/internal/buildinfo"
)

func TestReadExportConfig(t *testing.T) {
	for _, tc := range []struct {
		name            string
		env             map[string]string
		traces, metrics bool
		tProto, mProto  string
		wantErr         string
	}{
		{name: "nothing set: no OTLP"},
		{name: "endpoint: both, http/protobuf by default",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			traces: true, metrics: true, tProto: protoHTTP, mProto: protoHTTP},
		{name: "grpc protocol",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			traces: true, metrics: true, tProto: protoGRPC, mProto: protoGRPC},
		{name: "signal protocol wins",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf"},
			traces: true, metrics: true, tProto: protoGRPC, mProto: protoHTTP},
		{name: "traces only by signal endpoint",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
			traces: true, tProto: protoHTTP},
		{name: "metrics none",
			env:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"},
			traces: true, tProto: protoHTTP},
		{name: "metrics prometheus means /metrics only",
			env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}},
		{name: "explicit otlp without endpoint uses the default endpoint",
			env:    map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			traces: true, tProto: protoHTTP},
		{name: "sdk disabled",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "unsupported exporter",
			env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "unsupported protocol",
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: `"http/json"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readExportConfig(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.traces != tc.traces || c.metrics != tc.metrics || c.tracesProtocol != tc.tProto || c.metricsProtocol != tc.mProto {
				t.Fatalf("got %+v", c)
			}
		})
	}
}

func clearOTelEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_METRICS_EXEMPLAR_FILTER"} {
		t.Setenv(k, "")
	}
}

// Without an exporter nothing records spans (the hot paths pay nothing),
// but W3C trace context still propagates.
func TestSetupWithoutExportRecordsNothing(t *testing.T) {
	clearOTelEnv(t)
	tel, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Tracing || tel.Export != "" {
		t.Fatalf("tracing %v, export %q without any exporter", tel.Tracing, tel.Export)
	}
	carrier := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
	ctx, sp := tel.Tracer("t").Start(ctx, "x")
	defer sp.End()
	if sp.IsRecording() {
		t.Fatal("a span records without an exporter")
	}
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if !strings.Contains(out["traceparent"], "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("trace context not propagated: %v", out)
	}
}

func TestSetupWithSpanExporterRecords(t *testing.T) {
	clearOTelEnv(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := Setup(context.Background(), Options{SpanExporters: []sdktrace.SpanExporter{exp}})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.Tracer("t").Start(context.Background(), "recorded")
	if !tel.Tracing || !sp.IsRecording() {
		t.Fatal("spans do not record with an exporter")
	}
	sp.End()
	defer tel.Shutdown(context.Background())
	if err := tel.Tracers.(*sdktrace.TracerProvider).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.GetSpans(); len(got) != 1 || got[0].Name != "recorded" {
		t.Fatalf("exported %v", got)
	}
}

// External histograms (the store's) appear on /metrics with their
// buckets, and disappear when removed.
func TestExternalHistogramOnMetrics(t *testing.T) {
	clearOTelEnv(t)
	tel, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	remove := tel.AddHistogram(HistogramSource{Scope: "test", Name: "mqgate.test.duration", Unit: "s", Description: "test",
		Snapshot: func() Histogram {
			return Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{3, 2, 1}, Count: 99, Sum: 0.5}
		}})
	body := scrape(t, tel)
	for _, want := range []string{
		`mqgate_test_duration_seconds_bucket{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version="",le="0.001"} 3`,
		`mqgate_test_duration_seconds_bucket{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version="",le="0.002"} 5`,
		`le="+Inf"} 6`,
		`mqgate_test_duration_seconds_count{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version=""} 6`,
		`mqgate_test_duration_seconds_sum{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version=""} 0.5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	remove()
	if strings.Contains(scrape(t, tel), "mqgate_test_duration") {
		t.Error("a removed histogram is still exported")
	}
}

func scrape(t *testing.T, tel *Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// With only OTEL_EXPORTER_OTLP_ENDPOINT set, traces and metrics go out over
// OTLP/HTTP (the default protocol) to /v1/traces and /v1/metrics, flushed
// at Shutdown.
func TestOTLPHTTPExportByDefault(t *testing.T) {
	clearOTelEnv(t)
	var mu sync.Mutex
	got := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], b...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	tel, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Tracing || !strings.Contains(tel.Export, "http/protobuf") {
		t.Fatalf("tracing %v, export %q", tel.Tracing, tel.Export)
	}
	_, sp := tel.Tracer("t").Start(context.Background(), "exported-span")
	sp.End()
	c, _ := tel.Meter("t").Int64Counter("mqgate.test.counter")
	c.Add(context.Background(), 1)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var traces coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(got["/v1/traces"], &traces); err != nil || !strings.Contains(traces.String(), "exported-span") {
		t.Errorf("/v1/traces: %v %v", err, traces.String())
	}
	var metrics colmetricspb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(got["/v1/metrics"], &metrics); err != nil || !strings.Contains(metrics.String(), "mqgate.test.counter") {
		t.Errorf("/v1/metrics: %v %.300s", err, metrics.String())
	}
}

// Without span export no exemplar is kept (the SDK's trace-based filter
// would look for a sampled span in every measurement's context for
// nothing); OTEL_METRICS_EXEMPLAR_FILTER still decides when it is set.
func TestExemplarsOffWithoutSpanExport(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want bool
	}{{"", false}, {"trace_based", true}} {
		t.Run("filter="+tc.env, func(t *testing.T) {
			clearOTelEnv(t)
			if tc.env != "" {
				t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", tc.env)
			}
			tel, err := Setup(context.Background(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			// A sampled remote span, as a client's traceparent gives.
			carrier := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
			c, err := tel.Meter("test").Int64Counter("mqgate.test.count")
			if err != nil {
				t.Fatal(err)
			}
			c.Add(ctx, 1)
			mfs, err := tel.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found, exemplar := false, false
			for _, mf := range mfs {
				if mf.GetName() != "mqgate_test_count_total" {
					continue
				}
				for _, m := range mf.GetMetric() {
					found = true
					exemplar = exemplar || m.GetCounter().GetExemplar() != nil
				}
			}
			if !found || exemplar != tc.want {
				t.Fatalf("counter found %v, exemplar %v, want exemplar %v", found, exemplar, tc.want)
			}
		})
	}
}

// /metrics names the running build in mqgate_build_info.
func TestMetricsCarryBuildInfo(t *testing.T) {
	clearOTelEnv(t)
	b := buildinfo.Info{Version: "v0.9.1", Revision: "0123456789abcdef", Dirty: true, GoVersion: "go1.26.0"}
	tel, err := Setup(context.Background(), Options{Build: b})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := `mqgate_build_info{dirty="true",goversion="go1.26.0",revision="0123456789abcdef",version="v0.9.1"} 1`
	if !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, rec.Body.String())
	}
}

// Durations are logged as durations in both formats, at any depth.
func TestLoggerWritesDurations(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b strings.Builder
		log := NewLogger(&b, "info", format)
		log.Info("storage: opened", "took", 20001600*time.Nanosecond, slog.Group("g", "wait", 1500*time.Millisecond))
		out := b.String()
		if !strings.Contains(out, "20.0016ms") || !strings.Contains(out, "1.5s") || strings.Contains(out, "20001600") {
			t.Errorf("%s: %s", format, out)
		}
	}
}
