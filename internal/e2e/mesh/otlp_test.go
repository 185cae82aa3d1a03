package mesh

import (
	"context"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/internal/testutil"
)

// otlpReceiver is a minimal OTLP/gRPC collector: it keeps every span and
// every metric data point's name and attributes.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	Addr string

	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics map[string][][]*commonpb.KeyValue
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{metrics: map[string][][]*commonpb.KeyValue{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = lis.Addr().String()
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	colmetricspb.RegisterMetricsServiceServer(s, metricsService{otlpReceiver: r})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// metricsService adapts the metrics Export (same method name as traces).
type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	*otlpReceiver
}

func (m metricsService) Export(_ context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				var pts [][]*commonpb.KeyValue
				switch d := mt.GetData().(type) {
				case *metricspb.Metric_Sum:
					for _, p := range d.Sum.GetDataPoints() {
						pts = append(pts, p.GetAttributes())
					}
				case *metricspb.Metric_Gauge:
					for _, p := range d.Gauge.GetDataPoints() {
						pts = append(pts, p.GetAttributes())
					}
				case *metricspb.Metric_Histogram:
					for _, p := range d.Histogram.GetDataPoints() {
						pts = append(pts, p.GetAttributes())
					}
				}
				m.metrics[mt.GetName()] = append(m.metrics[mt.GetName()], pts...)
			}
		}
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

// trace returns the received spans of one trace, by span id.
func (r *otlpReceiver) trace(traceID string) map[string]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range r.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			out[hex.EncodeToString(s.GetSpanId())] = s
		}
	}
	return out
}

// metricWith reports whether a data point of name has attribute k=v.
func (r *otlpReceiver) metricWith(name, k, v string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, attrs := range r.metrics[name] {
		if k == "" {
			return true
		}
		for _, kv := range attrs {
			if kv.GetKey() == k && kv.GetValue().GetStringValue() == v {
				return true
			}
		}
	}
	return false
}

