// Package telemetry builds mqgate's OpenTelemetry providers and its slog
// logger: a MeterProvider whose metrics are served on /metrics through the
// Prometheus exporter (and pushed over OTLP when the standard OTEL_*
// variables ask for it), a TracerProvider that records spans only when
// they are exported (otherwise the no-op provider: the hot paths pay
// nothing), the global W3C trace-context + baggage propagator, histograms
// aggregated outside OpenTelemetry (the store's latencies, external.go),
// and a logger that carries the trace and span ids of the context it logs
// with. The final OTLP export at Shutdown gets at most 5 s of the shutdown
// deadline, and its failure is logged rather than failing the shutdown.
//
// Files: telemetry.go (Setup, providers, logger), otlp.go (which signals
// go over OTLP, and how), external.go (the Producer for external
// histograms).
//
// It must not import any other mqgate package except internal/ leaves.
package telemetry
