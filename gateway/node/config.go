package node

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/gateway/connlimit"
	"github.com/mqgate/mqgate/storage"
)

// Config is the whole server configuration. cmd/mqgate fills it from
// flags, MQGATE_* environment variables and an optional YAML file.
type Config struct {
	// DataDir holds the store, metadata, the TLS certificate created at
	// first start and the receipt-handle key.
	DataDir string
	// GRPCAddr is the MessagingService listener (TLS and plaintext on one
	// port).
	GRPCAddr string
	// HTTPAddr serves REST, /healthz, /readyz and /openapi.json.
	HTTPAddr string
	// MetricsAddr serves /metrics (Prometheus text) on its own listener,
	// so topic and group names in the series need not be exposed where
	// the APIs are; empty disables it.
	MetricsAddr string
	// MetricsToken, when set, is the bearer token /metrics requires
	// (Authorization: Bearer <token>).
	MetricsToken string
	// InsecureListenAll lets the listeners bind every interface without
	// AuthFile: the admin API is then open to whoever can reach them.
	// Without it and without AuthFile a listener address with no host
	// binds 127.0.0.1, and a non-loopback host is refused (ListenAddr).
	InsecureListenAll bool
	// RemotingAddr is the classic remoting listener; empty disables it.
	RemotingAddr string
	// AdvertiseAddr is the host:port routes tell clients to dial; empty
	// means the address the client itself dialed.
	AdvertiseAddr string
	// ShutdownTimeout bounds the whole shutdown from the first signal.
	ShutdownTimeout time.Duration
	// DrainNotice is how long, at shutdown, the listeners stay open after
	// health turned NOT_SERVING and new calls are refused, so proxies stop
	// routing here first. It is part of ShutdownTimeout (never more than
	// half of what is left of it).
	DrainNotice time.Duration
	// TLSCert and TLSKey are PEM files; both empty means a self-signed
	// certificate kept in the data dir.
	TLSCert, TLSKey string
	// Flush is the commit-log flush policy: "async" or "sync".
	Flush string
	// FlushInterval is how often async flush runs.
	FlushInterval time.Duration
	// StagingDir is a memory file system directory where async sends are
	// staged before the commit log writes them out in runs; empty
	// picks /dev/shm when it is a tmpfs, "off" writes each batch to the
	// log directly (storage.Options.StagingDir).
	StagingDir string
	// StagingLinger is how long, under a steady stream of async sends,
	// the staging ring waits for more before it is written to the log: a
	// send costs less CPU, and reaches its queue up to this much later
	// (not while a consumer waits for new messages). 0 writes at once
	// (storage.Options.StagingLinger).
	StagingLinger time.Duration
	// FlushTimeout bounds how long a sync append waits for its fsync
	// before answering FLUSH_DISK_TIMEOUT (the record is still stored).
	FlushTimeout time.Duration
	// SegmentSize is the commit-log segment file size in bytes.
	SegmentSize int64
	// LogCache is how much of the commit log behind its newest records
	// stays in the page cache once written to disk; older pages are
	// dropped, and consumers that far behind read from the disk. 0 leaves
	// it to the kernel (storage.Options.LogCacheBytes).
	LogCache int64
	// Retention deletes commit-log segments older than this (0 keeps all).
	Retention time.Duration
	// DiskUsageLimit deletes the oldest segments while the data disk is
	// fuller than this percentage (0 disables).
	DiskUsageLimit int
	// DiskReserve and DiskReservePercent are the disk reserve: free space
	// on the data disk kept for consumers to drain a full disk (their
	// POP state, acknowledgements, metadata). New messages are refused
	// once less is free; it is the larger of DiskReserve bytes and
	// DiskReservePercent of the file system (0 leaves that part out, both
	// 0 turn it off). See storage.Options.DiskReserve.
	DiskReserve        int64
	DiskReservePercent float64
	// AuthFile, when set, turns authentication on: the YAML users file
	// (gateway/auth.Parse) whose access keys every gRPC, REST and remoting
	// call must sign with. Empty leaves every listener open.
	AuthFile string
	// RemotingSendWindow, with AuthFile, refuses a classic send whose
	// signed born timestamp is further than this from the server's clock,
	// so a captured signed send replays only within it (0: no bound, as
	// upstream). Only sends carry a timestamp the signature covers.
	RemotingSendWindow time.Duration
	// AutoCreate creates unknown topics and groups on first use. A
	// development setting.
	AutoCreate bool
	// MCP serves the Model Context Protocol's diagnostics tools on the
	// HTTP listener at /mcp (streamable HTTP; signed as REST requests
	// are when auth is on).
	MCP bool
	// GRPCMaxConnectionAge, when set, closes gRPC connections older than
	// this after GRPCMaxConnectionAgeGrace. Zero (the default) never does:
	// clients keep a Telemetry stream open for their lifetime.
	GRPCMaxConnectionAge      time.Duration
	GRPCMaxConnectionAgeGrace time.Duration
	// GRPCMaxConnectionIdle closes connections with no RPC for this long
	// (0: never).
	GRPCMaxConnectionIdle time.Duration
	// GRPCRequestBudget bounds the bytes of gRPC requests being read or
	// held by handlers at once (grpcserver.Options.MaxInFlightBytes).
	GRPCRequestBudget int64

	// Connection limits (conns.go, gateway/connlimit). The Max*Conns cap
	// each listener's connections; 0 derives the cap from the descriptor
	// limit (connlimit.DefaultCap). ConnAddressShare is the percentage of
	// a listener's cap one client address may hold (100: no share).
	// FDReserve is the descriptors kept from connections for the store
	// and the rest of the process (0: connlimit.DefaultReserve).
	GRPCMaxConns, HTTPMaxConns, RemotingMaxConns, MetricsMaxConns, PeerMaxConns int
	ConnAddressShare                                                            int
	FDReserve                                                                   int
	// HandshakeTimeout bounds how long a new connection may take to start:
	// on gRPC the TLS handshake and the HTTP/2 preface and first frame, on
	// HTTP a request's headers, on remoting the first frame, on the peer
	// port the first bytes.
	HandshakeTimeout time.Duration
	// LogLevel is debug, info, warn or error; LogFormat is json or text.
	LogLevel  string
	LogFormat string

	// Cluster mode: ClusterID, NodeID and Peers set together make this
	// node a member of a replica group (cluster.go). Peers lists the
	// members' peer (raft) addresses as "1=host:port,2=host:port,...":
	// this node listens on its own and dials the others there (members
	// added later are dialled where they were added with). On a first
	// start the group is bootstrapped with exactly these members, unless
	// Join is set: the node then waits to be added to a running group
	// (`mqgate cluster add-node`). Empty ClusterID: a single node.
	ClusterID string
	NodeID    int
	Peers     string
	Join      bool
	// NodeIDFromHostname takes NodeID from Peers: the member whose peer
	// address's host is this machine's host name, or starts with it and a
	// dot (a StatefulSet's pod mqgate-1 is the member at
	// mqgate-1.mqgate-peers...). See ForHost.
	NodeIDFromHostname bool
	// PeerToken, when set, is a secret every peer call between members
	// must carry (the same on every member); with it the peer address
	// may be a non-loopback one without InsecureListenAll.
	PeerToken string
	// PeerTLSCert, PeerTLSKey and PeerTLSCA, set together, turn on
	// mutual TLS between members (peer.TLS); "{node-id}" in the
	// certificate's and key's paths stands for NodeID. This member's PEM
	// certificate and key, presented when it serves its peer address and
	// when it dials the others, and the CA bundle that signs every
	// member's certificate, which both sides require of the other. With
	// them the peer address may be a non-loopback one without
	// InsecureListenAll.
	PeerTLSCert, PeerTLSKey, PeerTLSCA string
	// LeaderWait is how long a client connection waits for a leader to
	// be known (during an election) before it is closed.
	LeaderWait time.Duration
	// RaftLogKeep is how many raft entries a member keeps behind the
	// position its store has made durable; a member further behind than
	// that catches up from a copy of another member's store instead.
	RaftLogKeep int
	// DataGroups is how many raft groups a cluster spreads its queues
	// over (groups.go; 1: one group, the cluster as it always was). It is
	// fixed when the cluster is created: every member must be started
	// with the same value, and a member restarted with another refuses to
	// start.
	DataGroups int
	// GroupReplicas is how many members each data group but group 0 has
	// replicas on (replicas.go; 0: every member hosts every group). Below
	// the number of members, the groups are spread over them when the
	// cluster is created. A member joining such a cluster (Join) takes
	// replicas from the members holding the most, or those of the member
	// it Replaces; replicas move between running members (hostGroup).
	// Like DataGroups, it is fixed when the cluster is created.
	GroupReplicas int
	// Replaces, with Join in a cluster of GroupReplicas, is the member
	// this new one takes the place of: on its first start it asks the
	// running members which data groups that member votes in and hosts
	// those (`mqgate cluster add-node --replaces` then moves them over).
	// 0: it takes replicas from the members holding the most
	// (peer.GrowMoves; `mqgate cluster add-node` moves them).
	Replaces int
	// LiteTopicQuota caps the lite topics of one LITE topic;
	// LiteSubscriptionQuota the lite topics of one lite consumer's
	// subscription; LiteExpiryInterval is how often idle lite topics
	// are dropped.
	LiteTopicQuota        int
	LiteSubscriptionQuota int
	LiteExpiryInterval    time.Duration
}

