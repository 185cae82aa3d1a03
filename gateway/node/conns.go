package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/mqgate/mqgate/gateway/connlimit"
	"github.com/mqgate/mqgate/gateway/peer"
)

// Connection limits. Every listener (gRPC, HTTP, remoting, metrics, peer)
// is wrapped when it is bound (bindListeners) in a connlimit.Listener: a
// cap of its own, a share of that cap per client address, and a slot of
// the process's pool per connection. The pool is what the descriptor
// limit leaves once the store is open: the limit, less the descriptors
// open then (the store's files, the listeners), less FDReserve, kept for
// what the store and the process open later. It is sized by the
// connection-limits component, after the store opens and before the
// client listeners serve. In cluster mode the listeners wrapped are the
// relays' (a member counts the connections it relays), and the members'
// hosts are exempt from the address shares: a relay passes the
// connections of every client of its member from one address.

// peerFirstBytes is what a peer connection must send within
// HandshakeTimeout: the HTTP/2 client preface (24 bytes) and a frame
// header, or as much of a TLS ClientHello.
const peerFirstBytes = 24 + 9

// conns are the limits as they apply: the descriptor limit and reserve,
// and each listener's cap (0 for a listener not configured).
type conns struct {
	fdLimit, reserve int
	caps             map[string]int
}

// connSettings maps the listen settings to connlimit's listener names.
var connSettings = map[string]string{"grpc-addr": connlimit.GRPC, "http-addr": connlimit.HTTP,
	"remoting-addr": connlimit.Remoting, "metrics-addr": connlimit.Metrics, "peers": connlimit.Peer}

func (c Config) validateConns() []error {
	var errs []error
	for name, v := range map[string]int{"grpc-max-conns": c.GRPCMaxConns, "http-max-conns": c.HTTPMaxConns,
		"remoting-max-conns": c.RemotingMaxConns, "metrics-max-conns": c.MetricsMaxConns, "peer-max-conns": c.PeerMaxConns,
		"fd-reserve": c.FDReserve} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative (0 derives it from the descriptor limit), got %d", name, v))
		}
	}
	if c.ConnAddressShare < 1 || c.ConnAddressShare > 100 {
		errs = append(errs, fmt.Errorf("conn-address-share: must be a percentage in [1, 100], got %d", c.ConnAddressShare))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("handshake-timeout: must be positive, got %s", c.HandshakeTimeout))
	}
	if c.GRPCRequestBudget < 1<<20 {
		errs = append(errs, fmt.Errorf("grpc-request-budget: must be at least 1MiB, got %d", c.GRPCRequestBudget))
	}
	return errs
}

// connLimits derives the limits from the configuration and the descriptor
// limit.
func (c Config) connLimits() conns {
	fdLimit, err := connlimit.FDLimit()
	if err != nil {
		fdLimit = 1024
	}
	reserve := c.FDReserve
	if reserve == 0 {
		reserve = connlimit.DefaultReserve(fdLimit)
	}
	l := conns{fdLimit: fdLimit, reserve: reserve, caps: map[string]int{}}
	for name, v := range map[string]int{connlimit.GRPC: c.GRPCMaxConns, connlimit.HTTP: c.HTTPMaxConns,
		connlimit.Remoting: c.RemotingMaxConns, connlimit.Metrics: c.MetricsMaxConns, connlimit.Peer: c.PeerMaxConns} {
		if v == 0 {
			v = connlimit.DefaultCap(name, fdLimit, reserve)
		}
		l.caps[name] = v
	}
	return l
}

// limitListener wraps the listener bound for the setting named setting.
func (n *Node) limitListener(setting string, lis net.Listener) net.Listener {
	name := connSettings[setting]
	o := connlimit.Options{Name: name, Max: n.conns.caps[name], Logger: n.log, Exempt: n.memberHost}
	o.AddressShare = max(1, o.Max*n.cfg.ConnAddressShare/100)
	switch name {
	case connlimit.GRPC:
		o.Refuse = connlimit.HTTP2Refusal()
	case connlimit.HTTP:
		o.Refuse = connlimit.HTTPRefusal(http.StatusServiceUnavailable, "application/json", connlimit.JSONRefusal(42900, "TOO_MANY_REQUESTS"))
	case connlimit.Metrics:
		o.Refuse = connlimit.HTTPRefusal(http.StatusServiceUnavailable, "text/plain; charset=utf-8", connlimit.TextRefusal)
	case connlimit.Peer:
		// The peer server's own handshake deadline is not set here.
		o.FirstBytes, o.FirstBytesTimeout = peerFirstBytes, n.cfg.HandshakeTimeout
	}
	l := n.pool.Wrap(lis, o)
	n.limited[name] = l
	return l
}

// memberHost reports whether ip is the host of a cluster member (by
// --peers): its relays' connections are exempt from the address shares.
func (n *Node) memberHost(ip netip.Addr) bool {
	_, ok := n.memberIPs[ip]
	return ok
}

// resolveMembers fills memberIPs from the hosts in --peers (cluster mode).
func (n *Node) resolveMembers(ctx context.Context) {
	n.memberIPs = map[netip.Addr]struct{}{}
	if !n.cfg.Clustered() {
		return
	}
	peers, err := peer.ParsePeers(n.cfg.Peers)
	if err != nil {
		return
	}
	for _, addr := range peers {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			n.memberIPs[ip.Unmap()] = struct{}{}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			n.log.Warn("cannot resolve a member's host: connections from it count in its address's share", "host", host, "err", err)
		}
		for _, ip := range ips {
			n.memberIPs[ip.Unmap()] = struct{}{}
		}
	}
}

// sizePool sizes the connection pool once the store is open: the
// descriptor limit, less those open now that are not connections, less
// the reserve. It logs the limits in force.
func (n *Node) sizePool(context.Context) error {
	open, err := connlimit.OpenFDs()
	if err != nil {
		open = 0 // unknown: the reserve alone stands between connections and the limit
	}
	nonConn := max(0, open-int(n.pool.Open()))
	slots := max(16, n.conns.fdLimit-nonConn-n.conns.reserve)
	n.pool.SetMax(slots)
	args := []any{"fd_limit", n.conns.fdLimit, "fd_reserve", n.conns.reserve, "fds_open", open, "max_conns", slots,
		"address_share_percent", n.cfg.ConnAddressShare, "handshake_timeout", n.cfg.HandshakeTimeout.String()}
	for _, l := range n.limited {
		args = append(args, l.Name()+"_max_conns", l.Max())
	}
	n.log.Info("connection limits", args...)
	if slots <= n.conns.reserve/4 {
		n.log.Warn("few descriptors are left for connections: raise the process's descriptor limit (LimitNOFILE, ulimit -n)",
			"fd_limit", n.conns.fdLimit, "max_conns", slots)
	}
	return nil
}
