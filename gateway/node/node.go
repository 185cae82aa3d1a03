package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/admin"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/connlimit"
	"github.com/mqgate/mqgate/gateway/console"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/httpserver"
	"github.com/mqgate/mqgate/gateway/mcpserver"
	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/gateway/relay"
	"github.com/mqgate/mqgate/gateway/remoting"
	"github.com/mqgate/mqgate/gateway/restmessaging"
	"github.com/mqgate/mqgate/gateway/session"
	"github.com/mqgate/mqgate/gateway/v2service"
	"github.com/mqgate/mqgate/internal/buildinfo"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/internal/telemetry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Options are the non-configuration inputs of Open.
type Options struct {
	Logger *slog.Logger
	// Build is the running build (its version, revision, dirty flag),
	// for the telemetry resource, /metrics and the MCP server.
	Build buildinfo.Info
	// HangOnStop names a component whose Stop blocks until the deadline.
	// It exists only so tests can prove a hung component cannot hold the
	// process past the shutdown deadline (set through MQGATE_TEST_HANG_STOP).
	HangOnStop string
	// StoreFS is the file system the store uses; nil is the operating
	// system's. Tests inject faults (a full disk) through it.
	StoreFS vfs.FS
}

// Addrs are the bound listener addresses (useful with port 0).
type Addrs struct {
	GRPC, HTTP, Remoting, Metrics string
}

// Node is a running mqgate.
type Node struct {
	cfg   Config
	log   *slog.Logger
	owner *lifecycle.Owner
	gate  *admission.Gate
	tel   *telemetry.Telemetry

	group *lifecycle.Group

	store   *storage.Store
	storeFS vfs.FS // Options.StoreFS
	// grpcCert is the gRPC listener's certificate (grpcCertificate).
	grpcCert     tls.Certificate
	grpcCertErr  error
	grpcCertOnce sync.Once
	version      string // Options.Build.Version
	// Cluster mode (cluster.go): the replica owning the store, the raft
	// member, and the relays in front of the client listeners.
	rep    *raftstore.Replica
	raft   *peer.Node
	relays map[string]*relay.Relay
	// groups are the data groups of a cluster of several (groups.go; rep
	// and raft are group 0's, broker and store too); catalog is the
	// metadata service over group 0's topics and groups; balanceKick
	// wakes balanceLeaders; fwd holds the connections requests are
	// forwarded on.
	groups      []*dataGroup
	catalog     *metadata.Service
	balanceKick chan struct{}
	fwd         forwarder
	// routedTo is the leader the relays pipe to (0: none, or this
	// member serves); followLeader's goroutine only.
	routedTo uint64
	// restart is closed (once) when the node must be reopened (Restart).
	restart     chan struct{}
	restartOnce sync.Once
	// removed is closed (once) when this cluster member was removed from
	// its group (Removed).
	removed     chan struct{}
	removedOnce sync.Once
	// recordMu serialises the rewrites of the replica record (replicas.go:
	// unhost, hostGroup).
	recordMu sync.Mutex
	// hostMu serialises hostGroup with itself and with the opening and
	// closing of the groups' brokers and replicas; brokerCfg and
	// storeOpts are what hostGroup opens a group's broker and replica
	// with (startGroupBrokers, openGroups), once brokersOpen.
	hostMu      sync.Mutex
	brokerCfg   broker.Config
	storeOpts   storage.Options
	brokersOpen bool
	broker      *broker.Broker
	sess        *session.Registry
	// v2 is the v2 messaging service, once built (its forwards are a
	// cluster metric).
	v2 atomic.Pointer[v2service.MessagingService]
	// auth verifies callers on every listener; nil when --auth-file is
	// empty (auth disabled).
	auth *auth.Authenticator
	grpc *grpcserver.Server
	// remoting serves classic RocketMQ clients (nil when --remoting-addr
	// is empty); checkBacks are the listeners' transaction check-back
	// senders, asked in listener order (addCheckBack).
	remoting *remoting.Server
	// remotingUp is remoting once it serves, for the admin API's client
	// listing, which may run while the node still starts.
	remotingUp atomic.Pointer[remoting.Server]
	checkBacks broker.CheckBackFanOut
	http       *httpserver.Server

	// lis are the gRPC, HTTP and metrics listeners, bound before the store
	// opens (bindListeners) and handed to their servers as they start.
	lis map[string]net.Listener
	// Connection limits (conns.go): the limits derived from the settings,
	// the pool every listener takes its connections from, the wrapped
	// listeners by connlimit name, and the members' hosts.
	conns     conns
	pool      *connlimit.Pool
	limited   map[string]*connlimit.Listener
	memberIPs map[netip.Addr]struct{}
	metrics   *http.Server
	addrs     Addrs
	// healthMu orders the health watcher's updates with Shutdown's, so a
	// watcher that saw the node ready cannot turn health back on after
	// Shutdown turned it off.
	healthMu sync.Mutex
	ready    atomic.Bool
	stopping atomic.Bool
	// unobserve removes the store's and the gate's metric callbacks
	// (observe.go), registered by the broker component, which removes them
	// when it stops (before the store closes).
	unobserve func()
}

