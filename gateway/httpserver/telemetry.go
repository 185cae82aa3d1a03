package httpserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// REST telemetry: the HTTP server metrics and spans of the REST API.
//
// The metrics are the semantic-convention server instruments otelhttp
// records, with its bucket boundaries and attributes, so the Prometheus
// series (http_server_request_duration_seconds,
// http_server_request_body_size_bytes,
// http_server_response_body_size_bytes) keep their names and labels:
// http.request.method (_OTHER for a method outside RFC 9110's),
// url.scheme, network.protocol.name and network.protocol.version,
// http.response.status_code and, for a request grpc-gateway routed,
// http.route (nameSpan; a request no route matched has none, so unknown
// paths add no label values). Two things differ from otelhttp:
// otel_scope_name is this package, and the metrics carry no
// server.address or server.port. Those come from the Host header, which
// the client chooses: as labels they would let any client add series
// without end (the semantic conventions make them opt-in on metrics for
// that reason). Spans still carry them. The attribute set of each
// (method, protocol, scheme, status, route) is built once and kept, so a
// request records its three measurements without building one.
//
// A span is started only when the tracer provider is not a no-op (with
// no OTLP exporter the node installs noop.TracerProvider): it continues
// the caller's W3C traceparent, is a server span named after the route
// ("POST /v1/topics/{topic}/messages", nameSpan) and carries the request
// and response attributes of the conventions, with an error status for
// 5xx answers. prepare then points the traceparent the gRPC leg reads at
// it. Without spans the caller's traceparent reaches the gRPC leg as it
// came, so the trace the log lines carry is the caller's either way.

// restScope names the meter and the tracer: the series carry it as
// otel_scope_name.
const restScope = "github.com/mqgate/mqgate/gateway/httpserver"

// durationBuckets are the boundaries of http.server.request.duration, as
// otelhttp sets them.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// maxMetricSets bounds the kept attribute sets. The key holds the
// method as the client sent it (the set maps an unknown one to _OTHER);
// past the bound a set is built for each request instead of kept.
const maxMetricSets = 1024

type restTelemetry struct {
	duration metric.Float64Histogram
	reqSize  metric.Int64Histogram
	respSize metric.Int64Histogram

	// tracer is nil when spans are off. global: look the provider up per
	// request (Options.TracerProvider was nil).
	tracer trace.Tracer
	global bool

	mu   sync.RWMutex
	sets map[metricKey]metric.MeasurementOption
}

// metricKey is what a request's metric attributes are made of, as the
// request carries it (the method unparsed).
type metricKey struct {
	method, proto, route string
	status               int
	tls                  bool
}

func newRESTTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) *restTelemetry {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &restTelemetry{sets: map[metricKey]metric.MeasurementOption{}}
	m := mp.Meter(restScope)
	d, err := httpconv.NewServerRequestDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		otel.Handle(fmt.Errorf("http.server.request.duration: %w", err))
	}
	in, err := httpconv.NewServerRequestBodySize(m)
	if err != nil {
		otel.Handle(fmt.Errorf("http.server.request.body.size: %w", err))
	}
	out, err := httpconv.NewServerResponseBodySize(m)
	if err != nil {
		otel.Handle(fmt.Errorf("http.server.response.body.size: %w", err))
	}
	t.duration, t.reqSize, t.respSize = d.Inst(), in.Inst(), out.Inst()
	if tp == nil {
		t.global = true
	} else {
		t.tracer = tracerOf(tp)
	}
	return t
}

// tracerOf is tp's tracer, nil for a no-op provider.
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return nil
	}
	return tp.Tracer(restScope)
}

func (t *restTelemetry) tracerNow() trace.Tracer {
	if t.global {
		return tracerOf(otel.GetTracerProvider())
	}
	return t.tracer
}

