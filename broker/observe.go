package broker

import (
	"context"
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
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/stored"
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

	msgsIn, bytesIn, msgsOut, bytesOut metric.Int64Counter
	sendOutcomes, ackOutcomes          metric.Int64Counter
	redelivered, deadLettered          metric.Int64Counter
	reg                                metric.Registration

	pollingFull atomic.Int64

	topics sync.Map // topic → *attrCache
	subs   sync.Map // subKey → *attrCache
}

type subKey struct{ group, topic string }

// attrCache holds the metric options of one topic or (group, topic) pair,
// built once: base (its identifying attributes), ok (base plus
// mqgate.status=ok, the common outcome, read without a lock) and the other
// outcomes, built on first use.
type attrCache struct {
	kvs  []attribute.KeyValue
	set  metric.MeasurementOption // base's one option, also for gauges
	base []metric.AddOption
	ok   []metric.AddOption

	mu       sync.Mutex
	outcomes map[string][]metric.AddOption // status → options
}

func newAttrCache(kvs ...attribute.KeyValue) *attrCache {
	a := &attrCache{kvs: kvs, set: metric.WithAttributeSet(attribute.NewSet(kvs...)), outcomes: map[string][]metric.AddOption{}}
	a.base = []metric.AddOption{a.set}
	a.ok = a.outcome(statusOK)
	return a
}

// outcome is base plus mqgate.status=status.
func (a *attrCache) outcome(status string) []metric.AddOption {
	a.mu.Lock()
	defer a.mu.Unlock()
	opts, ok := a.outcomes[status]
	if !ok {
		kvs := append(a.kvs[:len(a.kvs):len(a.kvs)], keyStatus.String(status))
		opts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
		a.outcomes[status] = opts
	}
	return opts
}

func newObserver(tp trace.TracerProvider, mp metric.MeterProvider) *observer {
	o := &observer{}
	if tp != nil {
		o.tracer = tp.Tracer(scopeName)
	}
	if mp == nil {
		return o
	}
	m := mp.Meter(scopeName)
	// Errors from instrument creation only report invalid names; the
	// instruments returned are usable (no-op) either way.
	o.msgsIn, _ = m.Int64Counter("mqgate.messages.in", metric.WithUnit("{message}"),
		metric.WithDescription("Messages stored from producers, per topic (sends that were accepted, durable or not yet)"))
	o.bytesIn, _ = m.Int64Counter("mqgate.messages.in.body", metric.WithUnit("By"),
		metric.WithDescription("Body bytes of the messages counted by mqgate.messages.in"))
	o.msgsOut, _ = m.Int64Counter("mqgate.messages.out", metric.WithUnit("{message}"),
		metric.WithDescription("Messages delivered to consumers (POP receives), per group and topic, redeliveries included"))
	o.bytesOut, _ = m.Int64Counter("mqgate.messages.out.body", metric.WithUnit("By"),
		metric.WithDescription("Body bytes of the messages counted by mqgate.messages.out"))
	o.sendOutcomes, _ = m.Int64Counter("mqgate.send.outcomes", metric.WithUnit("{message}"),
		metric.WithDescription("Outcome of every sent message by mqgate.status: ok, flush-timeout (stored, not yet durable) or the error kind"))
	o.ackOutcomes, _ = m.Int64Counter("mqgate.ack.outcomes", metric.WithUnit("{message}"),
		metric.WithDescription("Outcome of every acknowledgement by mqgate.status: ok or the error kind"))
	o.redelivered, _ = m.Int64Counter("mqgate.messages.redelivered", metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries with attempt > 1 (the message was not acknowledged in time before)"))
	o.deadLettered, _ = m.Int64Counter("mqgate.messages.dead_lettered", metric.WithUnit("{message}"),
		metric.WithDescription("Messages moved to a group's dead-letter topic (max attempts reached or forwarded by the consumer)"))
	return o
}

// observe registers the callbacks of the broker's gauges (read at each
// collection). Unregistered by Close.
func (o *observer) observe(mp metric.MeterProvider, b *Broker) {
	if mp == nil {
		return
	}
	m := mp.Meter(scopeName)
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
	reg, err := m.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		ob.ObserveInt64(parked, b.hub.Parked())
		for _, st := range b.pop.Stats() {
			t, err := b.meta.GetTopic(ctx, st.Topic)
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
	}, backlog, ready, inflight, held, parked)
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
	v, _ := o.topics.LoadOrStore(name, newAttrCache(attrSystem, semconv.MessagingDestinationName(name)))
	return v.(*attrCache)
}

func (o *observer) sub(group, topic string) *attrCache {
	k := subKey{group, topic}
	if v, ok := o.subs.Load(k); ok {
		return v.(*attrCache)
	}
	v, _ := o.subs.LoadOrStore(k, newAttrCache(attrSystem, semconv.MessagingDestinationName(topic), semconv.MessagingConsumerGroupName(group)))
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
	if o.msgsIn != nil {
		ta := o.topic(topic)
		if err != nil {
			o.sendOutcomes.Add(ctx, int64(len(msgs)), ta.outcome(statusOf(err))...)
		} else {
			var n, ok, bytes int64
			for i, r := range res {
				if r.Err == nil {
					ok++
				} else {
					o.sendOutcomes.Add(ctx, 1, ta.outcome(statusOf(r.Err))...)
				}
				if r.Err == nil || mqerr.KindOf(r.Err) == mqerr.KindFlushTimeout {
					n++ // stored
					if i < len(msgs) {
						bytes += int64(len(msgs[i].Body))
					}
				}
			}
			if ok > 0 {
				o.sendOutcomes.Add(ctx, ok, ta.ok...)
			}
			if n > 0 {
				o.msgsIn.Add(ctx, n, ta.base...)
				o.bytesIn.Add(ctx, bytes, ta.base...)
			}
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
	if o.msgsOut != nil && len(out) > 0 {
		sa := o.sub(req.Group, req.Topic)
		var bytes, again int64
		for _, d := range out {
			bytes += int64(len(d.Body))
			if d.Attempt > 1 {
				again++
			}
		}
		o.msgsOut.Add(ctx, int64(len(out)), sa.base...)
		o.bytesOut.Add(ctx, bytes, sa.base...)
		if again > 0 {
			o.redelivered.Add(ctx, again, sa.base...)
		}
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
	if o.ackOutcomes != nil {
		sa := o.sub(group, topic)
		var ok int64
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				o.ackOutcomes.Add(ctx, 1, sa.outcome(statusOf(err))...)
			}
		}
		if ok > 0 {
			o.ackOutcomes.Add(ctx, ok, sa.ok...)
		}
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
func (o *observer) countDeadLetter(ctx context.Context, m *message.Message) {
	if o.deadLettered == nil {
		return
	}
	group := strings.TrimPrefix(m.Topic, metadata.DLQPrefix)
	topic, _ := m.Get(stored.PropDLQOriginTopic)
	o.deadLettered.Add(ctx, 1, o.sub(group, topic).base...)
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
	if o.deadLettered == nil {
		return s
	}
	return popStore{Store: s, o: o}
}

func (s popStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	res, err := s.Store.Append(ctx, msgs...)
	if err == nil {
		for _, m := range msgs {
			if strings.HasPrefix(m.Topic, metadata.DLQPrefix) {
				s.o.countDeadLetter(ctx, m)
			}
		}
	}
	return res, err
}

// PollingFullRejections counts receives refused because too many were
// already long-polling (TOO_MANY_REQUESTS "polling full").
func (b *Broker) PollingFullRejections() int64 { return b.obs.pollingFull.Load() }