// Open starts a node. On error everything already started is stopped.
func Open(ctx context.Context, cfg Config, o Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Clustered() && cfg.dataGroups() > 1 && cfg.RemotingAddr != "" {
		log.Warn("classic remoting is served with one data group only: the remoting listener is not started (set --remoting-addr '' to silence this)",
			"data_groups", cfg.dataGroups(), "remoting_addr", cfg.RemotingAddr)
		cfg.RemotingAddr = ""
	}
	n := &Node{cfg: cfg, log: log, owner: lifecycle.NewOwner(log), gate: admission.NewGate(), storeFS: o.StoreFS, version: o.Build.Version, restart: make(chan struct{}), removed: make(chan struct{})}
	if cfg.AuthFile != "" {
		users, err := auth.Load(cfg.AuthFile)
		if err != nil {
			return nil, fmt.Errorf("auth-file: %w", err)
		}
		n.auth = auth.New(users)
		if fi, err := os.Stat(cfg.AuthFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("the users file holds secret keys and other users may read it: chmod 600 it",
				"auth_file", cfg.AuthFile, "mode", fi.Mode().Perm().String())
		}
	}
	// Each listener is wrapped in its connection limits (conns.go).
	n.conns = cfg.connLimits()
	n.pool = connlimit.NewPool(n.conns.fdLimit - n.conns.reserve) // sized again once the store is open
	n.limited = map[string]*connlimit.Listener{}
	n.resolveMembers(ctx)
	// Every listen address is checked, and bound, before the data
	// directory is created or locked: a bad or busy address fails fast.
	if err := n.bindListeners(ctx); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			n.closeListeners()
		}
	}()
	if cfg.InsecureListenAll && n.auth == nil {
		log.Warn("--insecure-listen-all without --auth-file: the listeners bind every interface and anyone who can reach them may use the admin API (create and delete topics and groups, reset offsets)")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}

	// Registered first so it stops last: every serve loop and background
	// goroutine of the node runs in this group, and its shutdown names any
	// that outlived their component.
	n.group = lifecycle.NewGroup(ctx)
	n.add(o, lifecycle.Func{ComponentName: "goroutines", StopFn: n.group.Shutdown})
	n.add(o, lifecycle.Func{ComponentName: "telemetry",
		StartFn: func(ctx context.Context) error {
			t, err := telemetry.Setup(ctx, telemetry.Options{Build: o.Build, Logger: log})
			n.tel = t
			if err == nil && t.Export != "" {
				log.Info("OpenTelemetry export over OTLP", "export", t.Export)
			}
			return err
		},
		StopFn: func(ctx context.Context) error { return n.tel.Shutdown(ctx) },
	})
	n.add(o, lifecycle.Func{ComponentName: "storage", StartFn: n.startStorage,
		StopFn: func(ctx context.Context) error {
			switch {
			case n.multiGroup():
				return n.closeGroups(ctx)
			case n.rep != nil:
				return n.closeReplica(ctx)
			}
			return n.store.Close(ctx)
		}})
	n.add(o, lifecycle.Func{ComponentName: "broker", StartFn: n.startBroker,
		StopFn: func(ctx context.Context) error {
			n.unobserve()
			if n.multiGroup() {
				return n.closeBrokers(ctx)
			}
			return n.broker.Close(ctx)
		}})
	n.add(o, lifecycle.Func{ComponentName: "session",
		StartFn: func(ctx context.Context) error {
			n.sess = session.New(session.Config{OnGone: n.releaseClient, Logger: n.log})
			return n.sess.Start(ctx)
		},
		StopFn: func(ctx context.Context) error { return n.sess.Stop(ctx) }})
	n.add(o, lifecycle.Func{ComponentName: "connection-limits", StartFn: n.sizePool})
	switch {
	case cfg.Clustered() && cfg.dataGroups() > 1:
		n.add(o, lifecycle.Func{ComponentName: "data-groups", StartFn: func(context.Context) error { return n.startGroups() },
			StopFn: n.stopGroups})
	case cfg.Clustered():
		n.add(o, lifecycle.Func{ComponentName: "relays", StartFn: func(context.Context) error { return n.startRelays() },
			StopFn: n.stopRelays})
	}
	n.add(o, lifecycle.Func{ComponentName: "grpc", StartFn: n.startGRPC,
		StopFn: func(ctx context.Context) error {
			defer n.grpc.Close()
			return n.grpc.Stop(ctx)
		}})
	if cfg.RemotingAddr != "" {
		n.add(o, lifecycle.Func{ComponentName: "remoting", StartFn: n.startRemoting, StopFn: n.stopRemoting})
	}
	n.add(o, lifecycle.Func{ComponentName: "http", StartFn: n.startHTTP,
		StopFn: func(ctx context.Context) error { return n.http.Stop(ctx) }})
	if cfg.MetricsAddr != "" {
		n.add(o, lifecycle.Func{ComponentName: "metrics", StartFn: n.startMetrics, StopFn: n.stopMetrics})
	}

	// Registered last, so it is the first thing Shutdown waits for: health
	// is already NOT_SERVING and new calls refused, listeners still open.
	n.add(o, lifecycle.Func{ComponentName: "drain-notice", StopFn: n.drainNotice})
	if cfg.Clustered() {
		// Stops before the drain notice: leadership moves first.
		n.add(o, lifecycle.Func{ComponentName: "leadership-handoff", StopFn: n.handoff})
	}

	if err := n.owner.Start(ctx); err != nil {
		return nil, err
	}
	started = true
	n.ready.Store(true)
	n.grpc.SetServing(true)
	if err := n.group.Go("health", n.watchHealth); err != nil {
		log.Warn("health watcher not started: gRPC health will not follow the store", "err", err)
	}
	log.Info("mqgate ready", "grpc", n.addrs.GRPC, "http", n.addrs.HTTP, "remoting", n.addrs.Remoting, "metrics", n.addrs.Metrics,
		"data_dir", cfg.DataDir, "flush", cfg.Flush, "auto_create", cfg.AutoCreate, "auth", n.auth != nil)
	return n, nil
}

