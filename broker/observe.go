package broker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// This file is the broker's OpenTelemetry side: spans for send
// (produce.Send → store.Append), receive (pop.Receive, whose wake reason
// pop adds as an event) and ack (pop.Ack), and the broker's metrics.
// Attributes follow the messaging semantic conventions; bodies, keys and
// credentials never appear, and client or message ids never label a
// metric (a single message's id is a span attribute only).
//
// Cost when nobody looks: with no TracerProvider (Config.Tracers nil) no
// span is started at all; attributes are built only for recording spans;
// metric attribute sets are computed once per topic/group and cached.
//
// The counters are observable: a send, receive or ack adds to atomic
// integers of its topic's or (group, topic)'s cache, and the collection
// callback reports them. A synchronous OpenTelemetry counter costs each
// Add an attribute-set lookup and the SDK's exemplar filter (together 2 %
// of the server's CPU per send, three Adds a send); an atomic add costs
// nothing measurable. The series are the same cumulative sums, and one
// appears at its first count, as before.

// Instrumentation scope of the broker's spans and metrics.
const scopeName = "github.com/mqgate/mqgate/broker"

// Status attribute values besides the mqerr kind names.
const (
	statusOK           = "ok"
	statusFlushTimeout = "flush-timeout"
)

var (
	attrSystem = semconv.MessagingSystemRocketMQ
	// mqgate.status: "ok", "flush-timeout" (stored, not yet durable) or
	// the mqerr kind of a failure ("topic-not-found", ...).
	keyStatus = attribute.Key("mqgate.status")
)

type observer struct {
	tracer trace.Tracer // nil: no spans

	counting bool // a MeterProvider was given: the counters below are read
	reg      metric.Registration

	pollingFull atomic.Int64

	topics sync.Map // topic → *attrCache
	subs   sync.Map // subKey → *attrCache

	// base starts every series' attributes: the messaging system, and
	// with data groups the broker's group (mqgate.group), so that the
	// brokers of one member, each holding some of a topic's queues,
	// report series of their own instead of one hiding the others.
	base []attribute.KeyValue
	// gauges is base as a measurement option, for the unlabelled gauges.
	gauges metric.MeasurementOption
}

type subKey struct{ group, topic string }

// attrCache holds one topic's or (group, topic) pair's counters and their
// attribute sets, built once: set (the identifying attributes), okSet (set
// plus mqgate.status=ok, the common outcome, counted without a lock) and
// the other outcomes, built on first use.
//
// A topic's cache counts sends: msgs and bytes stored (mqgate.messages.in
// and .in.body), ok and outcomes (mqgate.send.outcomes). A pair's counts
// deliveries (mqgate.messages.out and .out.body), redelivered,
// deadLettered, and acks in ok and outcomes (mqgate.ack.outcomes).
type attrCache struct {
	kvs   []attribute.KeyValue
	set   metric.MeasurementOption // also for gauges
	okSet metric.MeasurementOption

	msgs, bytes, ok           atomic.Int64
	redelivered, deadLettered atomic.Int64

	mu       sync.Mutex
	outcomes map[string]*outcomeCount // status (not ok) → its count
}

type outcomeCount struct {
	set metric.MeasurementOption
	n   atomic.Int64
}

func newAttrCache(kvs ...attribute.KeyValue) *attrCache {
	return &attrCache{kvs: kvs, set: metric.WithAttributeSet(attribute.NewSet(kvs...)),
		okSet: withStatus(kvs, statusOK), outcomes: map[string]*outcomeCount{}}
}

func withStatus(kvs []attribute.KeyValue, status string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(kvs[:len(kvs):len(kvs)], keyStatus.String(status))...))
}

// outcome counts n outcomes of status (not ok).
func (a *attrCache) outcome(status string, n int64) {
	a.mu.Lock()
	c, ok := a.outcomes[status]
	if !ok {
		c = &outcomeCount{set: withStatus(a.kvs, status)}
		a.outcomes[status] = c
	}
	a.mu.Unlock()
	c.n.Add(n)
}