// maxStagingLinger bounds StagingLinger: past a few milliseconds the
// writes are already large, and consumers would only wait longer.
const maxStagingLinger = 100 * time.Millisecond

// Clustered reports whether c configures cluster mode.
func (c Config) Clustered() bool { return c.ClusterID != "" }

// Defaults returns the configuration `mqgate serve` uses with no settings.
func Defaults() Config {
	return Config{
		DataDir:                   "./data",
		GRPCAddr:                  ":8081",
		HTTPAddr:                  ":8080",
		MetricsAddr:               "127.0.0.1:9464",
		RemotingAddr:              ":9876",
		ShutdownTimeout:           30 * time.Second,
		DrainNotice:               2 * time.Second,
		Flush:                     "async",
		FlushInterval:             200 * time.Millisecond,
		FlushTimeout:              2 * time.Second,
		StagingLinger:             500 * time.Microsecond,
		SegmentSize:               1 << 30,
		LogCache:                  1 << 30,
		Retention:                 72 * time.Hour,
		DiskUsageLimit:            90,
		DiskReserve:               storage.DefaultDiskReserve,
		DiskReservePercent:        storage.DefaultDiskReservePercent,
		GRPCMaxConnectionAgeGrace: 30 * time.Second,
		GRPCMaxConnectionIdle:     2 * time.Minute,
		GRPCRequestBudget:         256 << 20,
		ConnAddressShare:          connlimit.DefaultAddressShare,
		HandshakeTimeout:          10 * time.Second,
		LogLevel:                  "info",
		LogFormat:                 "json",
		LeaderWait:                5 * time.Second,
		RaftLogKeep:               8192,
		DataGroups:                1,
		LiteTopicQuota:            lite.DefaultTopicQuota,
		LiteSubscriptionQuota:     lite.DefaultSubscriptionQuota,
		LiteExpiryInterval:        lite.DefaultExpiryInterval,
	}
}

