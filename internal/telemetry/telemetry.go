package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mqgate/mqgate/internal/buildinfo"
)

// Options configure Setup.
type Options struct {
	ServiceName string
	// Build is the running build: its version is the service.version
	// resource attribute, and /metrics carries all of it as the
	// mqgate_build_info gauge.
	Build buildinfo.Info
	// SpanExporters receive every finished span (tests). Spans are
	// recorded when there is at least one, or when OTLP export is
	// configured through the environment.
	SpanExporters []sdktrace.SpanExporter
	// Logger receives OpenTelemetry's own errors (a collector that cannot
	// be reached); nil: slog.Default().
	Logger *slog.Logger
}

// Telemetry holds the providers. Components take what they need from it.
type Telemetry struct {
	Meters *sdkmetric.MeterProvider
	// Tracers records spans only when they go somewhere (an OTLP endpoint
	// or Options.SpanExporters); otherwise it is the no-op provider, so
	// instrumented hot paths pay (almost) nothing. Trace context is still
	// propagated either way.
	Tracers trace.TracerProvider
	// Tracing reports whether Tracers records spans. Code that would
	// build span attributes checks it (or span.IsRecording) first.
	Tracing  bool
	Registry *prometheus.Registry
	// Export describes where OTLP data goes ("" when nowhere), for the
	// start-up log.
	Export string

	sdkTracers *sdktrace.TracerProvider
	external   *externalMetrics
	log        *slog.Logger
}

// flushBudget bounds the final export at Shutdown: an unreachable
// collector must not hold the process until the shutdown deadline.
const flushBudget = 5 * time.Second

// Setup builds the providers. Call Shutdown last, after every component
// that records into them has stopped.
//
// OTLP export follows the standard environment variables:
// OTEL_EXPORTER_OTLP_ENDPOINT (or the _TRACES_/_METRICS_ variants) turns it
// on; OTEL_EXPORTER_OTLP_PROTOCOL is http/protobuf (default) or grpc;
// OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER = none turn one signal off;
// OTEL_SDK_DISABLED=true turns both off. The exporters themselves read
// headers, timeouts, TLS and compression (OTEL_EXPORTER_OTLP_*), the batch
// span processor OTEL_BSP_*, the sampler OTEL_TRACES_SAMPLER[_ARG] and the
// metric reader OTEL_METRIC_EXPORT_INTERVAL. /metrics (Prometheus) is
// always served.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.ServiceName == "" {
		opts.ServiceName = "mqgate"
	}
	// Attributes first, then the environment (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES), which wins.
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(opts.ServiceName), semconv.ServiceVersion(opts.Build.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	exp, err := readExportConfig(os.Getenv)
	if err != nil {
		return nil, err
	}

	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	t := &Telemetry{Registry: prometheus.NewRegistry(), external: newExternalMetrics(), log: log}
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(opts.Build))
	prom, err := otelprom.New(otelprom.WithRegisterer(t.Registry), otelprom.WithProducer(t.external))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom)}
	if exp.metrics {
		me, err := newMetricExporter(ctx, exp.metricsProtocol)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithProducer(t.external))))
	}
	if len(opts.SpanExporters) == 0 && !exp.traces && os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		// No span of mqgate's is exported, so an exemplar could only point
		// at a trace nobody can see mqgate in. The SDK's default filter
		// (trace_based) still looks for a sampled span in the context of
		// every measurement, a walk up the gRPC call's context chain that
		// cost ~1 % of the server's CPU per send. The variable still wins.
		mopts = append(mopts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	t.Meters = sdkmetric.NewMeterProvider(mopts...)

	spanExporters := append([]sdktrace.SpanExporter(nil), opts.SpanExporters...)
	if exp.traces {
		se, err := newSpanExporter(ctx, exp.tracesProtocol)
		if err != nil {
			_ = t.Meters.Shutdown(ctx)
			return nil, err
		}
		spanExporters = append(spanExporters, se)
	}
	if len(spanExporters) > 0 {
		tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		for _, e := range spanExporters {
			tpOpts = append(tpOpts, sdktrace.WithBatcher(e))
		}
		t.sdkTracers = sdktrace.NewTracerProvider(tpOpts...)
		t.Tracers, t.Tracing = t.sdkTracers, true
	} else {
		t.Tracers = noop.NewTracerProvider()
	}
	t.Export = exp.describe()
	// W3C trace context + baggage, globally: otelgrpc and the gRPC call
	// interceptor read the global propagator (the REST API reads the W3C
	// trace context only).
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry error", "err", err)
	}))
	return t, nil
}

// Meter returns a named meter.
func (t *Telemetry) Meter(name string) metric.Meter { return t.Meters.Meter(name) }

// Tracer returns a named tracer.
func (t *Telemetry) Tracer(name string) trace.Tracer { return t.Tracers.Tracer(name) }

// MetricsHandler serves the Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
}

// Shutdown flushes and stops the providers: the last OTLP export happens
// here, within flushBudget of ctx. A failed export is logged, not
// returned: lost telemetry does not make a shutdown unclean (and a
// collector that is down must not cost the whole shutdown deadline).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, flushBudget)
	defer cancel()
	var errs []error
	if t.sdkTracers != nil {
		errs = append(errs, t.sdkTracers.Shutdown(ctx))
	}
	errs = append(errs, t.Meters.Shutdown(ctx))
	if err := errors.Join(errs...); err != nil {
		t.log.Warn("OpenTelemetry: the final export failed; telemetry since the previous export is lost", "err", err)
	}
	return nil
}

// NewLogger returns a slog logger writing JSON or text at level, adding
// trace_id and span_id from the context of each record. Durations are
// written as durations ("1.5s", "20.0016ms"), not as nanoseconds.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	hopts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationsAsText}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, hopts)
	} else {
		h = slog.NewJSONHandler(w, hopts)
	}
	return slog.New(traceHandler{h})
}

// durationsAsText writes a time.Duration attribute in Go's duration
// notation: slog's JSON handler would write its nanoseconds.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(a)}
}
func (h traceHandler) WithGroup(n string) slog.Handler { return traceHandler{h.Handler.WithGroup(n)} }

// buildInfoGauge is mqgate_build_info: always 1, labelled with the
// build, the Prometheus convention for asking which version runs where.
func buildInfoGauge(b buildinfo.Info) prometheus.Collector {
	if b.Version == "" {
		b.Version = "dev"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mqgate_build_info",
		Help: "The running build of mqgate: version, VCS revision, whether the work tree was modified, Go version (always 1).",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision,
			"dirty": strconv.FormatBool(b.Dirty), "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
