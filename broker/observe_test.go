package broker

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

type observed struct {
	*env
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

func newObserved(t *testing.T, tracing bool) *observed {
	o := &observed{env: &env{t: t, fs: vfs.NewMem(), clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), ctx: context.Background()},
		spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	st, err := storage.Open("/data", storage.Options{FS: o.fs, SegmentSize: 8 << 20, Now: o.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Clock: o.clk, DefaultQueues: 4, PopSnapshotInterval: time.Hour,
		Meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))}
	if tracing {
		cfg.Tracers = o.tp
	}
	b, err := Open(o.ctx, cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	o.store, o.b = st, b
	t.Cleanup(func() {
		if o.b != nil {
			o.close()
		}
	})
	return o
}

func (o *observed) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// metrics collects and indexes data points by metric name.
func (o *observed) metrics() map[string]metricdata.Aggregation {
	o.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		o.t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds the int64 points of a counter or gauge whose attributes
// include every one of want.
func sum(t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	t.Helper()
	var pts []metricdata.DataPoint[int64]
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	case nil:
		return 0
	default:
		t.Fatalf("unexpected aggregation %T", data)
	}
	var n int64
next:
	for _, p := range pts {
		for _, kv := range want {
			if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
				continue next
			}
		}
		n += p.Value
	}
	return n
}

// waitParked waits until n receives are long-polling.
func (o *observed) waitParked(n int64) {
	o.t.Helper()
	if !poll(func() bool { return o.b.s().hub.Parked() == n }) {
		o.t.Fatalf("parked polls = %d, want %d", o.b.s().hub.Parked(), n)
	}
}

// A send continues the caller's trace: produce.Send is a child of the
// caller's span and store.Append a child of produce.Send, with messaging
// attributes and nothing from the body.
func TestObserveSendSpans(t *testing.T) {
	o := newObserved(t, true)
	o.topic("orders", model.TopicNormal)
	ctx, client := o.tp.Tracer("test").Start(context.Background(), "client", trace.WithSpanKind(trace.SpanKindClient))
	res, err := o.b.Send(ctx, "orders", []*model.Message{{Topic: "orders", ID: "m-1", Keys: []string{"secret-key"}, Body: []byte("secret-body")}}, model.Producer{})
	client.End()
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %v", err, res)
	}
	sends, appends := o.ended("produce.Send"), o.ended("store.Append")
	if len(sends) != 1 || len(appends) != 1 {
		t.Fatalf("spans: %d produce.Send, %d store.Append", len(sends), len(appends))
	}
	send, app := sends[0], appends[0]
	if send.Parent().SpanID() != client.SpanContext().SpanID() || send.SpanContext().TraceID() != client.SpanContext().TraceID() {
		t.Fatalf("produce.Send parent %v, want the client span %v", send.Parent(), client.SpanContext())
	}
	if app.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("store.Append parent %v, want produce.Send %v", app.Parent().SpanID(), send.SpanContext().SpanID())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range send.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	for k, want := range map[attribute.Key]string{"messaging.system": "rocketmq", "messaging.destination.name": "orders",
		"messaging.operation.type": "send", "messaging.message.id": "m-1"} {
		if attrs[k].AsString() != want {
			t.Errorf("produce.Send %s = %q, want %q", k, attrs[k].String(), want)
		}
	}
	for _, s := range o.spans.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); v == "secret-body" || v == "secret-key" || v == "[secret-key]" {
				t.Errorf("span %s carries a body or key in %s", s.Name(), kv.Key)
			}
		}
	}

	// A rejected send ends its span with an error and counts its outcome.
	if _, err := o.b.Send(context.Background(), "missing", []*model.Message{{Topic: "missing", ID: "m-2", Body: []byte("x")}}, model.Producer{}); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("send to a missing topic: %v", err)
	}
	m := o.metrics()
	if got := sum(t, m["mqgate.send.outcomes"], attribute.String("mqgate.status", "topic-not-found")); got != 1 {
		t.Errorf("send outcomes topic-not-found = %d, want 1", got)
	}
}

// Without a TracerProvider the broker starts no span at all.
func TestObserveNoTracerNoSpans(t *testing.T) {
	o := newObserved(t, false)
	o.topic("orders", model.TopicNormal)
	o.send("orders", 3, "A")
	if n := len(o.spans.Ended()); n != 0 {
		t.Fatalf("%d spans recorded without a tracer provider", n)
	}
	if got := sum(t, o.metrics()["mqgate.messages.in"]); got != 3 {
		t.Fatalf("messages in = %d, want 3 (metrics do not depend on tracing)", got)
	}
}