// add registers c, wrapping it with the test-only hang when asked.
func (n *Node) add(o Options, c lifecycle.Func) {
	if o.HangOnStop != "" && o.HangOnStop == c.ComponentName {
		inner := c.StopFn
		c.StopFn = func(ctx context.Context) error {
			n.log.Warn("test hook: component hangs in Stop until the deadline", "component", c.ComponentName)
			<-ctx.Done()
			<-make(chan struct{}) // and beyond: only the owner's deadline ends this
			return inner(ctx)
		}
	}
	n.owner.Add(c)
}

func (n *Node) startStorage(ctx context.Context) error {
	mode, err := storage.ParseFlushMode(n.cfg.Flush)
	if err != nil {
		return err
	}
	retention := n.cfg.Retention
	if retention == 0 {
		retention = -1 // keep everything
	}
	usage := float64(n.cfg.DiskUsageLimit)
	if usage == 0 {
		usage = -1
	}
	linger := n.cfg.StagingLinger
	if linger == 0 {
		linger = -1 // write at once
	}
	logCache := n.cfg.LogCache
	if logCache == 0 {
		logCache = -1 // the kernel decides
	}
	reserve, reservePct := n.cfg.DiskReserve, n.cfg.DiskReservePercent
	if reserve == 0 {
		reserve = -1 // not this part
	}
	if reservePct == 0 {
		reservePct = -1
	}
	opts := storage.Options{
		SegmentSize:        n.cfg.SegmentSize,
		LogCacheBytes:      logCache,
		FlushMode:          mode,
		FlushInterval:      n.cfg.FlushInterval,
		StagingDir:         n.stagingDir(),
		StagingLinger:      linger,
		FlushTimeout:       n.cfg.FlushTimeout,
		RetentionTime:      retention,
		DiskUsagePercent:   usage,
		DiskReserve:        reserve,
		DiskReservePercent: reservePct,
		StoreHost:          n.storeHost(),
		FS:                 n.storeFS,
		Logger:             n.log,
	}
	if n.cfg.Clustered() && n.cfg.dataGroups() > 1 {
		if err := n.openGroups(opts); err != nil {
			return err
		}
	} else if n.cfg.Clustered() {
		if err := checkDataGroups(n.cfg.DataDir, 1); err != nil {
			return err
		}
		if err := n.openReplica(opts); err != nil {
			return err
		}
	} else if n.store, err = storage.Open(filepath.Join(n.cfg.DataDir, "store"), opts); err != nil {
		return err
	}
	st := n.store
	rec := st.Recovery()
	if rec.Fresh {
		n.log.Info("store open: a new store (no earlier run to recover)", "data_dir", n.cfg.DataDir)
		return nil
	}
	n.log.Info("store open", "clean_shutdown_before", rec.Clean, "log_end", rec.LogEnd, "truncated_bytes", rec.Truncated,
		"replayed_bytes", rec.ReplayedBytes, "recovery", rec.Duration)
	return nil
}

