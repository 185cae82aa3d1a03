package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mqgate/mqgate/gateway/node"
)

// setting is one configuration key. The same name is the flag (--name), the
// YAML key (name:) and, upper-cased with '-' as '_' and an MQGATE_ prefix,
// the environment variable.
type setting struct {
	name   string
	usage  string
	get    func(*node.Config) string
	set    func(*node.Config, string) error
	isBool bool // --name alone means true
	// kind is what the value is, for serve -h and --print-config: "bool",
	// "int", "duration", "size" or "" (text).
	kind string
}

func (s setting) env() string {
	return "MQGATE_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

func strSetting(name, usage string, field func(*node.Config) *string) setting {
	return setting{name: name, usage: usage,
		get: func(c *node.Config) string { return *field(c) },
		set: func(c *node.Config, v string) error { *field(c) = v; return nil }}
}

func durSetting(name, usage string, field func(*node.Config) *time.Duration) setting {
	return setting{name: name, usage: usage, kind: "duration",
		get: func(c *node.Config) string { return formatDuration(*field(c)) },
		set: func(c *node.Config, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("not a duration (like 500ms, 30s, 2h): %q", v)
			}
			*field(c) = d
			return nil
		}}
}

func boolSetting(name, usage string, field func(*node.Config) *bool) setting {
	return setting{name: name, usage: usage, isBool: true, kind: "bool",
		get: func(c *node.Config) string { return strconv.FormatBool(*field(c)) },
		set: func(c *node.Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("not a boolean (true or false): %q", v)
			}
			*field(c) = b
			return nil
		}}
}

func intSetting(name, usage string, field func(*node.Config) *int) setting {
	return setting{name: name, usage: usage, kind: "int",
		get: func(c *node.Config) string { return strconv.Itoa(*field(c)) },
		set: func(c *node.Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("not an integer: %q", v)
			}
			*field(c) = n
			return nil
		}}
}

func sizeSetting(name, usage string, field func(*node.Config) *int64) setting {
	return setting{name: name, usage: usage, kind: "size",
		get: func(c *node.Config) string { return formatSize(*field(c)) },
		set: func(c *node.Config, v string) error {
			n, err := parseSize(v)
			if err != nil {
				return err
			}
			*field(c) = n
			return nil
		}}
}