// Receive spans carry the wake reason of a long poll; deliveries,
// redeliveries, acks and dead-letter moves are counted per group and
// topic; a drain wakes a parked receive at once with no message.
func TestObserveReceiveAckRedeliveryDLQAndDrain(t *testing.T) {
	o := newObserved(t, true)
	o.topic("orders", model.TopicNormal)
	o.group("billing", 2, false)

	// A parked receive woken by an arrival.
	type result struct {
		ds  []*model.Delivered
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := o.b.Receive(context.Background(), ReceiveRequest{Group: "billing", Topic: "orders", Max: 1, Invisible: 30 * time.Second, Wait: time.Hour, QueueID: -1})
		done <- result{ds, err}
	}()
	o.waitParked(1)
	if got := sum(t, o.metrics()["mqgate.polls.parked"]); got != 1 {
		t.Errorf("parked polls gauge = %d, want 1", got)
	}
	sent := o.send("orders", 1, "A")
	r := <-done
	if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != sent[0] {
		t.Fatalf("woken receive: %v %v", r.err, r.ds)
	}
	if got := sum(t, o.metrics()["mqgate.polls.woken"]); got != 1 {
		t.Errorf("woken polls counter = %d, want 1", got)
	}
	if why := wakeReason(t, o.ended("pop.Receive")); why != pop.WakeArrival {
		t.Fatalf("wake reason %q, want %q", why, pop.WakeArrival)
	}

	// Redelivery: make it visible again and receive attempt 2.
	if _, err := o.b.ChangeInvisible(o.ctx, "billing", "orders", r.ds[0].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	again, err := o.receive("billing", "orders", 1, 30*time.Second)
	if err != nil || len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("redelivery: %v %+v", err, again)
	}
	// Max attempts (2) reached: the next time it is due it goes to the DLQ.
	if _, err := o.b.ChangeInvisible(o.ctx, "billing", "orders", again[0].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	if ds, err := o.receive("billing", "orders", 1, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("after max attempts: %v %v", err, ds)
	}
	// An ack of a message that is gone is counted as what it is.
	second := o.send("orders", 1, "B")
	ds, err := o.receive("billing", "orders", 1, 30*time.Second)
	if err != nil || len(ds) != 1 || ds[0].ID != second[0] {
		t.Fatalf("receive: %v %v", err, ds)
	}
	errs := o.b.Ack(o.ctx, "billing", "orders", []string{ds[0].ReceiptHandle, again[0].ReceiptHandle})
	if errs[0] != nil || mqerr.KindOf(errs[1]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("acks: %v", errs)
	}

	sub := []attribute.KeyValue{attribute.String("messaging.destination.name", "orders"), attribute.String("messaging.consumer.group.name", "billing")}
	m := o.metrics()
	for name, want := range map[string]int64{
		"mqgate.messages.in":            2,
		"mqgate.messages.out":           3, // first delivery, redelivery, the second message
		"mqgate.messages.redelivered":   1,
		"mqgate.messages.dead_lettered": 1,
		"mqgate.consumer.backlog":       0,
		"mqgate.consumer.inflight":      0,
	} {
		attrs := sub
		if name == "mqgate.messages.in" {
			attrs = sub[:1]
		}
		if got := sum(t, m[name], attrs...); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := sum(t, m["mqgate.ack.outcomes"], append(sub, attribute.String("mqgate.status", "ok"))...); got != 1 {
		t.Errorf("ack outcomes ok = %d, want 1", got)
	}
	if got := sum(t, m["mqgate.ack.outcomes"], append(sub, attribute.String("mqgate.status", "invalid-receipt-handle"))...); got != 1 {
		t.Errorf("ack outcomes invalid-receipt-handle = %d, want 1", got)
	}
	if acks := o.ended("pop.Ack"); len(acks) != 1 || acks[0].Status().Code.String() != "Error" {
		t.Errorf("pop.Ack spans: %d (want 1, with the invalid handle as its error)", len(acks))
	}

	// Drain: a parked receive returns at once with no message, and so
	// does a new one even with a message ready.
	go func() {
		ds, err := o.b.Receive(context.Background(), ReceiveRequest{Group: "billing", Topic: "orders", Max: 1, Invisible: 30 * time.Second, Wait: time.Hour, QueueID: -1})
		done <- result{ds, err}
	}()
	o.waitParked(1)
	start := time.Now()
	o.b.Drain()
	select {
	case r := <-done:
		if mqerr.KindOf(r.err) != mqerr.KindMessageNotFound || len(r.ds) != 0 {
			t.Fatalf("drained receive: %v %v", r.err, r.ds)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked receive did not return after Drain")
	}
	t.Logf("parked receive returned %s after Drain", time.Since(start))
	spans := o.ended("pop.Receive")
	if why := wakeReason(t, spans[len(spans)-1:]); why != pop.WakeShutdown {
		t.Fatalf("wake reason %q, want %q", why, pop.WakeShutdown)
	}
	o.send("orders", 1, "C")
	if ds, err := o.receive("billing", "orders", 1, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("receive while draining delivered %v (err %v); acks are refused while draining", ds, err)
	}
}

// wakeReason is the reason of the pop.wake event of the only span in
// spans that has one.
func wakeReason(t *testing.T, spans []sdktrace.ReadOnlySpan) string {
	t.Helper()
	var reasons []string
	for _, s := range spans {
		for _, ev := range s.Events() {
			if ev.Name != "pop.wake" {
				continue
			}
			for _, kv := range ev.Attributes {
				if kv.Key == "mqgate.reason" {
					reasons = append(reasons, kv.Value.AsString())
				}
			}
		}
	}
	if len(reasons) != 1 {
		t.Fatalf("pop.wake events: %v, want exactly one", reasons)
	}
	return reasons[0]
}

// Classic sends and pulls, and the v2 offset API's pulls, are counted like
// gRPC sends and POP receives: messages and bytes in per topic, send
// outcomes, messages and bytes out per group and topic.
func TestObserveClassicSendAndPulls(t *testing.T) {
	o := newObserved(t, false)
	o.topic("orders", model.TopicNormal)
	o.group("g", 0, false)
	c := o.b.Classic()
	recs := []*message.Message{classicRecord("abc", "UNIQ_KEY", "U1"), classicRecord("defg", "UNIQ_KEY", "U2")}
	if _, err := c.SendRecords(o.ctx, ClassicSend{Topic: "orders", QueueID: 0, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendRecords(o.ctx, ClassicSend{Topic: "orders", QueueID: 9, Records: []*message.Message{classicRecord("x", "UNIQ_KEY", "U3")}}); mqerr.KindOf(err) != mqerr.KindBadRequest {
		t.Fatalf("send to queue 9: %v", err)
	}
	if _, w := o.store.LogRange(); o.store.WaitDispatched(o.ctx, w) != nil {
		t.Fatal("dispatch")
	}
	tp, err := o.b.Topic(o.ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Pull(o.ctx, ClassicPullRequest{Group: "g", Topic: tp, QueueID: 0, Offset: 0, Max: 32}); err != nil || len(res.Records) != 2 {
		t.Fatalf("classic pull: %v %+v", err, res)
	}
	if res, err := o.b.Pull(o.ctx, "g", "orders", 0, 1, 32, model.Filter{}, 0); err != nil || len(res.Messages) != 1 {
		t.Fatalf("offset pull: %v %+v", err, res)
	}
	m := o.metrics()
	topic := attribute.String("messaging.destination.name", "orders")
	sub := []attribute.KeyValue{topic, attribute.String("messaging.consumer.group.name", "g")}
	for _, c := range []struct {
		metric string
		attrs  []attribute.KeyValue
		want   int64
	}{
		{"mqgate.messages.in", []attribute.KeyValue{topic}, 2},
		{"mqgate.messages.in.body", []attribute.KeyValue{topic}, 7},
		{"mqgate.send.outcomes", []attribute.KeyValue{topic, attribute.String("mqgate.status", "ok")}, 2},
		{"mqgate.send.outcomes", []attribute.KeyValue{topic, attribute.String("mqgate.status", "bad-request")}, 1},
		{"mqgate.messages.out", sub, 3},
		{"mqgate.messages.out.body", sub, 11},
	} {
		if got := sum(t, m[c.metric], c.attrs...); got != c.want {
			t.Errorf("%s %v = %d, want %d", c.metric, c.attrs, got, c.want)
		}
	}
}

// TestObserverSeriesPerDataGroup: the brokers of a member's data groups
// share one meter provider and each holds some of a topic's queues; each
// reports its sends under its own mqgate.group, so the member's series
// add up to every send instead of one broker's hiding the others'. A
// broker of a single group adds no mqgate.group.
func TestObserverSeriesPerDataGroup(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var obs []*observer
	for g := range 2 {
		o := newObserver(nil, mp, placement.Of{Group: g, Groups: 2})
		o.observe(mp, &Broker{})
		defer o.close()
		o.topic("T").msgs.Add(int64(10 + g))
		obs = append(obs, o)
	}
	single := newObserver(nil, mp, placement.Of{})
	single.observe(mp, &Broker{})
	defer single.close()
	single.topic("U").msgs.Add(5)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var in metricdata.Aggregation
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "mqgate.messages.in" {
				in = m.Data
			}
		}
	}
	topic := attribute.String("messaging.destination.name", "T")
	for g := range 2 {
		if n := sum(t, in, topic, attribute.Int("mqgate.group", g)); n != int64(10+g) {
			t.Errorf("group %d: %d messages in, want %d", g, n, 10+g)
		}
	}
	if n := sum(t, in, topic); n != 21 {
		t.Errorf("topic T: %d messages in over the groups, want 21", n)
	}
	for _, p := range in.(metricdata.Sum[int64]).DataPoints {
		if v, _ := p.Attributes.Value("messaging.destination.name"); v.AsString() == "U" {
			if _, ok := p.Attributes.Value("mqgate.group"); ok || p.Value != 5 {
				t.Errorf("a single group's series: %v = %d, want no mqgate.group and 5", p.Attributes.ToSlice(), p.Value)
			}
		}
	}
}