func (n *Node) startBroker(ctx context.Context) error {
	bc := broker.Config{AutoCreate: n.cfg.AutoCreate, Clock: clock.Process(), Logger: n.log, Tracers: n.brokerTracers(), Meters: n.tel.Meters,
		Lite: lite.Config{TopicQuota: n.cfg.LiteTopicQuota, SubscriptionQuota: n.cfg.LiteSubscriptionQuota, ExpiryInterval: n.cfg.LiteExpiryInterval}}
	if off, ok := bc.Clock.(clock.Offset); ok { // only in a binary built with the mqgate_testhooks tag
		n.log.Warn("test hook: the broker's clock is offset", "offset", off.D.String())
	}
	if n.rep != nil {
		bc.Replicated = n.rep
		bc.InheritedGrace = maxClockSkew
		bc.SnapshotOK = n.rep.Leading
	}
	if n.multiGroup() {
		if err := n.startGroupBrokers(ctx, bc); err != nil {
			return err
		}
	} else {
		b, err := broker.Open(ctx, bc, n.store)
		if err != nil {
			return err
		}
		n.broker = b
	}
	var err error
	n.unobserve, err = n.observe()
	if err != nil {
		err = fmt.Errorf("store metrics: %w", err)
		if n.multiGroup() {
			return errors.Join(err, n.closeBrokers(ctx))
		}
		return errors.Join(err, n.broker.Close(ctx))
	}
	return nil
}