// settings is the single table of server settings.
var settings = []setting{
	strSetting("data-dir", "directory for the store, metadata and keys", func(c *node.Config) *string { return &c.DataDir }),
	strSetting("grpc-addr", "gRPC listen address (TLS and plaintext on one port)", func(c *node.Config) *string { return &c.GRPCAddr }),
	strSetting("http-addr", "HTTP listen address (REST, /healthz, /readyz)", func(c *node.Config) *string { return &c.HTTPAddr }),
	strSetting("remoting-addr", "classic remoting listen address; empty disables", func(c *node.Config) *string { return &c.RemotingAddr }),
	strSetting("metrics-addr", "Prometheus /metrics listen address (the series name every topic and group); empty disables", func(c *node.Config) *string { return &c.MetricsAddr }),
	strSetting("metrics-token", "bearer token /metrics requires (Authorization: Bearer TOKEN); needed for a non-loopback metrics-addr unless --insecure-listen-all", func(c *node.Config) *string { return &c.MetricsToken }),
	boolSetting("insecure-listen-all", "without --auth-file, bind every interface anyway (the admin API is then open to the network); without it and without --auth-file, an address with no host binds 127.0.0.1 and a non-loopback host is refused", func(c *node.Config) *bool { return &c.InsecureListenAll }),
	strSetting("advertise-addr", "host:port that routes tell clients to dial; empty = the address the client dialed", func(c *node.Config) *string { return &c.AdvertiseAddr }),
	durSetting("shutdown-timeout", "one deadline for the whole shutdown, fixed at the first signal", func(c *node.Config) *time.Duration { return &c.ShutdownTimeout }),
	durSetting("drain-notice", "at shutdown, keep listeners open this long after health turns NOT_SERVING so proxies stop routing (part of shutdown-timeout)", func(c *node.Config) *time.Duration { return &c.DrainNotice }),
	strSetting("tls-cert", "PEM certificate for the gRPC port (default: self-signed, kept in the data dir)", func(c *node.Config) *string { return &c.TLSCert }),
	strSetting("tls-key", "PEM private key matching --tls-cert", func(c *node.Config) *string { return &c.TLSKey }),
	strSetting("flush", "commit-log flush policy: async or sync (group commit)", func(c *node.Config) *string { return &c.Flush }),
	durSetting("flush-interval", "async flush period", func(c *node.Config) *time.Duration { return &c.FlushInterval }),
	strSetting("staging-dir", "tmpfs directory where async sends wait to be written to the log in runs of up to 1 MiB (survives a process crash); empty = /dev/shm if tmpfs, off = none", func(c *node.Config) *string { return &c.StagingDir }),
	durSetting("staging-linger", "async with a staging ring: under a steady stream of sends, wait this long for more before writing the ring to the log (less CPU a send; a send reaches its queue up to this much later); not while a consumer waits for new messages; 0 = write at once", func(c *node.Config) *time.Duration { return &c.StagingLinger }),
	durSetting("flush-timeout", "sync flush: longest wait for the fsync before answering a flush timeout", func(c *node.Config) *time.Duration { return &c.FlushTimeout }),
	sizeSetting("segment-size", "commit-log segment size (e.g. 1GiB, 64MiB)", func(c *node.Config) *int64 { return &c.SegmentSize }),
	sizeSetting("log-cache", "how much of the commit log behind its newest records stays in the page cache once on disk (async with a staging ring); consumers further behind read from disk; 0 = the kernel decides", func(c *node.Config) *int64 { return &c.LogCache }),
	durSetting("retention", "delete log segments older than this; 0 keeps everything", func(c *node.Config) *time.Duration { return &c.Retention }),
	intSetting("disk-usage-limit", "delete oldest segments while the disk is fuller than this percent; 0 disables", func(c *node.Config) *int { return &c.DiskUsageLimit }),
	{name: "disk-reserve", usage: "free space on the data disk kept so that consumers can drain a full disk: new messages are refused (the disk is full) once less is free; a size (2GiB), a share of the file system (5%), or both (1GiB,5%: the larger); 0 turns it off",
		get: func(c *node.Config) string { return formatReserve(c.DiskReserve, c.DiskReservePercent) },
		set: func(c *node.Config, v string) error {
			n, pct, err := parseReserve(v)
			if err == nil {
				c.DiskReserve, c.DiskReservePercent = n, pct
			}
			return err
		}},
	strSetting("auth-file", "YAML users file; when set every gRPC, REST and remoting call must be signed by one of its access keys", func(c *node.Config) *string { return &c.AuthFile }),
	durSetting("remoting-send-window", "with --auth-file: refuse a classic remoting send whose signed born timestamp is further than this from the server's clock, so a captured signed send cannot be replayed later (other classic requests carry no signed time); 0 = no bound, as upstream", func(c *node.Config) *time.Duration { return &c.RemotingSendWindow }),
	boolSetting("auto-create", "create unknown topics and groups on first use (development setting)", func(c *node.Config) *bool { return &c.AutoCreate }),
	boolSetting("mcp", "serve the Model Context Protocol's read-only diagnostics tools on the HTTP listener at /mcp (streamable HTTP; with --auth-file each request is signed as a REST request is)", func(c *node.Config) *bool { return &c.MCP }),
	durSetting("grpc-max-connection-age", "close gRPC connections older than this; 0 never", func(c *node.Config) *time.Duration { return &c.GRPCMaxConnectionAge }),
	durSetting("grpc-max-connection-age-grace", "time given to RPCs on a connection closed for its age", func(c *node.Config) *time.Duration { return &c.GRPCMaxConnectionAgeGrace }),
	durSetting("grpc-max-connection-idle", "close gRPC connections with no RPC for this long (GOAWAY: clients reconnect when they next call); 0 never", func(c *node.Config) *time.Duration { return &c.GRPCMaxConnectionIdle }),
	sizeSetting("grpc-request-budget", "bytes of gRPC requests being read or held by handlers at once; a call reserves the receive limit before its request is read, and one user (one client address without --auth-file) may hold half of it", func(c *node.Config) *int64 { return &c.GRPCRequestBudget }),
	intSetting("grpc-max-conns", "most gRPC connections at once; 0 = derived from the descriptor limit", func(c *node.Config) *int { return &c.GRPCMaxConns }),
	intSetting("http-max-conns", "most HTTP connections at once; 0 = derived from the descriptor limit", func(c *node.Config) *int { return &c.HTTPMaxConns }),
	intSetting("remoting-max-conns", "most classic remoting connections at once; 0 = derived from the descriptor limit", func(c *node.Config) *int { return &c.RemotingMaxConns }),
	intSetting("metrics-max-conns", "most metrics listener connections at once; 0 = derived from the descriptor limit", func(c *node.Config) *int { return &c.MetricsMaxConns }),
	intSetting("peer-max-conns", "cluster mode: most peer connections at once; 0 = derived from the descriptor limit", func(c *node.Config) *int { return &c.PeerMaxConns }),
	intSetting("conn-address-share", "percentage of each listener's connection cap one client address may hold (an IPv6 /64 counts as one address); 100 = no share", func(c *node.Config) *int { return &c.ConnAddressShare }),
	intSetting("fd-reserve", "file descriptors kept from connections for the store and the rest of the process; 0 = an eighth of the descriptor limit, at least 256", func(c *node.Config) *int { return &c.FDReserve }),
	durSetting("handshake-timeout", "how long a new connection may take to start: TLS and the HTTP/2 preface on gRPC, a request's headers on HTTP, the first frame on remoting, the first bytes on the peer port", func(c *node.Config) *time.Duration { return &c.HandshakeTimeout }),
	strSetting("log-level", "debug, info, warn or error", func(c *node.Config) *string { return &c.LogLevel }),
	strSetting("log-format", "json or text", func(c *node.Config) *string { return &c.LogFormat }),
	strSetting("cluster-id", "cluster mode: the replica group's name, the same on every member (with --node-id and --peers); empty = single node", func(c *node.Config) *string { return &c.ClusterID }),
	intSetting("node-id", "cluster mode: this member's id, one of --peers", func(c *node.Config) *int { return &c.NodeID }),
	boolSetting("node-id-from-hostname", "cluster mode: take --node-id from --peers, the member whose peer address's host is this machine's host name or starts with it and a dot (StatefulSet pod mqgate-1 is the member at mqgate-1.mqgate-peers...)", func(c *node.Config) *bool { return &c.NodeIDFromHostname }),
	strSetting("peers", "cluster mode: the members' peer addresses, 1=host:port,2=host:port,3=host:port; this member listens on its own and dials the others there; a first start bootstraps a group of exactly these members unless --join (without --peer-tls-* peer traffic is not encrypted: keep it on a private network, and set --peer-token)", func(c *node.Config) *string { return &c.Peers }),
	boolSetting("join", "cluster mode: on a first start, wait to be added to the running group (mqgate cluster add-node) instead of bootstrapping one; --peers then names this member and at least one running member, from which it learns the others", func(c *node.Config) *bool { return &c.Join }),
	strSetting("peer-token", "cluster mode: a secret of at least 16 characters that every call between members must carry, the same on every member (prefer env MQGATE_PEER_TOKEN); cluster mode needs it, peer TLS (--peer-tls-*), or both", func(c *node.Config) *string { return &c.PeerToken }),
	strSetting("peer-tls-cert", "cluster mode: PEM certificate of this member ({node-id} in the path stands for its id), signed by --peer-tls-ca, presented on its peer address and when it dials the others (allow server and client authentication); with --peer-tls-key and --peer-tls-ca, turns on mutual TLS between members (re-read when the files change; mqgate cluster init-certs DIR writes a CA and a certificate per member)", func(c *node.Config) *string { return &c.PeerTLSCert }),
	strSetting("peer-tls-key", "cluster mode: PEM private key of --peer-tls-cert ({node-id} in the path stands for its id)", func(c *node.Config) *string { return &c.PeerTLSKey }),
	strSetting("peer-tls-ca", "cluster mode: PEM CA bundle that signs every member's peer certificate; the peer address accepts only callers with such a certificate, and members accept any certificate it signs whatever address they dialled (so use a CA for this group only)", func(c *node.Config) *string { return &c.PeerTLSCA }),
	intSetting("raft-log-keep", "cluster mode: raft entries a member keeps behind its durable position; a member further behind catches up from a copy of another member's store", func(c *node.Config) *int { return &c.RaftLogKeep }),
	intSetting("lite-topic-quota", "lite topics one LITE topic may have; a send that would create one more is refused (LITE_TOPIC_QUOTA_EXCEEDED)", func(c *node.Config) *int { return &c.LiteTopicQuota }),
	intSetting("lite-subscription-quota", "lite topics one lite consumer may subscribe to (LITE_SUBSCRIPTION_QUOTA_EXCEEDED past it; clients are told in their settings)", func(c *node.Config) *int { return &c.LiteSubscriptionQuota }),
	durSetting("lite-expiry-interval", "how often lite topics idle past their LITE topic's lite TTL are dropped (and their subscribers told)", func(c *node.Config) *time.Duration { return &c.LiteExpiryInterval }),
	intSetting("group-replicas", "cluster mode with data-groups above 1: how many members each data group but the first (which holds the catalog) has replicas on, spread over the members when the cluster is created, so each member stores and replicates only its share; 0 = every member hosts every group; fixed when the cluster is created, the same on every member; below the number of members, a member that joins takes replicas from the members holding the most (or those of the member it replaces), one removed has its replicas moved to the others first, and mqgate cluster move-replica and rebalance move replicas between members", func(c *node.Config) *int { return &c.GroupReplicas }),
	intSetting("replaces", "cluster mode with join and group-replicas: the id of the member this new one takes the place of (one down for good, or to be retired); it hosts that member's data groups, which mqgate cluster add-node --replaces then moves to it; 0 = none: a new member takes replicas from the members holding the most", func(c *node.Config) *int { return &c.Replaces }),
	intSetting("data-groups", "cluster mode: raft groups the cluster spreads its queues over, each led by one member (leaders are balanced over the members, clients routed to each queue's leader), so capacity grows with the members; fixed when the cluster is created, the same on every member; 1 = one group; several serve v2 (gRPC) and REST clients, the CLI and the admin API, not classic remoting", func(c *node.Config) *int { return &c.DataGroups }),
	durSetting("leader-wait", "cluster mode: how long a client connection waits for a leader during an election", func(c *node.Config) *time.Duration { return &c.LeaderWait }),
}