// chain walks from the first span named leaf up its parents within
// spans and returns the names, leaf first, ending with the id of the
// first parent that is not in spans (the caller's span).
func chain(spans map[string]*tracepb.Span, leaf string) (names []string, root string) {
	var cur *tracepb.Span
	for _, s := range spans {
		if s.GetName() == leaf {
			cur = s
		}
	}
	for cur != nil {
		names = append(names, cur.GetName())
		parent := hex.EncodeToString(cur.GetParentSpanId())
		next, ok := spans[parent]
		if !ok {
			return names, parent
		}
		cur = next
	}
	return nil, ""
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, mqgate exports traces and metrics
// over OTLP. A send carrying a W3C traceparent (gRPC metadata, or the HTTP
// header on REST) yields one trace: the caller's span → the gRPC server
// span (via the HTTP span for REST) → produce.Send → store.Append; a
// parked receive's span says why it woke; bodies and keys appear nowhere.
func TestOTLPTraceLinksClientToStoreAppend(t *testing.T) {
	e2e(t)
	rcv := startOTLPReceiver(t)
	p := start(t, testutil.StartOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + rcv.Addr,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_METRIC_EXPORT_INTERVAL=300",
	}})
	if !p.HasLine("OpenTelemetry export over OTLP") {
		t.Fatalf("no OTLP export announced at start:\n%s", p.Log())
	}
	topic, group := uniq("otlp-topic"), uniq("otlp-group")
	cli(t, p.GRPC, "topic", "create", topic)
	cli(t, p.GRPC, "group", "create", group)
	raw := dialRaw(t, p.GRPC, false)

	// gRPC: traceparent in the metadata.
	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, err := raw.SendMessage(raw.ctx(t, 10*time.Second, "traceparent", "00-"+traceID+"-"+clientSpan+"-01"),
		&pb.SendMessageRequest{Messages: []*pb.Message{{
			Topic: res(topic), Body: []byte("secret-body-grpc"),
			SystemProperties: &pb.SystemProperties{MessageId: uniq("traced"), MessageType: pb.MessageType_NORMAL,
				BodyEncoding: pb.Encoding_IDENTITY, Keys: []string{"secret-key"}},
		}}})
	if err != nil || resp.GetStatus().GetCode() != pb.Code_OK {
		t.Fatalf("send: %v %v", err, resp.GetStatus())
	}
	var names []string
	var root string
	waitFor(t, 20*time.Second, "the send's trace over OTLP", func() bool {
		names, root = chain(rcv.trace(traceID), "store.Append")
		return len(names) >= 3
	})
	want := []string{"store.Append", "produce.Send", "apache.rocketmq.v2.MessagingService/SendMessage"}
	if strings.Join(names, " → ") != strings.Join(want, " → ") || root != clientSpan {
		t.Fatalf("trace %s: %v under %s, want %v under the client span %s", traceID, names, root, want, clientSpan)
	}
	for _, s := range rcv.trace(traceID) {
		if s.GetName() == "apache.rocketmq.v2.MessagingService/SendMessage" && s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("gRPC span kind %v, want SERVER", s.GetKind())
		}
		if s.GetName() == "produce.Send" && (attr(s, "messaging.system") != "rocketmq" || attr(s, "messaging.destination.name") != topic) {
			t.Errorf("produce.Send attributes %v", s.GetAttributes())
		}
	}

	// REST: the HTTP traceparent header; the gRPC leg continues the HTTP
	// span.
	const restTrace, restClient = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	if code, body := httpDo(t, "POST", "http://"+p.HTTP+"/v1/topics/"+topic+"/messages",
		`{"messages":[{"text":"secret-body-rest","keys":["secret-key"]}]}`, "traceparent", "00-"+restTrace+"-"+restClient+"-01"); code != 200 {
		t.Fatalf("REST send: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "the REST send's trace over OTLP", func() bool {
		names, root = chain(rcv.trace(restTrace), "store.Append")
		return len(names) >= 4 && root == restClient
	})
	if names[1] != "produce.Send" || names[2] != "mqgate.rest.v1.MessagingService/SendMessages" {
		t.Fatalf("REST trace: %v, want store.Append → produce.Send → the in-process gRPC span → the HTTP span", names)
	}

	// A parked receive woken by an arrival says so.
	const recvTrace = "1f2e3d4c5b6a79881f2e3d4c5b6a7988"
	emptyTopic := uniq("otlp-wake")
	cli(t, p.GRPC, "topic", "create", emptyTopic)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		stream, err := raw.ReceiveMessage(raw.ctx(t, 30*time.Second, "traceparent", "00-"+recvTrace+"-"+clientSpan+"-01"),
			&pb.ReceiveMessageRequest{Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(emptyTopic)},
				FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}, BatchSize: 1,
				InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(15 * time.Second)})
		for err == nil {
			_, err = stream.Recv()
		}
	}()
	waitFor(t, 10*time.Second, "the receive to park", func() bool { return parked(t, p) == 1 })
	if code, body := httpDo(t, "POST", "http://"+p.HTTP+"/v1/topics/"+emptyTopic+"/messages", `{"messages":[{"text":"wake up"}]}`); code != 200 {
		t.Fatalf("REST send: %d %s", code, body)
	}
	<-recvDone
	waitFor(t, 20*time.Second, "the receive's wake reason over OTLP", func() bool {
		for _, s := range rcv.trace(recvTrace) {
			for _, ev := range s.GetEvents() {
				if s.GetName() == "pop.Receive" && ev.GetName() == "pop.wake" && len(ev.GetAttributes()) > 0 &&
					ev.GetAttributes()[0].GetValue().GetStringValue() == "arrival" {
					return true
				}
			}
		}
		return false
	})

	// Metrics arrive over OTLP too, labelled by topic.
	waitFor(t, 20*time.Second, "metrics over OTLP", func() bool {
		return rcv.metricWith("mqgate.messages.in", "messaging.destination.name", topic) &&
			rcv.metricWith("mqgate.store.append.duration", "", "") &&
			rcv.metricWith("mqgate.consumer.backlog", "messaging.consumer.group.name", group)
	})

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		for _, kv := range s.GetAttributes() {
			if v := kv.GetValue().String(); strings.Contains(v, "secret-") {
				t.Errorf("span %s attribute %s carries a body or key: %s", s.GetName(), kv.GetKey(), v)
			}
		}
	}
}
