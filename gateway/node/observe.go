package node

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/gateway/connlimit"
	"github.com/mqgate/mqgate/gateway/peer"
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
	stores, b, tel := n.groupStores(), n.broker, n.tel
	m := tel.Meter(storeScope)
	in := &instruments{m: m}
	gauge, counter := in.gauge, in.counter
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
	in.errs = append(in.errs, err)
	authRefusals, err := tel.Meter(authScope).Int64ObservableCounter("mqgate.auth.refusals", metric.WithUnit("{request}"),
		metric.WithDescription("Calls refused by auth (--auth-file), by mqgate.listener (grpc, REST included, or remoting) and mqgate.reason: authentication (unknown key, bad signature, no credentials) or authorization (not allowed to touch a topic or group)"))
	in.errs = append(in.errs, err)
	connsOpen, err := tel.Meter(connScope).Int64ObservableGauge("mqgate.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Open connections, by mqgate.listener (grpc, http, remoting, metrics, peer)"))
	in.errs = append(in.errs, err)
	connsRefused, err := tel.Meter(connScope).Int64ObservableCounter("mqgate.connections.refused", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections refused over a limit, by mqgate.listener and mqgate.reason: listener_cap (the listener's cap), address_share (the client address's share of it) or descriptors (the connections the descriptor limit leaves once the reserve is kept)"))
	in.errs = append(in.errs, err)
	if err := errors.Join(in.errs...); err != nil {
		return nil, err
	}
	draining := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "draining")))
	pollingFull := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "polling_full")))
	diskFull := metric.WithAttributeSet(attribute.NewSet(attribute.String("mqgate.reason", "disk_full")))
	fromFeed, fromLog := attribute.String("mqgate.source", "feed"), attribute.String("mqgate.source", "log")
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, gs := range stores {
			s, at := gs.st.Stats(), metric.WithAttributeSet(gs.attrs)
			o.ObserveInt64(flushLag, s.FlushLag, at)
			o.ObserveInt64(dispatchLag, s.DispatchLag, at)
			o.ObserveInt64(segments, int64(s.Segments), at)
			o.ObserveInt64(appends, int64(s.Appends), at)
			o.ObserveInt64(appendBytes, int64(s.AppendBytes), at)
			o.ObserveInt64(appendErrors, int64(s.AppendErrors), at)
			o.ObserveInt64(flushTimeouts, int64(s.FlushTimeouts), at)
			o.ObserveInt64(fsyncErrors, int64(s.FsyncErrors), at)
			o.ObserveInt64(dispatched, int64(s.DispatchFed), metric.WithAttributeSet(gs.with(fromFeed)))
			o.ObserveInt64(dispatched, int64(s.DispatchRead), metric.WithAttributeSet(gs.with(fromLog)))
			if sp := gs.st.Space(); sp.Err == nil {
				o.ObserveInt64(diskFree, int64(sp.Free), at)
				o.ObserveInt64(diskReserve, int64(sp.Reserve), at)
				o.ObserveInt64(diskTotal, int64(sp.Total), at)
			}
		}
		return nil
	}, flushLag, dispatchLag, segments, appends, appendBytes, appendErrors, flushTimeouts, fsyncErrors, dispatched, diskFree, diskReserve, diskTotal)
	if err != nil {
		return nil, err
	}
	regAdm, err := tel.Meter(admissionScope).RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(rejections, n.gate.Rejected(), draining)
		o.ObserveInt64(rejections, b.PollingFullRejections(), pollingFull)
		refused := uint64(0)
		for _, gs := range stores {
			refused += gs.st.Space().Refused
		}
		o.ObserveInt64(rejections, int64(refused), diskFull)
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
		Points:      stores.histograms(func(s storage.Stats) storage.Histogram { return s.AppendLatency }),
	})
	removeFsync := tel.AddHistogram(telemetry.HistogramSource{
		Scope: storeScope, Name: "mqgate.store.fsync.duration", Unit: "s",
		Description: "Commit-log fsyncs",
		Points:      stores.histograms(func(s storage.Stats) storage.Histogram { return s.FsyncLatency }),
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

// groupStore is a store this node observes, with the attributes its
// series carry: none on a single node or a cluster of one group,
// mqgate.group with data groups (each group has a store of its own).
type groupStore struct {
	st    *storage.Store
	attrs attribute.Set
}

// with is the store's attributes and kv.
func (gs groupStore) with(kv attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(gs.attrs.ToSlice(), kv)...)
}

type groupStores []groupStore

// groupStores is every store this node holds.
func (n *Node) groupStores() groupStores {
	if !n.multiGroup() {
		return groupStores{{st: n.store}}
	}
	out := make(groupStores, 0, len(n.groups))
	for _, dg := range n.hostedGroups() {
		out = append(out, groupStore{st: dg.rep.Store(), attrs: attribute.NewSet(groupAttr(dg.id))})
	}
	return out
}

// groupAttr names data group g in a series.
func groupAttr(g int) attribute.KeyValue { return attribute.Int("mqgate.group", g) }

// histograms is a Points function: the histogram of of each store.
func (gss groupStores) histograms(of func(storage.Stats) storage.Histogram) func() []telemetry.HistogramPoint {
	return func() []telemetry.HistogramPoint {
		out := make([]telemetry.HistogramPoint, 0, len(gss))
		for _, gs := range gss {
			out = append(out, telemetry.HistogramPoint{Attributes: gs.attrs, Histogram: histogramOf(of(gs.st.Stats()))})
		}
		return out
	}
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
// single node): the peer calls refused, by reason; the committed entries
// applied as no-ops because they did not decode; and for each raft group
// (mqgate.group), read from its status at each collection, who leads,
// the term, how far this member's apply trails the commit, on the leader
// how far each follower's log trails it (mqgate.peer), on a follower
// how long the leader has been silent, and the raft loop's work.
func (n *Node) observeCluster() (metric.Registration, error) {
	if n.raft == nil {
		return nil, nil
	}
	m := n.tel.Meter(clusterScope)
	in := &instruments{m: m}
	gauge, counter := in.gauge, in.counter
	refusals := counter("mqgate.cluster.peer.refusals", "{call}",
		"Calls to the peer address refused, by mqgate.reason: token (no or another peer token), cluster_id (another cluster), "+
			"member (raft messages from no member of the group), certificate (peer TLS: no certificate of the peer CA), size (a request over its limit), method (no such method)")
	undecodable := counter("mqgate.cluster.entries.undecodable", "{entry}", "Committed raft entries that did not decode, applied as no-ops by every member")
	forwarded := counter("mqgate.cluster.forwarded", "{request}",
		"v2 requests this member passed on to the member leading their data group (clients that reached a member not leading the group of what they asked for)")
	leading := gauge("mqgate.cluster.leading", "", "1 while this member leads the raft group (mqgate.group), else 0")
	leader := gauge("mqgate.cluster.leader", "{member}", "The member id of the raft group's leader as this member knows it (0: none known: an election is under way, or this member is cut off)")
	term := gauge("mqgate.cluster.term", "{term}", "The raft group's term on this member")
	applyLag := gauge("mqgate.cluster.apply.lag", "{entry}", "Entries of the raft group committed but not yet applied on this member")
	replLag := gauge("mqgate.cluster.replication.lag", "{entry}", "On the leader: committed entries of the raft group the follower mqgate.peer does not hold yet")
	silence := gauge("mqgate.cluster.leader.silence", "ms", "On a follower: time since it last heard from the raft group's leader")
	rounds := counter("mqgate.cluster.raft.rounds", "{round}", "Rounds of the raft group's loop (each handles what raft has ready)")
	syncs := counter("mqgate.cluster.raft.log.syncs", "{fsync}", "Fsyncs of the raft group's log")
	applied := counter("mqgate.cluster.raft.entries.applied", "{entry}", "Committed entries the raft group handed to its state machine on this member")
	proposals := counter("mqgate.cluster.raft.proposals", "{entry}", "Entries this member proposed to the raft group as its leader")
	messages := counter("mqgate.cluster.raft.messages", "{message}", "Raft messages of the group, by mqgate.direction: sent or received")
	if err := errors.Join(in.errs...); err != nil {
		return nil, err
	}
	raft, rep, groups := n.raft, n.rep, n.raftGroups()
	sent, received := attribute.String("mqgate.direction", "sent"), attribute.String("mqgate.direction", "received")
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for reason, c := range raft.Refusals() {
			o.ObserveInt64(refusals, int64(c), metric.WithAttributes(attribute.String("mqgate.reason", reason)))
		}
		o.ObserveInt64(undecodable, int64(rep.Undecodable()))
		if svc := n.v2.Load(); svc != nil {
			o.ObserveInt64(forwarded, svc.Forwarded())
		}
		for g, rn := range groups {
			if rn == nil {
				continue // a group on other members only
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := rn.Status(sctx)
			cancel()
			if err != nil {
				continue // stopped, or its loop is busy: no figure rather than a stale one
			}
			ga := groupAttr(g)
			at := metric.WithAttributes(ga)
			lead := int64(0)
			if st.Leader == st.ID {
				lead = 1
			}
			o.ObserveInt64(leading, lead, at)
			o.ObserveInt64(leader, int64(st.Leader), at)
			o.ObserveInt64(term, int64(st.Term), at)
			o.ObserveInt64(applyLag, int64(st.Commit-min(st.Applied, st.Commit)), at)
			for id, pr := range st.Progress {
				if id != st.ID {
					o.ObserveInt64(replLag, int64(st.Commit-min(pr.Match, st.Commit)), metric.WithAttributes(ga, attribute.Int64("mqgate.peer", int64(id))))
				}
			}
			if heard, ok := st.LastContact[st.Leader]; ok && st.Leader != st.ID {
				o.ObserveInt64(silence, time.Since(heard).Milliseconds(), at)
			}
			o.ObserveInt64(rounds, int64(st.Work.Rounds), at)
			o.ObserveInt64(syncs, int64(st.Work.LogSyncs), at)
			o.ObserveInt64(applied, int64(st.Work.EntriesApplied), at)
			o.ObserveInt64(proposals, int64(st.Work.Proposals), at)
			o.ObserveInt64(messages, int64(st.Work.MessagesSent), metric.WithAttributes(ga, sent))
			o.ObserveInt64(messages, int64(st.Work.MessagesReceived), metric.WithAttributes(ga, received))
		}
		return nil
	}, refusals, undecodable, forwarded, leading, leader, term, applyLag, replLag, silence, rounds, syncs, applied, proposals, messages)
}

// raftGroups is this member's raft member of each group, by group (nil:
// a group it does not host).
func (n *Node) raftGroups() []*peer.Node {
	if !n.multiGroup() {
		return []*peer.Node{n.raft}
	}
	out := make([]*peer.Node, len(n.groups))
	for i, dg := range n.groups {
		if dg.hosted() {
			out[i] = dg.raft
		}
	}
	return out
}

// instruments makes the observable instruments of one meter, keeping
// their errors (invalid names) for the caller to check once.
type instruments struct {
	m    metric.Meter
	errs []error
}

func (in *instruments) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := in.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.errs = append(in.errs, err)
	return g
}

func (in *instruments) counter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := in.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.errs = append(in.errs, err)
	return c
}
