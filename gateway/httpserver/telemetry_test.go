package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// routeHeader tells the reference handler which http.route otelhttp's
// labeler gets (what nameSpan gave it before); no header, no route.
const routeHeader = "X-Test-Route"

// reference puts otelhttp v0.72, configured as the REST API had it, in
// front of h's HTTP server, with its own providers, and points h's
// requests at it: each request is then measured by both otelhttp and
// mqgate's REST telemetry.
func reference(t *testing.T, h *harness, mp *sdkmetric.MeterProvider, tp trace.TracerProvider) {
	t.Helper()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.rest.srv.Handler.ServeHTTP(w, r)
		r.Pattern = "" // the ServeMux's "/v1/", which the REST API cleared for otelhttp
		if rt := r.Header.Get(routeHeader); rt != "" {
			l, _ := otelhttp.LabelerFromContext(r.Context())
			l.Add(attribute.String("http.route", rt))
		}
	})
	opts := []otelhttp.Option{otelhttp.WithMeterProvider(mp), otelhttp.WithPropagators(propagation.TraceContext{})}
	if tp != nil {
		opts = append(opts, otelhttp.WithTracerProvider(tp))
	}
	srv := httptest.NewServer(otelhttp.NewHandler(inner, "mqgate.rest", opts...))
	t.Cleanup(srv.Close)
	h.base = srv.URL
}

// point is one histogram data point: its attributes, count, sum (sizes
// only: durations differ) and bounds.
type point struct {
	count  uint64
	sum    string
	bounds string
}

// instrument is one collected histogram.
type instrument struct {
	scope, unit, description string
	points                   map[string]point
}

// collect reads r's http.server.* histograms. Attributes named in drop
// are left out of the point keys (points that then share a key add up).
func collect(t *testing.T, r sdkmetric.Reader, drop ...attribute.Key) map[string]instrument {
	t.Helper()
	keep := func(kv attribute.KeyValue) bool { return !slices.Contains(drop, kv.Key) }
	key := func(s attribute.Set) string {
		f, _ := s.Filter(keep)
		return f.Encoded(attribute.DefaultEncoder())
	}
	add := func(in instrument, k string, p point) {
		if q, ok := in.points[k]; ok {
			p.count += q.count
			if p.sum != "" {
				a, _ := strconv.ParseInt(p.sum, 10, 64)
				b, _ := strconv.ParseInt(q.sum, 10, 64)
				p.sum = strconv.FormatInt(a+b, 10)
			}
		}
		in.points[k] = p
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]instrument{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, "http.server.") {
				continue
			}
			in := instrument{scope: sm.Scope.Name, unit: m.Unit, description: m.Description, points: map[string]point{}}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(in, key(p.Attributes), point{count: p.Count, bounds: fmt.Sprint(p.Bounds)})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					add(in, key(p.Attributes), point{count: p.Count, sum: fmt.Sprint(p.Sum), bounds: fmt.Sprint(p.Bounds)})
				}
			default:
				t.Fatalf("%s is %T, want a histogram", m.Name, m.Data)
			}
			out[m.Name] = in
		}
	}
	return out
}