// Validate reports every problem in c, naming the setting.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	if c.DataDir == "" {
		bad("data-dir", "must not be empty")
	}
	if c.LiteTopicQuota < 1 {
		bad("lite-topic-quota", "must be at least 1, not %d", c.LiteTopicQuota)
	}
	if c.LiteSubscriptionQuota < 1 {
		bad("lite-subscription-quota", "must be at least 1, not %d", c.LiteSubscriptionQuota)
	}
	if c.LiteExpiryInterval < time.Second {
		bad("lite-expiry-interval", "must be at least 1s, not %s", c.LiteExpiryInterval)
	}
	checkAddr := func(name, v string, optional bool) {
		if v == "" {
			if !optional {
				bad(name, "must not be empty")
			}
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(name, "%q is not host:port: %v", v, err)
		}
	}
	if strings.Contains(c.PeerTLSCert+c.PeerTLSKey, nodeIDPlaceholder) || (c.NodeIDFromHostname && c.NodeID == 0) {
		bad("node-id", "not resolved: the host name and {node-id} are resolved by ForHost before Validate")
	}
	checkAddr("grpc-addr", c.GRPCAddr, false)
	checkAddr("http-addr", c.HTTPAddr, false)
	checkAddr("remoting-addr", c.RemotingAddr, true)
	checkAddr("metrics-addr", c.MetricsAddr, true)
	checkAddr("advertise-addr", c.AdvertiseAddr, true)
	for _, l := range c.listeners() {
		if _, _, err := net.SplitHostPort(l.addr); l.addr == "" || err != nil {
			continue // reported above
		}
		if _, err := c.ListenAddr(l.name, l.addr); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.DrainNotice < 0 {
		bad("drain-notice", "must not be negative, got %s", c.DrainNotice)
	}
	if c.RemotingSendWindow < 0 {
		bad("remoting-send-window", "must not be negative, got %s", c.RemotingSendWindow)
	} else if c.RemotingSendWindow > 0 && c.AuthFile == "" {
		bad("remoting-send-window", "bounds signed classic sends: it needs --auth-file")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("tls-cert", "tls-cert and tls-key must be set together")
	}
	switch c.Flush {
	case "async", "sync":
	default:
		bad("flush", "must be async or sync, got %q", c.Flush)
	}
	if c.FlushInterval <= 0 {
		bad("flush-interval", "must be positive, got %s", c.FlushInterval)
	}
	if c.FlushTimeout <= 0 {
		bad("flush-timeout", "must be positive, got %s", c.FlushTimeout)
	}
	// A segment holds at least one record of the largest size the store
	// accepts (the body limit plus room for properties).
	if minSeg := int64(storage.Options{}.Defaults().MaxRecordSize); c.SegmentSize < minSeg {
		bad("segment-size", "must be at least %d bytes (the largest record), got %d", minSeg, c.SegmentSize)
	}
	if c.StagingLinger < 0 || c.StagingLinger > maxStagingLinger {
		bad("staging-linger", "must be between 0 and %s, got %s", maxStagingLinger, c.StagingLinger)
	}
	if c.LogCache < 0 {
		bad("log-cache", "must not be negative, got %d", c.LogCache)
	}
	if c.Retention < 0 {
		bad("retention", "must not be negative")
	}
	if c.DiskUsageLimit < 0 || c.DiskUsageLimit > 99 {
		bad("disk-usage-limit", "must be a percentage in [0, 99], got %d", c.DiskUsageLimit)
	}
	if c.DiskReserve < 0 || c.DiskReservePercent < 0 || c.DiskReservePercent >= 100 {
		bad("disk-reserve", "must be a size and a percentage in [0, 100), got %d bytes and %v%%", c.DiskReserve, c.DiskReservePercent)
	}
	if c.GRPCMaxConnectionAge < 0 || c.GRPCMaxConnectionAgeGrace < 0 || c.GRPCMaxConnectionIdle < 0 {
		bad("grpc-max-connection-age", "connection age, grace and idle must not be negative")
	}
	errs = append(errs, c.validateConns()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		bad("log-format", "must be json or text, got %q", c.LogFormat)
	}
	errs = append(errs, c.validateCluster()...)
	return errors.Join(errs...)
}