// observeOutcomes reports ok and the other outcomes to inst.
func (a *attrCache) observeOutcomes(ob metric.Observer, inst metric.Int64Observable) {
	if n := a.ok.Load(); n > 0 {
		ob.ObserveInt64(inst, n, a.okSet)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.outcomes {
		ob.ObserveInt64(inst, c.n.Load(), c.set)
	}
}

// observeNonZero reports v unless nothing was counted yet (a series
// appears at its first count).
func observeNonZero(ob metric.Observer, inst metric.Int64Observable, v int64, set metric.MeasurementOption) {
	if v > 0 {
		ob.ObserveInt64(inst, v, set)
	}
}

func newObserver(tp trace.TracerProvider, mp metric.MeterProvider, pl placement.Of) *observer {
	o := &observer{counting: mp != nil, base: []attribute.KeyValue{attrSystem}}
	if pl.Groups > 1 {
		o.base = append(o.base, attribute.Int("mqgate.group", pl.Group))
	}
	o.gauges = metric.WithAttributeSet(attribute.NewSet(o.base[1:]...))
	if tp != nil {
		o.tracer = tp.Tracer(scopeName)
	}
	return o
}

// observe creates the broker's instruments and registers the callback that
// reads the counters and the gauges at each collection. Unregistered by
// Close.
func (o *observer) observe(mp metric.MeterProvider, b *Broker) {
	if mp == nil {
		return
	}
	m := mp.Meter(scopeName)
	// Errors from instrument creation only report invalid names; the
	// instruments returned are usable (no-op) either way.
	msgsIn, _ := m.Int64ObservableCounter("mqgate.messages.in", metric.WithUnit("{message}"),
		metric.WithDescription("Messages stored from producers, per topic (sends that were accepted, durable or not yet)"))
	bytesIn, _ := m.Int64ObservableCounter("mqgate.messages.in.body", metric.WithUnit("By"),
		metric.WithDescription("Body bytes of the messages counted by mqgate.messages.in"))
	msgsOut, _ := m.Int64ObservableCounter("mqgate.messages.out", metric.WithUnit("{message}"),
		metric.WithDescription("Messages delivered to consumers (POP receives and pulls), per group and topic, redeliveries included"))
	bytesOut, _ := m.Int64ObservableCounter("mqgate.messages.out.body", metric.WithUnit("By"),
		metric.WithDescription("Body bytes of the messages counted by mqgate.messages.out"))
	sendOutcomes, _ := m.Int64ObservableCounter("mqgate.send.outcomes", metric.WithUnit("{message}"),
		metric.WithDescription("Outcome of every sent message by mqgate.status: ok, flush-timeout (stored, not yet durable) or the error kind"))
	ackOutcomes, _ := m.Int64ObservableCounter("mqgate.ack.outcomes", metric.WithUnit("{message}"),
		metric.WithDescription("Outcome of every acknowledgement by mqgate.status: ok or the error kind"))
	redelivered, _ := m.Int64ObservableCounter("mqgate.messages.redelivered", metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries with attempt > 1 (the message was not acknowledged in time before)"))
	deadLettered, _ := m.Int64ObservableCounter("mqgate.messages.dead_lettered", metric.WithUnit("{message}"),
		metric.WithDescription("Messages moved to a group's dead-letter topic (max attempts reached or forwarded by the consumer)"))
	backlog, _ := m.Int64ObservableGauge("mqgate.consumer.backlog", metric.WithUnit("{message}"),
		metric.WithDescription("Messages of the topic the group has not acknowledged: ready + in flight + held"))
	ready, _ := m.Int64ObservableGauge("mqgate.consumer.ready", metric.WithUnit("{message}"),
		metric.WithDescription("Messages never delivered to the group yet"))
	inflight, _ := m.Int64ObservableGauge("mqgate.consumer.inflight", metric.WithUnit("{message}"),
		metric.WithDescription("Delivered, not acknowledged (invisible, or due for redelivery)"))
	held, _ := m.Int64ObservableGauge("mqgate.consumer.held", metric.WithUnit("{message}"),
		metric.WithDescription("FIFO messages read but waiting behind their message group"))
	parked, _ := m.Int64ObservableGauge("mqgate.polls.parked", metric.WithUnit("{request}"),
		metric.WithDescription("Receives and pulls long-polling right now"))
	woken, _ := m.Int64ObservableCounter("mqgate.polls.woken", metric.WithUnit("{request}"),
		metric.WithDescription("Parked receives and pulls woken to look again: by an arrival or a message becoming visible (one receive per group and filter), or by a receive that took messages and passed the wake on"))
	reg, err := m.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		o.topics.Range(func(_, v any) bool {
			a := v.(*attrCache)
			observeNonZero(ob, msgsIn, a.msgs.Load(), a.set)
			observeNonZero(ob, bytesIn, a.bytes.Load(), a.set)
			a.observeOutcomes(ob, sendOutcomes)
			return true
		})
		o.subs.Range(func(_, v any) bool {
			a := v.(*attrCache)
			observeNonZero(ob, msgsOut, a.msgs.Load(), a.set)
			observeNonZero(ob, bytesOut, a.bytes.Load(), a.set)
			observeNonZero(ob, redelivered, a.redelivered.Load(), a.set)
			observeNonZero(ob, deadLettered, a.deadLettered.Load(), a.set)
			a.observeOutcomes(ob, ackOutcomes)
			return true
		})
		sv := b.s()
		if !b.Active() || sv == nil {
			return nil // a standby member: its services do not run
		}
		ob.ObserveInt64(parked, sv.hub.Parked(), o.gauges)
		ob.ObserveInt64(woken, sv.hub.Woken(), o.gauges)
		for _, st := range sv.pop.Stats() {
			t, err := sv.meta.GetTopic(ctx, st.Topic)
			if err != nil {
				continue // deleted since
			}
			p := b.progress(t, st.Group, st.Next, st.InFlight, st.Held)
			opt := o.sub(st.Group, st.Topic).set
			ob.ObserveInt64(backlog, p.Backlog, opt)
			ob.ObserveInt64(ready, p.Ready, opt)
			ob.ObserveInt64(inflight, p.InFlight, opt)
			ob.ObserveInt64(held, p.Held, opt)
		}
		return nil
	}, msgsIn, bytesIn, msgsOut, bytesOut, sendOutcomes, ackOutcomes, redelivered, deadLettered,
		backlog, ready, inflight, held, parked, woken)
	if err == nil {
		o.reg = reg
	}
}