// storeHost is what records say about where they were stored.
func (n *Node) storeHost() string {
	if n.cfg.AdvertiseAddr != "" {
		return n.cfg.AdvertiseAddr
	}
	host, port, err := net.SplitHostPort(n.cfg.GRPCAddr)
	if err != nil {
		return n.cfg.GRPCAddr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// grpcCertificate is the certificate the gRPC listener presents, loaded
// (or made, self-signed) once: a cluster member announces its
// fingerprint before the listener starts (memberInfo).
func (n *Node) grpcCertificate() (tls.Certificate, error) {
	n.grpcCertOnce.Do(func() {
		n.grpcCert, n.grpcCertErr = grpcserver.LoadOrCreateCertificate(n.cfg.DataDir, n.cfg.TLSCert, n.cfg.TLSKey)
	})
	return n.grpcCert, n.grpcCertErr
}

func (n *Node) startGRPC(ctx context.Context) error {
	cert, err := n.grpcCertificate()
	if err != nil {
		return err
	}
	n.grpc = grpcserver.New(grpcserver.Options{
		TLS:                   &tls.Config{Certificates: []tls.Certificate{cert}},
		MaxConnectionAge:      n.cfg.GRPCMaxConnectionAge,
		MaxConnectionAgeGrace: n.cfg.GRPCMaxConnectionAgeGrace,
		MaxConnectionIdle:     n.cfg.GRPCMaxConnectionIdle,
		HandshakeTimeout:      n.cfg.HandshakeTimeout,
		MaxInFlightBytes:      n.cfg.GRPCRequestBudget,
		Logger:                n.log,
		AddHistogram:          n.tel.AddHistogram,
		TracerProvider:        n.tel.Tracers,
		Tracing:               n.tel.Tracing,
		Gate:                  n.gate,
		Sessions:              n.sess,
		Auth:                  n.auth,
		AdminViews:            admin.OpenToUsers,
		MaxBodySize:           n.broker.Limits().MaxBodySize,
		Codec:                 v2service.ServerCodec(),
		RequestSize:           v2service.RequestSize,
	})
	sc := v2service.ServiceConfig{AdvertiseAddr: n.cfg.AdvertiseAddr, Logger: n.log}
	var adm admin.Broker = n.broker
	var rest restmessaging.Broker = n.broker
	var restRoutes restmessaging.Groups
	var adminRoutes admin.Groups
	switch {
	case n.multiGroup():
		view := newGroupsView(n)
		sc.Groups = view
		adm, rest, restRoutes, adminRoutes = groupsAdmin{n}, groupsREST{n}, restGroups{view}, adminGroups{view}
	case n.raft != nil:
		sc.RouteMembers = n.routeMembers
	}
	svc, err := v2service.NewMessagingService(sc,
		n.broker, n.sess, n.gate)
	if err != nil {
		return err
	}
	n.v2.Store(svc)
	var remote v2service.RemoteChecker
	if n.multiGroup() {
		// A producer's control streams may be held by other members than
		// the one storing its half messages.
		remote = n.checkElsewhere
		n.groups[0].raft.SetTransactionChecker(svc.CheckTransactionForwarded)
	}
	n.addCheckBack(svc.CheckBackSender(remote))
	svc.Register(n.grpc)
	admin.New(adm, admin.Options{Auth: n.auth, Clients: n.clients, Cluster: clusterView{n}, Groups: adminRoutes}).Register(n.grpc)
	restmessaging.New(restmessaging.Config{Logger: n.log, Auth: n.auth, Groups: restRoutes}, rest).Register(n.grpc)
	lis := n.lis["grpc-addr"]
	n.addrs.GRPC = lis.Addr().String()
	return n.group.Go("grpc-serve", func(context.Context) {
		if err := n.grpc.Serve(lis); err != nil {
			n.log.Error("gRPC listener failed", "err", err)
		}
	})
}

// advertiseHost is the host of --advertise-addr, or "".
func (n *Node) advertiseHost() string {
	host := ""
	if n.cfg.AdvertiseAddr != "" {
		host, _, _ = net.SplitHostPort(n.cfg.AdvertiseAddr)
	}
	return host
}

// startRemoting binds the classic remoting listener (NameServer + Broker
// on one port) over the broker's classic view.
func (n *Node) startRemoting(ctx context.Context) error {
	rc := remoting.Config{AdvertiseHost: n.advertiseHost(), Logger: n.log, Pid: os.Getpid(), Auth: n.auth,
		SendWindow: n.cfg.RemotingSendWindow, FirstFrameTimeout: n.cfg.HandshakeTimeout}
	if n.raft != nil {
		rc.Members = n.remotingMembers
	}
	srv, err := remoting.New(rc, n.broker.Classic())
	if err == nil {
		err = srv.Serve(ctx, n.lis["remoting-addr"])
	}
	if err != nil {
		return err
	}
	n.remoting = srv
	n.remotingUp.Store(srv)
	n.addrs.Remoting = srv.Addr()
	n.addCheckBack(srv)
	n.broker.AddResetListener(srv)
	return nil
}

func (n *Node) stopRemoting(ctx context.Context) error {
	if n.remoting == nil {
		return nil
	}
	return n.remoting.Stop(ctx)
}

// addCheckBack adds a listener's transaction check-back sender; the
// broker asks them in the order added (gRPC first, then remoting).
func (n *Node) addCheckBack(s txn.CheckBackSender) {
	n.checkBacks = append(n.checkBacks, s)
	n.eachBroker(func(b *broker.Broker) { b.SetCheckBackSender(n.checkBacks) })
}

func (n *Node) startHTTP(ctx context.Context) (err error) {
	// REST calls reach the gRPC services in process (grpcserver.InProcess):
	// the same tap, stats handler and interceptors, no socket and no
	// encoding. The HTTP server stops before the gRPC server (registered
	// after it), so no REST call outlives it.
	ho := httpserver.Options{Ready: n.Ready, ReadyNotice: n.readyNotice, Logger: n.log, HeaderTimeout: n.cfg.HandshakeTimeout,
		API: n.grpc.InProcess(), MeterProvider: n.tel.Meters, TracerProvider: n.tel.Tracers, Auth: n.auth,
		Console: console.New()}
	if n.cfg.MCP {
		ho.MCP = mcpserver.Handler(mcpserver.Options{Conn: n.grpc.InProcess(), Version: n.version, Logger: n.log}, n.auth)
	}
	n.http, err = httpserver.New(ho)
	if err != nil {
		return err
	}
	lis := n.lis["http-addr"]
	n.addrs.HTTP = lis.Addr().String()
	return n.group.Go("http-serve", func(context.Context) {
		if err := n.http.Serve(lis); err != nil {
			n.log.Error("HTTP listener failed", "err", err)
		}
	})
}

func listen(ctx context.Context, name, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, addr, err)
	}
	return lis, nil
}