func findSetting(name string) (setting, bool) {
	for _, s := range settings {
		if s.name == name {
			return s, true
		}
	}
	return setting{}, false
}

// flagValue holds a flag's raw text until precedence is applied; bool
// settings accept the bare form (--auto-create).
type flagValue struct {
	val    string
	isBool bool
}

func (v *flagValue) String() string     { return v.val }
func (v *flagValue) Set(s string) error { v.val = s; return nil }
func (v *flagValue) IsBoolFlag() bool   { return v.isBool }

// loadConfig builds the effective configuration with precedence
// flag > MQGATE_* env > YAML file (--config or MQGATE_CONFIG) > default.
// warn receives non-fatal notes (unknown MQGATE_* variables).
func loadConfig(args []string, environ []string, warn func(string)) (node.Config, *flag.FlagSet, bool, error) {
	fs := flag.NewFlagSet("mqgate serve", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	cfg := node.Defaults()
	configPath := fs.String("config", "", "YAML file with settings (keys as the flag names)")
	printConfig := fs.Bool("print-config", false, "print the effective configuration as YAML and exit")
	flagVals := map[string]*flagValue{}
	for _, s := range settings {
		v := &flagValue{val: s.get(&cfg), isBool: s.isBool}
		flagVals[s.name] = v
		fs.Var(v, s.name, s.usage+" (env "+s.env()+")")
	}
	if err := fs.Parse(args); err != nil {
		return cfg, fs, false, err
	}
	if fs.NArg() > 0 {
		return cfg, fs, false, fmt.Errorf("unexpected argument %q (settings are --flags)", fs.Arg(0))
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "MQGATE_") {
			env[k] = v
		}
	}
	path := *configPath
	if path == "" {
		path = env["MQGATE_CONFIG"]
	}
	if path != "" {
		if err := applyFile(&cfg, path); err != nil {
			return cfg, fs, false, err
		}
	}
	known := map[string]bool{"MQGATE_CONFIG": true}
	for _, s := range settings {
		known[s.env()] = true
		if v, ok := env[s.env()]; ok {
			if err := s.set(&cfg, v); err != nil {
				return cfg, fs, false, fmt.Errorf("environment %s: %w", s.env(), err)
			}
		}
	}
	var unknown []string
	for k := range env {
		if !known[k] && !strings.HasPrefix(k, "MQGATE_TEST_") && !strings.HasPrefix(k, "MQGATE_BENCH_") {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		warn(fmt.Sprintf("ignoring unknown environment variable %s", k))
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		if ferr != nil {
			return
		}
		if s, ok := findSetting(f.Name); ok {
			if err := s.set(&cfg, flagVals[f.Name].val); err != nil {
				ferr = fmt.Errorf("flag --%s: %w", f.Name, err)
			}
		}
	})
	if ferr != nil {
		return cfg, fs, false, ferr
	}
	// The host name node-id-from-hostname matches; MQGATE_TEST_HOSTNAME
	// stands in for it in tests (deploy/files_test.go renders each
	// StatefulSet pod's configuration).
	host, _ := os.Hostname()
	if h, ok := env["MQGATE_TEST_HOSTNAME"]; ok {
		host = h
	}
	cfg, err := cfg.ForHost(host)
	if err != nil {
		return cfg, fs, false, fmt.Errorf("invalid configuration: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fs, false, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, fs, *printConfig, nil
}

// applyFile reads a YAML mapping of setting names to values. Unknown keys
// and non-scalar values are errors naming the key and line.
func applyFile(cfg *node.Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: top level must be a mapping of setting: value", path)
	}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		s, ok := findSetting(k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("config file %s line %d: unknown key %q", path, k.Line, k.Value))
			continue
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("config file %s line %d: %s must be a single value", path, v.Line, k.Value))
			continue
		}
		if err := s.set(cfg, v.Value); err != nil {
			errs = append(errs, fmt.Errorf("config file %s line %d: %s: %w", path, v.Line, k.Value, err))
		}
	}
	return errors.Join(errs...)
}