// The REST metrics are otelhttp's: the same instruments (names, units,
// descriptions, bucket boundaries) and, request for request, the same
// attribute sets but for server.address and server.port, counts and body
// sizes; routed requests are labelled by route, others not at all.
func TestRESTMetricsMatchOtelhttp(t *testing.T) {
	delta := sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality })
	newReader, refReader := sdkmetric.NewManualReader(delta), sdkmetric.NewManualReader(delta)
	newMP, refMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(newReader)), sdkmetric.NewMeterProvider(sdkmetric.WithReader(refReader))
	h := newHarness(t, harnessOpts{meter: newMP, maxRequestBytes: 4096})
	h.setup("orders", "NORMAL", "billing")
	collect(t, newReader) // the setup's requests, which otelhttp did not see
	reference(t, h, refMP, nil)

	const sendRoute = "/v1/topics/{topic}/messages"
	for _, c := range []struct {
		method, path, body, route string
		code                      int
	}{
		{"POST", sendPath, `{"messages":[{"text":"measured"}]}`, sendRoute, 200},
		{"POST", sendPath, `{"messages":[{"text":"measured"},{"text":"twice"}]}`, sendRoute, 200},
		{"POST", sendPath, `{"messages":[`, sendRoute, 400},
		{"POST", recvPath, noWait, "/v1/groups/{group}/topics/{topic}:receive", 200},
		{"GET", "/v1/topics/orders", "", "/v1/topics/{name}", 200},
		{"GET", "/v1/topics/missing", "", "/v1/topics/{name}", 404},
		{"GET", "/v1/no/such/route", "", "", 404},
		{"POST", sendPath, `{"messages":[{"text":"` + strings.Repeat("x", 5000) + `"}]}`, "", 413},
		{"post", sendPath, `{"messages":[{"text":"lower case"}]}`, "", 0},
		{"PURGE", sendPath, "", "", 0},
	} {
		hdr := []string{}
		if c.route != "" {
			hdr = append(hdr, routeHeader, c.route)
		}
		r := h.do(c.method, c.path, c.body, hdr...)
		if c.code != 0 && r.code != c.code {
			t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, r.code, r.body, c.code)
		}
	}

	got, want := collect(t, newReader), collect(t, refReader, "server.address", "server.port")
	names := []string{"http.server.request.duration", "http.server.request.body.size", "http.server.response.body.size"}
	units := []string{"s", "By", "By"}
	for i, name := range names {
		g, w := got[name], want[name]
		if len(w.points) == 0 {
			t.Fatalf("otelhttp recorded no %s: %v", name, want)
		}
		if g.unit != units[i] || g.unit != w.unit || g.description != w.description {
			t.Errorf("%s: unit %q description %q, otelhttp %q %q", name, g.unit, g.description, w.unit, w.description)
		}
		if g.scope != restScope {
			t.Errorf("%s: scope %q, want %q", name, g.scope, restScope)
		}
		if !equalPoints(g.points, w.points) {
			t.Errorf("%s data points differ from otelhttp's\n got: %s\nwant: %s", name, dump(g.points), dump(w.points))
		}
	}

	// The exact series of the first sends, as a dashboard reads them.
	send := "http.request.method=POST,http.response.status_code=200,http.route=" + sendRoute +
		",network.protocol.name=http,network.protocol.version=1.1,url.scheme=http"
	d, ok := got["http.server.request.duration"].points[send]
	if !ok || d.count != 2 || d.bounds != "[0.005 0.01 0.025 0.05 0.075 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10]" {
		t.Errorf("send duration series %s: %+v (present %v), want 2 sends in otelhttp's buckets", send, d, ok)
	}
	for k := range got["http.server.request.duration"].points {
		if strings.Contains(k, "/v1/no/such/route") || strings.Contains(k, "/v1/topics/orders/messages") {
			t.Errorf("a series is labelled by a concrete path: %s", k)
		}
	}
	if n := len(got["http.server.request.duration"].points); n != 9 {
		t.Errorf("%d duration series, want 9 (one per route, method and status):\n%s", n, dump(got["http.server.request.duration"].points))
	}
}

// Clients choose the Host header: a hundred different ones still make a
// single series, which names no host or port.
func TestRESTMetricsIgnoreHost(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	h := newHarness(t, harnessOpts{meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	h.setup("orders", "NORMAL", "billing")
	collect(t, reader)
	for i := range 100 {
		req, err := http.NewRequest("GET", h.base+"/v1/topics/orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = fmt.Sprintf("host-%d.example:%d", i, 1000+i)
		resp, err := h.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET with Host %s: %d", req.Host, resp.StatusCode)
		}
	}
	var n uint64
	var series []string
	for k, p := range collect(t, reader)["http.server.request.duration"].points {
		if strings.Contains(k, "http.route=/v1/topics/{name}") {
			series = append(series, k)
			n += p.count
		}
		if strings.Contains(k, "server.") || strings.Contains(k, "host-") {
			t.Errorf("series labelled by the Host header: %s", k)
		}
	}
	if len(series) != 1 || n < 100 {
		t.Errorf("%d series counting %d requests, want 1 counting at least 100: %v", len(series), n, series)
	}
}

func equalPoints(a, b map[string]point) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func dump(ps map[string]point) string {
	var lines []string
	for k, v := range ps {
		lines = append(lines, fmt.Sprintf("  %s: %+v", k, v))
	}
	sort.Strings(lines)
	return "\n" + strings.Join(lines, "\n")
}

// With spans recorded, a REST request with a traceparent gets a server
// span that continues it, named after the route, with otelhttp's
// attributes and an error status for a 5xx answer.
func TestRESTSpanContinuesTraceparent(t *testing.T) {
	rec, refRec := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	tp, refTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(refRec))
	fail := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-mq-test-fail")) > 0 {
			return nil, status.Error(grpccodes.Internal, "failed on purpose")
		}
		return h(ctx, req)
	}
	h := newHarness(t, harnessOpts{tracer: tp, interceptor: fail})
	h.setup("orders", "NORMAL", "billing")
	reference(t, h, sdkmetric.NewMeterProvider(), refTP)

	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, c := range []struct {
		fail bool
		code int
	}{{false, 200}, {true, 500}} {
		rec.Reset()
		refRec.Reset()
		hdr := []string{"traceparent", "00-" + traceID + "-" + parent + "-01", "User-Agent", "span-test/1", "X-Forwarded-For", "203.0.113.7, 10.0.0.1"}
		if c.fail {
			hdr = append(hdr, "X-Mq-Test-Fail", "1")
		}
		if r := h.do("POST", sendPath, `{"messages":[{"text":"traced"}]}`, hdr...); r.code != c.code {
			t.Fatalf("send: %d %s, want %d", r.code, r.body, c.code)
		}
		spans, ref := rec.Ended(), refRec.Ended()
		if len(spans) != 1 || len(ref) != 1 {
			t.Fatalf("%d spans, otelhttp %d; want one each", len(spans), len(ref))
		}
		s, o := spans[0], ref[0]
		if s.Name() != "POST /v1/topics/{topic}/messages" || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %q kind %v, want the route and server", s.Name(), s.SpanKind())
		}
		if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parent || !s.Parent().IsRemote() {
			t.Errorf("span %s parent %s (remote %v), want %s/%s", s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), traceID, parent)
		}
		if s.InstrumentationScope().Name != restScope {
			t.Errorf("span scope %q", s.InstrumentationScope().Name)
		}
		if g, w := attrs(s.Attributes()), attrs(o.Attributes()); g != w {
			t.Errorf("span attributes differ from otelhttp's\n got: %s\nwant: %s", g, w)
		}
		for _, want := range []string{"client.address=203.0.113.7", "user_agent.original=span-test/1", "url.path=" + sendPath, "http.response.status_code=" + fmt.Sprint(c.code)} {
			if !strings.Contains(attrs(s.Attributes()), want) {
				t.Errorf("span attributes %s lack %s", attrs(s.Attributes()), want)
			}
		}
		wantStatus := codes.Unset
		if c.fail {
			wantStatus = codes.Error
		}
		if s.Status() != o.Status() || s.Status().Code != wantStatus {
			t.Errorf("span status %+v, otelhttp %+v, want %v", s.Status(), o.Status(), wantStatus)
		}
	}
}