// bindListeners resolves every listen address (Config.ListenAddr) and
// binds the gRPC, HTTP, remoting and metrics listeners, kept until their
// servers start, so that a busy port fails the start before the store is
// touched.
func (n *Node) bindListeners(ctx context.Context) error {
	n.lis = map[string]net.Listener{}
	for _, l := range n.cfg.listeners() {
		if l.addr == "" {
			continue
		}
		addr, err := n.cfg.ListenAddr(l.name, l.addr)
		if err == nil {
			var lis net.Listener
			if lis, err = listen(ctx, l.name, addr); err == nil {
				n.lis[l.name] = n.limitListener(l.name, lis)
			}
		}
		if err != nil {
			n.closeListeners()
			return err
		}
	}
	return nil
}

// closeListeners closes the listeners bound by bindListeners (those a
// server already serves are closed twice, harmlessly).
func (n *Node) closeListeners() {
	for _, lis := range n.lis {
		_ = lis.Close()
	}
}

// Addrs returns the bound listener addresses.
func (n *Node) Addrs() Addrs { return n.addrs }

// Ready is nil from the end of Open (store open, every listener bound)
// until Shutdown begins, except while the store cannot write
// (storage.Store.Writable: after a failed fsync until a restart; after an
// append that failed for lack of space until space returns or an append
// succeeds; after another write error until an append succeeds).
func (n *Node) Ready() error {
	switch {
	case n.stopping.Load():
		return errors.New("draining for shutdown")
	case !n.ready.Load():
		return errors.New("starting")
	}
	if err := n.store.Writable(); err != nil {
		return fmt.Errorf("the store cannot write: %w", err)
	}
	for _, dg := range n.groups[min(1, len(n.groups)):] {
		if !dg.hosted() {
			continue
		}
		if err := dg.rep.Store().Writable(); err != nil {
			return fmt.Errorf("the store of data group %d cannot write: %w", dg.id, err)
		}
	}
	return nil
}

// Shutdown drains and stops every component against ctx's deadline (fix it
// once, at the first signal) and returns the report.
//
// Order: health NOT_SERVING and /readyz 503 first (proxies and probes
// stop routing here), then the admission gate refuses new unary calls
// (UNAVAILABLE: nothing happened, retry elsewhere) and parked long polls
// wake and answer "no message"; then the drain notice (the first
// component stopped, drainNotice) keeps the listeners open a moment so
// proxies notice; then the components stop in reverse start order —
// listeners close after their in-flight calls finish (or at the
// deadline), then session, broker, store, telemetry.
func (n *Node) Shutdown(ctx context.Context) lifecycle.Report {
	n.healthMu.Lock()
	n.stopping.Store(true)
	n.grpc.SetServing(false)
	n.healthMu.Unlock()
	n.gate.StartDrain()
	n.eachBroker((*broker.Broker).Drain)
	return n.owner.Shutdown(ctx)
}

// drainNotice waits cfg.DrainNotice, but never more than half of what is
// left of ctx's deadline (the rest of the shutdown needs it), while the
// listeners stay open: new calls are already refused and health says
// NOT_SERVING, so proxies and load balancers stop routing to this node
// before its ports close.
func (n *Node) drainNotice(ctx context.Context) error {
	d := n.cfg.DrainNotice
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	if d <= 0 {
		return nil
	}
	n.log.Info("draining: health NOT_SERVING, new calls refused; listeners close after the drain notice", "notice", d.String())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReloadAuth re-reads the users file (mqgate serve does on SIGHUP): calls
// from then on are checked against the new users; calls in flight keep
// the user they were authenticated as. A file that does not load leaves
// the current users in place. Auth cannot be turned on or off this way.
func (n *Node) ReloadAuth() (users int, err error) {
	if n.auth == nil {
		return 0, errors.New("auth is off (no --auth-file): nothing to reload")
	}
	u, err := auth.Load(n.cfg.AuthFile)
	if err != nil {
		return 0, fmt.Errorf("the current users stay: %w", err)
	}
	n.auth.SetUsers(u)
	return u.Len(), nil
}