// handler wraps next, the REST API, in the telemetry. It also gives the
// request its requestState, which carries the server's own
// ResponseWriter, the writer that counts what is written, the route and
// the span.
func (t *restTelemetry) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &requestState{raw: w, rw: responseRecorder{w: w, status: http.StatusOK}}
		ctx := context.WithValue(r.Context(), requestStateKey{}, st)
		if tracer := t.tracerNow(); tracer != nil {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, st.span = tracer.Start(ctx, methodSpanName(r.Method),
				trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(requestSpanAttrs(r)...))
			defer st.span.End()
		}
		r = r.WithContext(ctx)
		r.Pattern = "" // the route is grpc-gateway's (nameSpan), not the ServeMux's "/v1/"
		if r.Body != nil && r.Body != http.NoBody {
			st.body.ReadCloser = r.Body
			r.Body = &st.body
		}
		next.ServeHTTP(&st.rw, r)

		route := ""
		if st.route != nil {
			route = *st.route
		}
		o := t.metricSet(r, route, st.rw.status)
		t.reqSize.Record(ctx, st.body.n, o)
		t.respSize.Record(ctx, st.rw.written, o)
		t.duration.Record(ctx, float64(time.Since(start))/float64(time.Second), o)
		if st.span != nil && st.span.IsRecording() {
			st.span.SetStatus(spanStatus(st.rw.status))
			st.span.SetAttributes(responseSpanAttrs(st.rw.status, st.body.n, st.rw.written)...)
		}
	})
}

// metricSet returns the kept attribute set of the request's metrics.
func (t *restTelemetry) metricSet(r *http.Request, route string, status int) metric.MeasurementOption {
	k := metricKey{method: r.Method, proto: r.Proto, route: route, status: status, tls: r.TLS != nil}
	t.mu.RLock()
	o, ok := t.sets[k]
	t.mu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(attribute.NewSet(metricAttrs(k)...))
	t.mu.Lock()
	if len(t.sets) < maxMetricSets {
		t.sets[k] = o
	}
	t.mu.Unlock()
	return o
}

func metricAttrs(k metricKey) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(metricMethod(k.method)), urlScheme(k.tls))
	name, version := protocol(k.proto)
	if name != "" {
		attrs = append(attrs, semconv.NetworkProtocolName(name))
	}
	if version != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(version))
	}
	if k.status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.route != "" {
		attrs = append(attrs, semconv.HTTPRoute(k.route))
	}
	return attrs
}

// requestSpanAttrs are the span's attributes known before the request is
// served.
func requestSpanAttrs(r *http.Request) []attribute.KeyValue {
	tls := r.TLS != nil
	host, port := splitHostPort(r.Host)
	attrs := make([]attribute.KeyValue, 0, 13)
	method, original := spanMethod(r.Method)
	attrs = append(attrs, semconv.ServerAddress(host), method, urlScheme(tls))
	if p := nonDefaultPort(tls, port); p > 0 {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	if original.Valid() {
		attrs = append(attrs, original)
	}
	peer, peerPort := splitHostPort(r.RemoteAddr)
	if peer != "" {
		attrs = append(attrs, semconv.NetworkPeerAddress(peer))
		if peerPort > 0 {
			attrs = append(attrs, semconv.NetworkPeerPort(peerPort))
		}
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	client, _, _ := strings.Cut(r.Header.Get("X-Forwarded-For"), ",")
	if client == "" {
		client = peer
	}
	if client != "" {
		attrs = append(attrs, semconv.ClientAddress(client))
	}
	if r.URL != nil && r.URL.Path != "" {
		attrs = append(attrs, semconv.URLPath(r.URL.Path))
	}
	name, version := protocol(r.Proto)
	if name != "" && name != "http" {
		attrs = append(attrs, semconv.NetworkProtocolName(name))
	}
	if version != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(version))
	}
	return attrs
}

// responseSpanAttrs are the span's attributes known once it is served;
// zero values are left out.
func responseSpanAttrs(status int, read, written int64) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 3)
	if read > 0 {
		attrs = append(attrs, semconv.HTTPRequestBodySize(int(read)))
	}
	if written > 0 {
		attrs = append(attrs, semconv.HTTPResponseBodySize(int(written)))
	}
	if status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	return attrs
}

// spanStatus is an error for a 5xx answer or an impossible status; a 4xx
// is the client's error, not the server's.
func spanStatus(status int) (codes.Code, string) {
	switch {
	case status < 100 || status > 599:
		return codes.Error, fmt.Sprintf("Invalid HTTP status code %d", status)
	case status >= 500:
		return codes.Error, ""
	}
	return codes.Unset, ""
}