func (o *observer) close() {
	if o.reg != nil {
		_ = o.reg.Unregister()
	}
}

func (o *observer) topic(name string) *attrCache {
	if v, ok := o.topics.Load(name); ok {
		return v.(*attrCache)
	}
	v, _ := o.topics.LoadOrStore(name, newAttrCache(append(slices.Clip(o.base), semconv.MessagingDestinationName(name))...))
	return v.(*attrCache)
}

func (o *observer) sub(group, topic string) *attrCache {
	k := subKey{group, topic}
	if v, ok := o.subs.Load(k); ok {
		return v.(*attrCache)
	}
	v, _ := o.subs.LoadOrStore(k, newAttrCache(append(slices.Clip(o.base), semconv.MessagingDestinationName(topic), semconv.MessagingConsumerGroupName(group))...))
	return v.(*attrCache)
}

func statusOf(err error) string {
	switch k := mqerr.KindOf(err); {
	case err == nil:
		return statusOK
	case k == mqerr.KindFlushTimeout:
		return statusFlushTimeout
	default:
		return k.String()
	}
}

// start begins a span when tracing is on; sp is nil otherwise.
func (o *observer) start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if o.tracer == nil {
		return ctx, nil
	}
	ctx, sp := o.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	if !sp.IsRecording() {
		sp.End()
		return ctx, nil
	}
	return ctx, sp
}

