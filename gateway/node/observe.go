package node

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/gateway/connlimit"
	"github.com/mqgate/mqgate/internal/telemetry"
	"github.com/mqgate/mqgate/storage"
)

// This file wires the metrics of the parts that must not import
// OpenTelemetry themselves: the store (storage keeps its own counters and
// latency histograms, read here at each collection), the admission gate,
// the connection limits and auth's refusal counts. The broker records its own
// (broker/observe.go).

const (
	storeScope     = "github.com/mqgate/mqgate/storage"
	admissionScope = "github.com/mqgate/mqgate/gateway/admission"
	authScope      = "github.com/mqgate/mqgate/gateway/auth"
	clusterScope   = "github.com/mqgate/mqgate/gateway/peer"
	connScope      = "github.com/mqgate/mqgate/gateway/connlimit"
)

// brokerTracers is what the broker gets for spans: nil unless spans are
// exported, so an unobserved hot path does not even start no-op spans.
func (n *Node) brokerTracers() trace.TracerProvider {
	if n.tel == nil || !n.tel.Tracing {
		return nil
	}
	return n.tel.Tracers
}

// observe registers the store's and the gate's metrics (the broker's
// polling-full rejections among the gate's) and, in cluster mode, the
// raft member's (observeCluster); the returned function
// removes them (called before the broker and the store close).
func (n *Node) observe() (remove func(), err error) {
	st, b, tel := n.store, n.broker, n.tel
	m := tel.Meter(storeScope)
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	flushLag := gauge("mqgate.store.flush.lag", "By", "Bytes written to the commit log but not yet fsynced (written − durable)")
	dispatchLag := gauge("mqgate.store.dispatch.lag", "By", "Bytes written to the commit log but not yet visible in consume queues")
	segments := gauge("mqgate.store.segments", "{segment}", "Commit-log segment files")
	appends := counter("mqgate.store.appends", "{record}", "Records appended to the commit log (messages and mqgate's own records)")
	appendBytes := counter("mqgate.store.append.size", "By", "Bytes appended to the commit log")
	appendErrors := counter("mqgate.store.append.errors", "{call}", "Append calls that failed (nothing stored)")
	flushTimeouts := counter("mqgate.store.flush.timeouts", "{call}", "Sync-mode appends answered before their fsync finished (stored, not yet durable)")
	fsyncErrors := counter("mqgate.store.fsync.errors", "{fsync}", "Failed commit-log fsyncs")
	diskFree := gauge("mqgate.store.disk.free", "By", "Free space the store can still write on its data disk (the file system's, plus blocks the commit log holds reserved ahead)")
	diskReserve := gauge("mqgate.store.disk.reserve", "By", "The disk reserve (--disk-reserve): new messages are refused while mqgate.store.disk.free is below it")
	diskTotal := gauge("mqgate.store.disk.size", "By", "Size of the file system holding the data directory")
	dispatched := counter("mqgate.store.dispatched", "{record}", "Records the dispatcher put into consume queues and the index, by mqgate.source: feed (described by the writer as it wrote them) or log (read back from the commit log: replay after a restart, or while the writer's feed was full)")
	rejections, err := tel.Meter(admissionScope).Int64ObservableCounter("mqgate.admission.rejections", metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused by admission, by mqgate.reason: draining (shutting down: nothing was done), polling_full (too many parked receives) or disk_full (a send while the data disk is below its reserve: nothing was stored)"))
	errs = append(errs, err)
	authRefusals, err := tel.Meter(authScope).Int64ObservableCounter("mqgate.auth.refusals", metric.WithUnit("{request}"),
		metric.WithDescription("Calls refused by auth (--auth-file), by mqgate.listener (grpc, REST included, or remoting) and mqgate.reason: authentication (unknown key, bad signature, no credentials) or authorization (not allowed to touch a topic or group)"))
	errs = append(errs, err)
	connsOpen, err := tel.Meter(connScope).Int64ObservableGauge("mqgate.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Open connections, by mqgate.listener (grpc, http, remoting, metrics, peer)"))
	errs = append(errs, err)
	connsRefused, err := tel.Meter(connScope).Int64ObservableCounter("mqgate.connections.refused", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections refused over a limit, by mqgate.listener and mqgate.reason: listener_cap (the listener's cap), address_share (the client address's share of it) or descriptors (the connections the descriptor limit leaves once the reserve is kept)"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	draining := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "draining")))
	pollingFull := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "polling_full")))
	diskFull := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "disk_full")))
	fromFeed := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.source", "feed")))
	fromLog := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.source", "log")))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := st.Stats()
		o.ObserveInt64(flushLag, s.FlushLag)
		o.ObserveInt64(dispatchLag, s.DispatchLag)
		o.ObserveInt64(segments, int64(s.Segments))
		o.ObserveInt64(appends, int64(s.Appends))
		o.ObserveInt64(appendBytes, int64(s.AppendBytes))
		o.ObserveInt64(appendErrors, int64(s.AppendErrors))
		o.ObserveInt64(flushTimeouts, int64(s.FlushTimeouts))
		o.ObserveInt64(fsyncErrors, int64(s.FsyncErrors))
		o.ObserveInt64(dispatched, int64(s.DispatchFed), fromFeed)
		o.ObserveInt64(dispatched, int64(s.DispatchRead), fromLog)
		if sp := st.Space(); sp.Err == nil {
			o.ObserveInt64(diskFree, int64(sp.Free))
			o.ObserveInt64(diskReserve, int64(sp.Reserve))
			o.ObserveInt64(diskTotal, int64(sp.Total))
		}
		return nil
	}, flushLag, dispatchLag, segments, appends, appendBytes, appendErrors, flushTimeouts, fsyncErrors, dispatched, diskFree, diskReserve, diskTotal)
	if err != nil {
		return nil, err
	}
	regAdm, err := tel.Meter(admissionScope).RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(rejections, n.gate.Rejected(), draining)
		o.ObserveInt64(rejections, b.PollingFullRejections(), pollingFull)
		o.ObserveInt64(rejections, int64(st.Space().Refused), diskFull)
		return nil
	}, rejections)
	if err != nil {
		_ = reg.Unregister()
		return nil, err
	}
	regConns, err := tel.Meter(connScope).RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for name, l := range n.limited {
			o.ObserveInt64(connsOpen, l.Open(), metric.WithAttributes(attribute.String("mqgate.listener", name)))
			for _, reason := range []string{connlimit.ReasonCap, connlimit.ReasonAddress, connlimit.ReasonFDs} {
				o.ObserveInt64(connsRefused, l.Refused(reason), metric.WithAttributes(
					attribute.String("mqgate.listener", name), attribute.String("mqgate.reason", reason)))
			}
		}
		return nil
	}, connsOpen, connsRefused)
	if err != nil {
		_ = reg.Unregister()
		_ = regAdm.Unregister()
		return nil, err
	}
	regCluster, err := n.observeCluster()
	if err != nil {
		_ = reg.Unregister()
		_ = regAdm.Unregister()
		_ = regConns.Unregister()
		return nil, err
	}
	regAuth := metric.Registration(nil)
	if n.auth != nil {
		regAuth, err = tel.Meter(authScope).RegisterCallback(func(_ context.Context, o metric.Observer) error {
			for _, r := range n.auth.RefusalCounts() {
				o.ObserveInt64(authRefusals, int64(r.Count), metric.WithAttributes(
					attribute.String("mqgate.listener", r.Listener), attribute.String("mqgate.reason", r.Reason)))
			}
			return nil
		}, authRefusals)
		if err != nil {
			_ = reg.Unregister()
			_ = regAdm.Unregister()
			_ = regConns.Unregister()
			if regCluster != nil {
				_ = regCluster.Unregister()
			}
			return nil, err
		}
	}
	// Last: adding a histogram cannot fail, so no error path undoes it.
	removeAppend := tel.AddHistogram(telemetry.HistogramSource{
		Scope: storeScope, Name: "mqgate.store.append.duration", Unit: "s",
		Description: "Store Append calls, from the call to the answer (including the fsync wait with --flush sync)",
		Snapshot:    func() telemetry.Histogram { return histogramOf(st.Stats().AppendLatency) },
	})
	removeFsync := tel.AddHistogram(telemetry.HistogramSource{
		Scope: storeScope, Name: "mqgate.store.fsync.duration", Unit: "s",
		Description: "Commit-log fsyncs",
		Snapshot:    func() telemetry.Histogram { return histogramOf(st.Stats().FsyncLatency) },
	})
	return func() {
		_ = reg.Unregister()
		_ = regAdm.Unregister()
		_ = regConns.Unregister()
		if regAuth != nil {
			_ = regAuth.Unregister()
		}
		if regCluster != nil {
			_ = regCluster.Unregister()
		}
		removeAppend()
		removeFsync()
	}, nil
}