// standardMethod is the http.request.method value of an RFC 9110 method
// (and PATCH), spelt exactly.
func standardMethod(m string) (attribute.KeyValue, bool) {
	switch m {
	case http.MethodGet:
		return semconv.HTTPRequestMethodGet, true
	case http.MethodPost:
		return semconv.HTTPRequestMethodPost, true
	case http.MethodPut:
		return semconv.HTTPRequestMethodPut, true
	case http.MethodDelete:
		return semconv.HTTPRequestMethodDelete, true
	case http.MethodPatch:
		return semconv.HTTPRequestMethodPatch, true
	case http.MethodHead:
		return semconv.HTTPRequestMethodHead, true
	case http.MethodOptions:
		return semconv.HTTPRequestMethodOptions, true
	case http.MethodConnect:
		return semconv.HTTPRequestMethodConnect, true
	case http.MethodTrace:
		return semconv.HTTPRequestMethodTrace, true
	}
	return attribute.KeyValue{}, false
}

// metricMethod is the method the metrics carry: upper-cased, _OTHER when
// it is not a standard one.
func metricMethod(m string) string {
	if kv, ok := standardMethod(strings.ToUpper(m)); ok {
		return kv.Value.AsString()
	}
	return "_OTHER"
}

// spanMethod is the span's http.request.method and, when the request's
// method is not spelt as a standard one, http.request.method_original.
func spanMethod(m string) (method, original attribute.KeyValue) {
	if m == "" {
		return semconv.HTTPRequestMethodOther, attribute.KeyValue{}
	}
	if kv, ok := standardMethod(m); ok {
		return kv, attribute.KeyValue{}
	}
	original = semconv.HTTPRequestMethodOriginal(m)
	if kv, ok := standardMethod(strings.ToUpper(m)); ok {
		return kv, original
	}
	return semconv.HTTPRequestMethodOther, original
}

// methodSpanName names the span until nameSpan names it after the route.
func methodSpanName(m string) string {
	m = strings.ToUpper(m)
	if _, ok := standardMethod(m); ok {
		return m
	}
	return "HTTP"
}

func urlScheme(tls bool) attribute.KeyValue {
	if tls {
		return semconv.URLScheme("https")
	}
	return semconv.URLScheme("http")
}

// nonDefaultPort is port unless it is absent or the scheme's default.
func nonDefaultPort(tls bool, port int) int {
	if port <= 0 || (tls && port == 443) || (!tls && port == 80) {
		return -1
	}
	return port
}

// protocol splits "HTTP/1.1" into the lower-case name and the version.
func protocol(proto string) (name, version string) {
	name, version, _ = strings.Cut(proto, "/")
	if name == "HTTP" {
		return "http", version // the common case, without a copy
	}
	return strings.ToLower(name), version
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port" (a
// Host header or a peer address); the host is "" and the port -1 when
// absent or malformed.
func splitHostPort(hp string) (host string, port int) {
	if strings.HasPrefix(hp, "[") {
		end := strings.LastIndexByte(hp, ']')
		if end < 0 {
			return "", -1
		}
		if strings.IndexByte(hp[end:], ':') < 0 {
			return hp[1:end], -1
		}
	} else if strings.IndexByte(hp, ':') < 0 {
		return hp, -1
	}
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", -1
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return host, -1
	}
	return host, int(n)
}

// responseRecorder is the ResponseWriter the REST API writes to: it
// notes the status and counts the body bytes. Flush and Unwrap keep
// http.ResponseController (grpc-gateway's streaming flushes) working.
type responseRecorder struct {
	w           http.ResponseWriter
	status      int // 200 until a final status is written
	written     int64
	wroteHeader bool
}

func (r *responseRecorder) Header() http.Header { return r.w.Header() }

func (r *responseRecorder) WriteHeader(code int) {
	if !r.wroteHeader && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		r.wroteHeader, r.status = true, code
	}
	r.w.WriteHeader(code)
}

func (r *responseRecorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.w.Write(p)
	r.written += int64(n)
	return n, err
}

func (r *responseRecorder) Flush() {
	r.wroteHeader = true
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *responseRecorder) Unwrap() http.ResponseWriter { return r.w }

// countedBody counts the request body bytes the API reads.
type countedBody struct {
	io.ReadCloser
	n int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
