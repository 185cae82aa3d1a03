package telemetry

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportConfig is what the standard OTEL_* variables ask for. The
// exporters read the rest (endpoint, headers, TLS, timeout, compression)
// themselves.
type exportConfig struct {
	traces, metrics                 bool
	tracesProtocol, metricsProtocol string
	tracesEndpoint, metricsEndpoint string
}

const (
	protoGRPC = "grpc"
	protoHTTP = "http/protobuf"
)

// readExportConfig decides which signals go over OTLP and how. A signal is
// exported when an OTLP endpoint is set for it (OTEL_EXPORTER_OTLP_ENDPOINT
// or the signal's own) or its exporter variable says "otlp" explicitly,
// unless the SDK is disabled or the variable says "none".
func readExportConfig(getenv func(string) string) (exportConfig, error) {
	var c exportConfig
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	signal := func(name, exporterVar string, pull string) (on bool, protocol, endpoint string, err error) {
		endpoint = firstSet(getenv, "OTEL_EXPORTER_OTLP_"+name+"_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
		explicit := false
		for _, e := range strings.Split(getenv(exporterVar), ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "":
			case "otlp":
				explicit = true
			case "none":
				return false, "", "", nil
			default:
				if e == pull {
					continue // served on /metrics anyway
				}
				return false, "", "", fmt.Errorf("%s=%q: mqgate exports only otlp (or none)", exporterVar, e)
			}
		}
		if endpoint == "" && !explicit {
			return false, "", "", nil
		}
		protocol = strings.ToLower(firstSet(getenv, "OTEL_EXPORTER_OTLP_"+name+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"))
		switch protocol {
		case "":
			protocol = protoHTTP // the specification's default
		case protoGRPC, protoHTTP:
		default:
			return false, "", "", fmt.Errorf("OTLP protocol %q for %s: want grpc or http/protobuf", protocol, strings.ToLower(name))
		}
		return true, protocol, endpoint, nil
	}
	var err error
	if c.traces, c.tracesProtocol, c.tracesEndpoint, err = signal("TRACES", "OTEL_TRACES_EXPORTER", ""); err != nil {
		return c, err
	}
	if c.metrics, c.metricsProtocol, c.metricsEndpoint, err = signal("METRICS", "OTEL_METRICS_EXPORTER", "prometheus"); err != nil {
		return c, err
	}
	return c, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// describe is the start-up log's summary ("" when nothing is exported).
func (c exportConfig) describe() string {
	var parts []string
	if c.traces {
		parts = append(parts, fmt.Sprintf("traces→%s (%s)", orDefault(c.tracesEndpoint), c.tracesProtocol))
	}
	if c.metrics {
		parts = append(parts, fmt.Sprintf("metrics→%s (%s)", orDefault(c.metricsEndpoint), c.metricsProtocol))
	}
	return strings.Join(parts, ", ")
}

func orDefault(endpoint string) string {
	if endpoint == "" {
		return "default endpoint"
	}
	return endpoint
}

func newSpanExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	var (
		e   sdktrace.SpanExporter
		err error
	)
	if protocol == protoGRPC {
		e, err = otlptracegrpc.New(ctx)
	} else {
		e, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return e, nil
}

func newMetricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	var (
		e   sdkmetric.Exporter
		err error
	)
	if protocol == protoGRPC {
		e, err = otlpmetricgrpc.New(ctx)
	} else {
		e, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return e, nil
}