// histogramOf converts the store's power-of-two microsecond histogram to
// seconds.
func histogramOf(h storage.Histogram) telemetry.Histogram {
	out := telemetry.Histogram{Bounds: make([]float64, len(h.UpperBounds)), Counts: h.Counts, Count: h.Count, Sum: h.Sum.Seconds()}
	for i, b := range h.UpperBounds {
		out.Bounds[i] = b.Seconds()
	}
	return out
}

// observeCluster registers the cluster member's metrics (none for a
// single node): the peer calls refused, by reason, and the committed
// entries applied as no-ops because they did not decode.
func (n *Node) observeCluster() (metric.Registration, error) {
	if n.raft == nil {
		return nil, nil
	}
	m := n.tel.Meter(clusterScope)
	refusals, err := m.Int64ObservableCounter("mqgate.cluster.peer.refusals", metric.WithUnit("{call}"),
		metric.WithDescription("Calls to the peer address refused, by mqgate.reason: token (no or another peer token), cluster_id (another cluster), "+
			"member (raft messages from no member of the group), certificate (peer TLS: no certificate of the peer CA), size (a request over its limit), method (no such method)"))
	if err != nil {
		return nil, err
	}
	undecodable, err := m.Int64ObservableCounter("mqgate.cluster.entries.undecodable", metric.WithUnit("{entry}"),
		metric.WithDescription("Committed raft entries that did not decode, applied as no-ops by every member"))
	if err != nil {
		return nil, err
	}
	raft, rep := n.raft, n.rep
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for reason, c := range raft.Refusals() {
			o.ObserveInt64(refusals, int64(c), metric.WithAttributes(attribute.String("mqgate.reason", reason)))
		}
		o.ObserveInt64(undecodable, int64(rep.Undecodable()))
		return nil
	}, refusals, undecodable)
}