func endSpan(sp trace.Span, err error) {
	if err != nil {
		sp.SetAttributes(semconv.ErrorTypeKey.String(mqerr.KindOf(err).String()))
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// startSend begins produce.Send.
func (o *observer) startSend(ctx context.Context, topic string, msgs []*model.Message) (context.Context, trace.Span) {
	ctx, sp := o.start(ctx, "produce.Send", trace.SpanKindInternal)
	if sp != nil {
		sp.SetAttributes(attrSystem, semconv.MessagingDestinationName(topic), semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"))
		if len(msgs) == 1 {
			sp.SetAttributes(semconv.MessagingMessageID(msgs[0].ID), semconv.MessagingMessageBodySize(len(msgs[0].Body)))
		} else {
			sp.SetAttributes(semconv.MessagingBatchMessageCount(len(msgs)))
		}
	}
	return ctx, sp
}

// sent counts a send's outcome per message and ends its span.
func (o *observer) sent(ctx context.Context, sp trace.Span, topic string, msgs []*model.Message, res []model.SendResult, err error) {
	if o.counting {
		ta := o.topic(topic)
		if err != nil {
			ta.outcome(statusOf(err), int64(len(msgs)))
		} else {
			var n, ok, bytes int64
			for i, r := range res {
				if r.Err == nil {
					ok++
				} else {
					ta.outcome(statusOf(r.Err), 1)
				}
				if r.Err == nil || mqerr.KindOf(r.Err) == mqerr.KindFlushTimeout {
					n++ // stored
					if i < len(msgs) {
						bytes += int64(len(msgs[i].Body))
					}
				}
			}
			ta.ok.Add(ok)
			ta.msgs.Add(n)
			ta.bytes.Add(bytes)
		}
	}
	if sp != nil {
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err // the span shows the first failure
					break
				}
			}
		}
		endSpan(sp, err)
	}
}

// sentClassic counts a classic send (remoting) like sent counts a gRPC
// one: its records stored, or its failure.
func (o *observer) sentClassic(topic string, recs []*message.Message, err error) {
	if !o.counting || topic == "" {
		return
	}
	ta := o.topic(topic)
	n := int64(len(recs))
	switch {
	case err == nil:
		ta.ok.Add(n)
	case mqerr.KindOf(err) == mqerr.KindFlushTimeout:
		ta.outcome(statusOf(err), n) // stored, not yet durable: counted in too
	default:
		ta.outcome(statusOf(err), n)
		return
	}
	var bytes int64
	for _, r := range recs {
		bytes += int64(len(r.Body))
	}
	ta.msgs.Add(n)
	ta.bytes.Add(bytes)
}

// pulled counts messages handed to a group by a pull (classic pulls and
// the v2 offset API) as deliveries.
func (o *observer) pulled(group, topic string, recs []*message.Message) {
	countPulled(o, group, topic, recs, func(r *message.Message) []byte { return r.Body })
}

// pulledDelivered is pulled for the v2 offset API's messages.
func (o *observer) pulledDelivered(group, topic string, ds []*model.Delivered) {
	countPulled(o, group, topic, ds, func(d *model.Delivered) []byte { return d.Body })
}

func countPulled[T any](o *observer, group, topic string, xs []T, body func(T) []byte) {
	if !o.counting || group == "" || len(xs) == 0 {
		return
	}
	var bytes int64
	for _, x := range xs {
		bytes += int64(len(body(x)))
	}
	sa := o.sub(group, topic)
	sa.msgs.Add(int64(len(xs)))
	sa.bytes.Add(bytes)
}

// delivered calls fn with the messages delivered so far to each group
// from each topic (every consumption path: POP receives, pulls). Zero
// without a MeterProvider (nothing counted).
func (o *observer) delivered(fn func(group, topic string, n int64)) {
	o.subs.Range(func(k, v any) bool {
		sk := k.(subKey)
		fn(sk.group, sk.topic, v.(*attrCache).msgs.Load())
		return true
	})
}

// totals sums the messages stored and delivered, over every topic and
// subscription.
func (o *observer) totals() (put, get int64) {
	o.topics.Range(func(_, v any) bool {
		put += v.(*attrCache).msgs.Load()
		return true
	})
	o.delivered(func(_, _ string, n int64) { get += n })
	return put, get
}

// startReceive begins pop.Receive.
func (o *observer) startReceive(ctx context.Context, req ReceiveRequest) (context.Context, trace.Span) {
	ctx, sp := o.start(ctx, "pop.Receive", trace.SpanKindInternal)
	if sp != nil {
		sp.SetAttributes(attrSystem, semconv.MessagingDestinationName(req.Topic), semconv.MessagingConsumerGroupName(req.Group),
			semconv.MessagingOperationTypeReceive, semconv.MessagingOperationName("receive"))
	}
	return ctx, sp
}

