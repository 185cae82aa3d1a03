package httpserver

import (
	"context"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// REST calls carry mqgate's headers, authorization and the trace context
// into gRPC; the HTTP span continues the caller's trace and the gRPC leg
// continues the HTTP span.
func TestRESTHeadersAndTraceContext(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]metadata.MD{}
	capture := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen[info.FullMethod] = md
		mu.Unlock()
		return h(ctx, req)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := newHarness(t, harnessOpts{tracer: tp, interceptor: capture})
	h.setup("orders", "NORMAL", "billing")

	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := h.do("POST", sendPath, `{"messages":[{"text":"traced"}]}`,
		"traceparent", "00-"+traceID+"-"+parent+"-01",
		"X-Mq-Client-Id", "curl-producer-7",
		"Authorization", "Bearer t0ken",
		"X-Request-Id", "req-42",
		"Cookie", "not=forwarded")
	if r.code != 200 {
		t.Fatalf("send: %d %s", r.code, r.body)
	}
	if r.header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("request id not echoed: %v", r.header)
	}
	for k := range r.header {
		if strings.HasPrefix(strings.ToLower(k), "grpc-") {
			t.Errorf("gRPC metadata leaked into the HTTP answer: %s", k)
		}
	}
	mu.Lock()
	md := seen["/mqgate.rest.v1.MessagingService/SendMessages"]
	mu.Unlock()
	if md == nil {
		t.Fatal("the send never reached the gRPC interceptor chain")
	}
	for k, want := range map[string]string{"x-mq-client-id": "curl-producer-7", "authorization": "Bearer t0ken", "x-request-id": "req-42"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("metadata %s = %v, want %q", k, got, want)
		}
	}
	if len(md.Get("cookie")) != 0 {
		t.Errorf("cookie forwarded as is: %v", md)
	}

	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "POST /v1/topics/{topic}/messages" {
			span = s
		}
	}
	if span == nil {
		var names []string
		for _, s := range rec.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("no HTTP span named by route; spans: %v", names)
	}
	if span.SpanContext().TraceID().String() != traceID || span.Parent().SpanID().String() != parent {
		t.Fatalf("HTTP span %s/%s does not continue the caller's trace %s/%s", span.SpanContext().TraceID(), span.Parent().SpanID(), traceID, parent)
	}
	tpOut := md.Get("traceparent")
	if len(tpOut) != 1 || tpOut[0] != "00-"+traceID+"-"+span.SpanContext().SpanID().String()+"-01" {
		t.Fatalf("gRPC leg traceparent %v, want the HTTP span %s as parent", tpOut, span.SpanContext().SpanID())
	}

	// ?body=text travels as x-mq-body-format.
	h.do("POST", recvPath+"?body=text", noWait)
	mu.Lock()
	md = seen["/mqgate.rest.v1.MessagingService/ReceiveMessages"]
	mu.Unlock()
	if got := md.Get("x-mq-body-format"); len(got) != 1 || got[0] != "text" {
		t.Fatalf("body format metadata %v", got)
	}
}