// listener names a listen address setting.
type listener struct{ name, addr string }

// listeners are the listen address settings, in start order.
func (c Config) listeners() []listener {
	return []listener{{"grpc-addr", c.GRPCAddr}, {"http-addr", c.HTTPAddr},
		{"remoting-addr", c.RemotingAddr}, {"metrics-addr", c.MetricsAddr}, {"peers", c.ownPeerAddr()}}
}

// protected reports whether the listener named name checks its callers:
// every API listener with AuthFile, the metrics listener with
// MetricsToken, the peer listener with PeerToken or peer TLS (which
// requires a client certificate of its CA).
func (c Config) protected(name string) bool {
	if name == "peers" {
		return c.PeerToken != "" || c.PeerTLS()
	}
	if name == "metrics-addr" {
		return c.MetricsToken != ""
	}
	return c.AuthFile != ""
}

// ListenAddr is the address the listener named name (grpc-addr,
// http-addr, remoting-addr, metrics-addr) binds for its setting addr:
//
//   - a loopback host (127.0.0.1, ::1, localhost) binds as given;
//   - with its callers checked (AuthFile; MetricsToken for metrics-addr;
//     PeerToken or peer TLS for peers) or InsecureListenAll, any address binds as given, an empty host
//     meaning every interface;
//   - otherwise an empty host (":8081") binds 127.0.0.1, and any other
//     host is an error: it would open the admin API (or the names in the
//     metrics) to the network.
func (c Config) ListenAddr(name, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s: %q is not host:port: %v", name, addr, err)
	}
	if isLoopback(host) || c.InsecureListenAll || c.protected(name) {
		return addr, nil
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	guard := "--auth-file"
	switch name {
	case "metrics-addr":
		guard = "--metrics-token"
	case "peers":
		guard = "--peer-token (or --peer-tls-cert, --peer-tls-key and --peer-tls-ca)"
	}
	return "", fmt.Errorf("%s: %q is not a loopback address and %s is not set: anyone who can reach it could use it "+
		"(for the API listeners: create and delete topics and groups); set %s, bind a loopback address, "+
		"or pass --insecure-listen-all to accept that", name, addr, guard, guard)
}

// isLoopback reports whether host names the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