func attrs(kvs []attribute.KeyValue) string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = string(kv.Key) + "=" + kv.Value.Emit()
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// With a no-op tracer provider (no exporter) the REST telemetry starts no
// span and does not even extract the caller's trace context: the
// traceparent header reaches the gRPC leg untouched.
func TestRESTNoSpanWithNoopTracer(t *testing.T) {
	if tracerOf(noop.NewTracerProvider()) != nil {
		t.Fatal("a no-op provider gave a tracer")
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var seen []string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := stateOf(r)
		if st == nil || st.span != nil {
			t.Errorf("request state %+v: want one without a span", st)
		}
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			t.Errorf("a span context %v is in the request's context", sc)
		}
		seen = append(seen, r.Header.Get("traceparent"))
		w.WriteHeader(http.StatusNoContent)
	})
	s := &Server{}
	h := newRESTTelemetry(sdkmetric.NewMeterProvider(), noop.NewTracerProvider()).handler(s.prepare(inner))
	req := httptest.NewRequest("GET", "/v1/topics", nil)
	req.Header.Set("traceparent", tp)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent || len(seen) != 1 || seen[0] != tp {
		t.Fatalf("answer %d, traceparent seen %v, want %q", w.Code, seen, tp)
	}
}

// The writer the API gets keeps what grpc-gateway and admit use: flushes
// reach the server's writer (through http.ResponseController too), the
// status is the first final one, and the body bytes are counted.
func TestRESTResponseRecorder(t *testing.T) {
	w := &fakeWriter{header: http.Header{}}
	r := &responseRecorder{w: w, status: http.StatusOK}
	r.Header().Set("Content-Length", "5")
	r.WriteHeader(http.StatusEarlyHints)
	r.WriteHeader(http.StatusAccepted)
	r.WriteHeader(http.StatusInternalServerError)
	if err := http.NewResponseController(r).Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if w.flushes != 1 || fmt.Sprint(w.codes) != "[103 202 500]" || r.status != http.StatusAccepted || r.written != 5 ||
		w.body.String() != "hello" || w.header.Get("Content-Length") != "5" {
		t.Fatalf("flushes %d codes %v status %d written %d body %q header %v", w.flushes, w.codes, r.status, r.written, &w.body, w.header)
	}
	if r.Unwrap() != w {
		t.Fatal("Unwrap does not give the server's writer")
	}

	// Written without WriteHeader, or flushed first: 200.
	for _, first := range []func(*responseRecorder){
		func(r *responseRecorder) { _, _ = r.Write([]byte("x")) },
		func(r *responseRecorder) { r.Flush() },
	} {
		r := &responseRecorder{w: &fakeWriter{header: http.Header{}}, status: http.StatusOK}
		first(r)
		r.WriteHeader(http.StatusTeapot)
		if r.status != http.StatusOK {
			t.Fatalf("status %d after an implicit 200", r.status)
		}
	}
}

// fakeWriter records what a ResponseWriter is asked to do.
type fakeWriter struct {
	header  http.Header
	codes   []int
	body    strings.Builder
	flushes int
}

func (w *fakeWriter) Header() http.Header         { return w.header }
func (w *fakeWriter) WriteHeader(code int)        { w.codes = append(w.codes, code) }
func (w *fakeWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *fakeWriter) Flush()                      { w.flushes++ }