// received counts deliveries and ends the span.
func (o *observer) received(ctx context.Context, sp trace.Span, req ReceiveRequest, out []*model.Delivered, err error) {
	if err != nil && mqerr.KindOf(err) == mqerr.KindTooManyRequests {
		o.pollingFull.Add(1)
	}
	if o.counting && len(out) > 0 {
		sa := o.sub(req.Group, req.Topic)
		var bytes, again int64
		for _, d := range out {
			bytes += int64(len(d.Body))
			if d.Attempt > 1 {
				again++
			}
		}
		sa.msgs.Add(int64(len(out)))
		sa.bytes.Add(bytes)
		sa.redelivered.Add(again)
	}
	if sp != nil {
		sp.SetAttributes(semconv.MessagingBatchMessageCount(len(out)))
		if mqerr.KindOf(err) == mqerr.KindMessageNotFound {
			err = nil // an empty poll is not a failure
		}
		endSpan(sp, err)
	}
}

// startAck begins pop.Ack.
func (o *observer) startAck(ctx context.Context, group, topic string, n int) (context.Context, trace.Span) {
	ctx, sp := o.start(ctx, "pop.Ack", trace.SpanKindInternal)
	if sp != nil {
		sp.SetAttributes(attrSystem, semconv.MessagingDestinationName(topic), semconv.MessagingConsumerGroupName(group),
			semconv.MessagingOperationTypeSettle, semconv.MessagingOperationName("ack"), semconv.MessagingBatchMessageCount(n))
	}
	return ctx, sp
}

// acked counts ack outcomes and ends the span.
func (o *observer) acked(ctx context.Context, sp trace.Span, group, topic string, errs []error) {
	if o.counting {
		sa := o.sub(group, topic)
		var ok int64
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				sa.outcome(statusOf(err), 1)
			}
		}
		sa.ok.Add(ok)
	}
	if sp != nil {
		var first error // the span shows the first failure
		for _, err := range errs {
			if err != nil {
				first = err
				break
			}
		}
		endSpan(sp, first)
	}
}

// countDeadLetter counts a DLQ move seen on its way to the store.
func (o *observer) countDeadLetter(m *message.Message) {
	group := strings.TrimPrefix(m.Topic, metadata.DLQPrefix)
	topic, _ := m.Get(record.PropDLQOriginTopic)
	o.sub(group, topic).deadLettered.Add(1)
}

// tracedAppender wraps the store's append for producers: a store.Append
// span (child of produce.Send) when tracing is on, nothing otherwise.
type tracedAppender struct {
	produce.Appender
	o *observer
}

func (o *observer) appender(a produce.Appender) produce.Appender {
	if o.tracer == nil {
		return a
	}
	return tracedAppender{Appender: a, o: o}
}

func (t tracedAppender) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	ctx, sp := t.o.start(ctx, "store.Append", trace.SpanKindInternal)
	res, err := t.Appender.Append(ctx, msgs...)
	if sp != nil {
		sp.SetAttributes(semconv.MessagingBatchMessageCount(len(msgs)),
			keyStatus.String(res.Status.String()), attribute.String("mqgate.durability", res.Durability.String()))
		if err != nil {
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
	return res, err
}

// popStore is the store as pop sees it, counting DLQ moves (pop appends a
// message to %DLQ%<group> exactly when it moves one there).
type popStore struct {
	pop.Store
	o *observer
}

func (o *observer) popStore(s pop.Store) pop.Store {
	if !o.counting {
		return s
	}
	return popStore{Store: s, o: o}
}

func (s popStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	res, err := s.Store.Append(ctx, msgs...)
	if err == nil {
		for _, m := range msgs {
			if strings.HasPrefix(m.Topic, metadata.DLQPrefix) {
				s.o.countDeadLetter(m)
			}
		}
	}
	return res, err
}

// PollingFullRejections counts receives refused because too many were
// already long-polling (TOO_MANY_REQUESTS "polling full").
func (b *Broker) PollingFullRejections() int64 { return b.obs.pollingFull.Load() }