// renderConfig prints cfg as YAML in table order: booleans and integers
// as YAML booleans and integers, everything else as a quoted string.
func renderConfig(cfg node.Config) string {
	var b strings.Builder
	for _, s := range settings {
		v := s.get(&cfg)
		if (s.name == "metrics-token" || s.name == "peer-token") && v != "" {
			v = "(set)" // a secret: not printed
		}
		if s.kind == "bool" || s.kind == "int" {
			fmt.Fprintf(&b, "%s: %s\n", s.name, v)
			continue
		}
		fmt.Fprintf(&b, "%s: %q\n", s.name, v)
	}
	return b.String()
}

func parseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("not a size (like 1048576, 64MiB, 1GiB): %q", v)
	}
	return n * mult, nil
}

// formatDuration is d as time.Duration writes it, without its zero
// trailing units: 72h, 2m, 1m30s, 500µs.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// parseReserve reads a disk reserve: a size, a percentage ("5%"), or both
// separated by a comma, in either order.
func parseReserve(v string) (int64, float64, error) {
	var n int64
	var pct float64
	var haveN, havePct bool
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if p, ok := strings.CutSuffix(part, "%"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || havePct || f < 0 || f >= 100 || math.IsNaN(f) {
				return 0, 0, fmt.Errorf("not a disk reserve (like 2GiB, 5%%, or 1GiB,5%%): %q", v)
			}
			pct, havePct = f, true
			continue
		}
		s, err := parseSize(part)
		if err != nil || haveN {
			return 0, 0, fmt.Errorf("not a disk reserve (like 2GiB, 5%%, or 1GiB,5%%): %q", v)
		}
		n, haveN = s, true
	}
	return n, pct, nil
}

func formatReserve(n int64, pct float64) string {
	var parts []string
	if n > 0 {
		parts = append(parts, formatSize(n))
	}
	if pct > 0 {
		parts = append(parts, strconv.FormatFloat(pct, 'g', -1, 64)+"%")
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}
