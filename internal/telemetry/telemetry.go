package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Options configure Setup.
type Options struct {
	ServiceName    string
	ServiceVersion string
	// SpanExporters receive every finished span (tests, OTLP).
	SpanExporters []sdktrace.SpanExporter
}

// Telemetry holds the providers. Components take what they need from it.
type Telemetry struct {
	Meters   *sdkmetric.MeterProvider
	Tracers  *sdktrace.TracerProvider
	Registry *prometheus.Registry
}

// Setup builds the providers. Call Shutdown last, after every component
// that records into them has stopped.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.ServiceName == "" {
		opts.ServiceName = "mqgate"
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(opts.ServiceName), semconv.ServiceVersion(opts.ServiceVersion)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp))
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, e := range opts.SpanExporters {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(e))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	return &Telemetry{Meters: mp, Tracers: tp, Registry: reg}, nil
}

// Meter returns a named meter.
func (t *Telemetry) Meter(name string) metric.Meter { return t.Meters.Meter(name) }

// Tracer returns a named tracer.
func (t *Telemetry) Tracer(name string) trace.Tracer { return t.Tracers.Tracer(name) }

// MetricsHandler serves the Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.Tracers.Shutdown(ctx), t.Meters.Shutdown(ctx))
}

// NewLogger returns a slog logger writing JSON or text at level, adding
// trace_id and span_id from the context of each record.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	hopts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, hopts)
	} else {
		h = slog.NewJSONHandler(w, hopts)
	}
	return slog.New(traceHandler{h})
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
