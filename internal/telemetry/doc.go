// Package telemetry builds mqgate's OpenTelemetry providers and its slog
// logger: a MeterProvider whose metrics are served on /metrics through the
// Prometheus exporter, a TracerProvider, and a logger that carries the
// trace and span ids of the context it logs with.
//
// It must not import any other mqgate package except internal/ leaves.
package telemetry
