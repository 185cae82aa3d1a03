package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/gateway/relay"
	"github.com/mqgate/mqgate/gateway/remoting"
	"github.com/mqgate/mqgate/gateway/v2service"
	"github.com/mqgate/mqgate/storage"
)

// Cluster mode. The node's store is a raftstore.Replica's (written only by
// applying committed raft entries), its raft member is a peer.Node, and
// its client listeners (gRPC, HTTP, remoting) are relays: while this
// member leads, the broker is active and the relays hand connections to
// the local servers; while another member leads, the broker is in
// standby and the relays pipe every connection to the leader's same
// listener. followLeader switches between the two on every leadership
// change, in this order: on losing leadership the relays stop serving
// locally (closing every connection) before the broker deactivates; on
// gaining it, the relays first hold new connections (closing those piped
// to the previous leader), a barrier entry is applied (so is everything
// committed before it), the cluster is bootstrapped if it was not, the
// broker activates, and only then do the relays serve locally.
//
// A follower's relays pipe to one leader at a time. When the leader
// changes they close what they piped to the previous one and hold new
// connections until they know the new leader's addresses; when the
// leader goes silent for an election timeout (a crash, a frozen process,
// a partition: raft's own signal to campaign) they close what they piped
// to it and hold new connections until it is heard again or another
// leads. A hung leader closes nothing itself, so without this the
// clients relayed to it would wait for as long as it hangs.

// relayed are the listeners that follow the leader.
var relayed = []string{"grpc-addr", "http-addr", "remoting-addr"}

// ownPeerAddr is this member's entry of Peers ("" when not clustered or
// unparsable: Validate reports it).
func (c Config) ownPeerAddr() string {
	if !c.Clustered() || c.NodeID <= 0 {
		return ""
	}
	peers, err := peer.ParsePeers(c.Peers)
	if err != nil {
		return ""
	}
	return peers[uint64(c.NodeID)]
}

// nodeIDPlaceholder stands for the member's id in the peer TLS
// certificate's and key's paths.
const nodeIDPlaceholder = "{node-id}"

// ForHost returns c as the member running on the host named hostname:
// with NodeIDFromHostname, NodeID is the member of Peers whose peer
// address's host is hostname, or starts with hostname and a dot (a
// StatefulSet's pod mqgate-1 is the member whose peer address is
// mqgate-1.mqgate-peers.NAMESPACE.svc.cluster.local:7000); then, in
// every case, "{node-id}" in PeerTLSCert and PeerTLSKey becomes NodeID,
// so that one Secret can hold every member's certificate.
func (c Config) ForHost(hostname string) (Config, error) {
	if c.NodeIDFromHostname {
		if !c.Clustered() {
			return c, errors.New("node-id-from-hostname: only in cluster mode (--cluster-id)")
		}
		peers, err := peer.ParsePeers(c.Peers)
		if err != nil {
			return c, fmt.Errorf("peers: %w", err)
		}
		var found []uint64
		for id, addr := range peers {
			host, _, err := net.SplitHostPort(addr)
			if err == nil && hostname != "" && (host == hostname || strings.HasPrefix(host, hostname+".")) {
				found = append(found, id)
			}
		}
		slices.Sort(found)
		switch {
		case len(found) == 0:
			return c, fmt.Errorf("node-id-from-hostname: no member of --peers (%s) has the host name %q or a name under it", c.Peers, hostname)
		case len(found) > 1:
			return c, fmt.Errorf("node-id-from-hostname: members %v of --peers all have the host name %q", found, hostname)
		case c.NodeID != 0 && c.NodeID != int(found[0]):
			return c, fmt.Errorf("node-id-from-hostname: the host name %q is member %d, but --node-id is %d", hostname, found[0], c.NodeID)
		}
		c.NodeID = int(found[0])
	}
	if strings.Contains(c.PeerTLSCert+c.PeerTLSKey, nodeIDPlaceholder) {
		if c.NodeID <= 0 {
			return c, fmt.Errorf("peer-tls-cert: %s in its path needs --node-id (or --node-id-from-hostname)", nodeIDPlaceholder)
		}
		id := strconv.Itoa(c.NodeID)
		c.PeerTLSCert = strings.ReplaceAll(c.PeerTLSCert, nodeIDPlaceholder, id)
		c.PeerTLSKey = strings.ReplaceAll(c.PeerTLSKey, nodeIDPlaceholder, id)
	}
	return c, nil
}

// PeerTLS reports whether c turns on mutual TLS between members (all
// three peer-tls settings set; Validate refuses a partial set).
func (c Config) PeerTLS() bool {
	return c.PeerTLSCert != "" && c.PeerTLSKey != "" && c.PeerTLSCA != ""
}

// PeerTLSFiles are the peer-tls settings as peer.LoadTLS takes them.
func (c Config) PeerTLSFiles() peer.TLSFiles {
	return peer.TLSFiles{Cert: c.PeerTLSCert, Key: c.PeerTLSKey, CA: c.PeerTLSCA}
}

// validatePeerTLS checks that the peer-tls settings are all set or none,
// and that their files load.
func (c Config) validatePeerTLS() []error {
	set := map[string]bool{"peer-tls-cert": c.PeerTLSCert != "", "peer-tls-key": c.PeerTLSKey != "", "peer-tls-ca": c.PeerTLSCA != ""}
	var have, missing []string
	for _, name := range []string{"peer-tls-cert", "peer-tls-key", "peer-tls-ca"} {
		if set[name] {
			have = append(have, name)
		} else {
			missing = append(missing, name)
		}
	}
	switch {
	case len(have) == 0:
		return nil
	case len(missing) > 0:
		return []error{fmt.Errorf("%s: peer-tls-cert, peer-tls-key and peer-tls-ca must be set together (%s missing)",
			have[0], strings.Join(missing, " and "))}
	case !c.Clustered():
		return []error{errors.New("peer-tls-cert, peer-tls-key and peer-tls-ca: set only in cluster mode, with cluster-id")}
	}
	t, err := peer.LoadTLS(c.PeerTLSFiles(), nil)
	if err == nil {
		err = t.CheckServer()
	}
	if err != nil {
		return []error{fmt.Errorf("peer-tls-cert: %w", err)}
	}
	return nil
}

// minPeerToken is the shortest peer token accepted.
const minPeerToken = 16

// validatePeerAuth requires, in cluster mode, that the members
// authenticate each other: a peer token, mutual TLS, or both.
func (c Config) validatePeerAuth() []error {
	if c.PeerToken == "" && !c.PeerTLS() {
		return []error{errors.New("cluster-id: cluster mode needs peer authentication, so that no other process can join, " +
			"read or stop the group: give every member the same secret of at least 16 characters in MQGATE_PEER_TOKEN " +
			"(or --peer-token; e.g. `openssl rand -hex 16`), or mutual TLS with --peer-tls-cert, --peer-tls-key and " +
			"--peer-tls-ca (`mqgate cluster init-certs DIR` writes a CA and a certificate per member)")}
	}
	if c.PeerToken != "" && len(c.PeerToken) < minPeerToken {
		return []error{fmt.Errorf("peer-token: %d characters: use at least %d (e.g. `openssl rand -hex 16`)", len(c.PeerToken), minPeerToken)}
	}
	return nil
}

func (c Config) validateCluster() []error {
	errs := c.validatePeerTLS()
	if !c.Clustered() {
		if c.NodeID != 0 || c.Peers != "" || c.Join {
			errs = append(errs, errors.New("node-id, peers and join: set only in cluster mode, with cluster-id"))
		}
		if c.DataGroups > 1 {
			errs = append(errs, errors.New("data-groups: set only in cluster mode, with cluster-id"))
		}
		if c.GroupReplicas != 0 || c.Replaces != 0 {
			errs = append(errs, errors.New("group-replicas and replaces: set only in cluster mode, with cluster-id and data-groups"))
		}
		return errs
	}
	peers, err := peer.ParsePeers(c.Peers)
	if err != nil {
		errs = append(errs, fmt.Errorf("peers: %w", err))
	} else if _, ok := peers[uint64(c.NodeID)]; c.NodeID <= 0 || !ok {
		errs = append(errs, fmt.Errorf("node-id: %d is not one of the members in --peers", c.NodeID))
	} else if _, _, err := net.SplitHostPort(peers[uint64(c.NodeID)]); err != nil {
		errs = append(errs, fmt.Errorf("peers: this member's address: %w", err))
	}
	errs = append(errs, c.validatePeerAuth()...)
	if c.RaftLogKeep < 16 {
		errs = append(errs, fmt.Errorf("raft-log-keep: must be at least 16 entries, got %d", c.RaftLogKeep))
	}
	if c.LeaderWait <= 0 {
		errs = append(errs, fmt.Errorf("leader-wait: must be positive, got %s", c.LeaderWait))
	}
	if c.DataGroups < 0 || c.DataGroups > maxDataGroups {
		errs = append(errs, fmt.Errorf("data-groups: must be between 1 and %d, got %d", maxDataGroups, c.DataGroups))
	}
	switch {
	case c.GroupReplicas < 0:
		errs = append(errs, fmt.Errorf("group-replicas: must be 0 (every member) or more, got %d", c.GroupReplicas))
	case c.GroupReplicas > 0 && c.DataGroups < 2:
		errs = append(errs, errors.New("group-replicas: set only with data-groups above 1"))
	}
	switch {
	case c.Replaces < 0:
		errs = append(errs, fmt.Errorf("replaces: want a member id, got %d", c.Replaces))
	case c.Replaces > 0 && (!c.Join || c.GroupReplicas == 0):
		errs = append(errs, errors.New("replaces: set only with join and group-replicas (a new member of a cluster whose data groups are on some members only)"))
	case c.Replaces > 0 && c.Replaces == c.NodeID:
		errs = append(errs, fmt.Errorf("replaces: member %d cannot replace itself: the replacement joins under a new id", c.NodeID))
	}
	return errs
}

// openReplica opens the replicated store and starts the raft member.
func (n *Node) openReplica(opts storage.Options) error {
	peers, err := peer.ParsePeers(n.cfg.Peers)
	if err != nil {
		return err
	}
	rep, err := raftstore.OpenReplica(filepath.Join(n.cfg.DataDir, "replica"), raftstore.Options{
		Store: opts, StoreHost: n.storeHost(), ClusterID: n.cfg.ClusterID, CommitTimeout: n.cfg.FlushTimeout, Logger: n.log,
		// The raft log is compacted up to the durable position only: it
		// must advance well within what the log keeps.
		PersistEvery: uint64(min(4096, max(1, n.cfg.RaftLogKeep/2)))})
	if err != nil {
		return err
	}
	var tlsCfg *peer.TLS
	if n.cfg.PeerTLS() {
		if tlsCfg, err = peer.LoadTLS(n.cfg.PeerTLSFiles(), n.log); err != nil {
			return errors.Join(fmt.Errorf("peer-tls-cert: %w", err), rep.Close(context.Background()))
		}
	}
	rn, err := peer.Start(peer.Config{ClusterID: n.cfg.ClusterID, NodeID: uint64(n.cfg.NodeID), Peers: peers, Join: n.cfg.Join,
		Token: n.cfg.PeerToken, TLS: tlsCfg, WALDir: filepath.Join(n.cfg.DataDir, "raft"), Listener: n.lis["peers"], Info: n.memberInfo(), Logger: n.log,
		SnapshotEvery: uint64(n.cfg.RaftLogKeep), KeepEntries: uint64(n.cfg.RaftLogKeep)}, rep)
	if err != nil {
		return errors.Join(err, rep.Close(context.Background()))
	}
	rep.Attach(rn)
	n.rep, n.raft, n.store = rep, rn, rep.Store()
	n.log.Info("cluster member started", "cluster_id", n.cfg.ClusterID, "node_id", n.cfg.NodeID, "peers", n.cfg.Peers,
		"peer_tls", n.cfg.PeerTLS())
	return nil
}

// Restart is closed when the node must be shut down and opened again
// (cluster mode: to install a copy of another member's store).
func (n *Node) Restart() <-chan struct{} { return n.restart }

// Removed is closed when this member was removed from its group
// (cluster mode): it no longer serves, and the process should stop.
func (n *Node) Removed() <-chan struct{} { return n.removed }

// closeReplica stops the raft member, then the replica (its store).
func (n *Node) closeReplica(ctx context.Context) error {
	return errors.Join(n.raft.Stop(), n.rep.Close(ctx))
}

// memberInfo is what other members dial to reach this one's listeners.
func (n *Node) memberInfo() peer.MemberInfo {
	dialable := func(name string) string {
		lis := n.lis[name]
		if lis == nil {
			return ""
		}
		host, port, err := net.SplitHostPort(lis.Addr().String())
		if err != nil {
			return ""
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = ""
			if n.cfg.AdvertiseAddr != "" {
				host, _, _ = net.SplitHostPort(n.cfg.AdvertiseAddr)
			}
			if host == "" {
				host, _ = os.Hostname()
			}
		}
		return net.JoinHostPort(host, port)
	}
	info := peer.MemberInfo{GRPC: dialable("grpc-addr"), HTTP: dialable("http-addr"), Remoting: dialable("remoting-addr")}
	// The remoting server reads the greeting of the others' relays
	// (remoting.Greeting).
	info.RemotingGreeting = info.Remoting != ""
	info.Format = raftstore.FormatVersion
	if n.cfg.AdvertiseAddr != "" {
		info.GRPC = n.cfg.AdvertiseAddr
	}
	if cert, err := n.grpcCertificate(); err == nil && len(cert.Certificate) > 0 {
		info.GRPCCertSHA256 = peer.CertFingerprint(cert.Certificate[0])
	}
	return info
}

// startRelays puts a relay in front of each client listener; the servers
// then serve the relays' local listeners.
func (n *Node) startRelays() error {
	n.relays = map[string]*relay.Relay{}
	for _, name := range relayed {
		lis := n.lis[name]
		if lis == nil {
			continue
		}
		o := relay.Options{Name: name, LeaderWait: n.cfg.LeaderWait, Logger: n.log}
		if name == "remoting-addr" {
			// A leader that reads it (route) then names this member in
			// the routes it answers on the connection.
			o.Greeting = remoting.Greeting(n.advertiseHost())
		}
		r := relay.New(lis, o)
		n.relays[name] = r
		n.lis[name] = r.Local()
		if err := n.group.Go("relay-"+name, func(context.Context) { r.Run() }); err != nil {
			return err
		}
	}
	return n.group.Go("follow-leader", n.followLeader)
}

// stopRelays closes the relays (and every connection they routed).
func (n *Node) stopRelays(context.Context) error {
	var errs []error
	for _, r := range n.relays {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// route points every relay at this member (local) or at the leader's
// listeners (info), or nowhere (zero info, not local). The remoting relay
// greets the leader only when its info says it reads the greeting: a
// leader of an older version would take it for a frame too large and
// close every relayed connection.
func (n *Node) route(local bool, info peer.MemberInfo) {
	for name, r := range n.relays {
		rt := relay.Route{Local: local}
		if !local {
			switch name {
			case "grpc-addr":
				rt.Addr = info.GRPC
			case "http-addr":
				rt.Addr = info.HTTP
			case "remoting-addr":
				rt.Addr, rt.Greet = info.Remoting, info.RemotingGreeting
			}
		}
		r.SetRoute(rt)
	}
}

// leadership is what follow works with: the raft member, the
// replica and the broker (interfaces, so that a test can drive it).
type leadership struct {
	raft interface {
		LeaderTerm() uint64
		Leader() uint64
		LeaderHeard() time.Time
		ElectionTimeout() time.Duration
		Members() peer.Membership
		MemberInfo(ctx context.Context, id uint64) (peer.MemberInfo, error)
		ForgetMemberInfo(id uint64)
		ClockOffset(ctx context.Context, id uint64) (offset, uncertainty time.Duration, err error)
		Handoff(ctx context.Context) error
		Changes() <-chan struct{}
		Done() <-chan struct{}
		Err() error
	}
	rep interface {
		MarkLeading(term uint64)
		Barrier(ctx context.Context) error
		Bootstrap(ctx context.Context, clusterID string) error
		Format() int
		RaiseFormat(ctx context.Context) error
		EnsureKeys(ctx context.Context, now time.Time) error
		RotateKeys(ctx context.Context, now time.Time, every time.Duration) (bool, error)
		Uncertain() uint64
		UncertainChanges() <-chan struct{}
		Applied() uint64
	}
	broker interface {
		Active() bool
		Activate(ctx context.Context) error
		Deactivate(ctx context.Context) error
		ReloadKeys() error
		ReleaseUnseen(ctx context.Context, seen func(clientID string) bool) []string
	}
}

// activation is what the broker's live services were built from: the
// raft term this member led in, and the count of the replica's
// uncertain outcomes then. The services serve from memory built on the
// store as of a barrier of that term, kept current by this member's own
// writes; memory of another term may predate entries another leader
// committed, and an uncertain outcome may have changed the store under
// it: either makes the activation stale.
type activation struct {
	term      uint64
	uncertain uint64
}

// followLeader keeps the broker and the relays in step with leadership
// (see the comment at the top of this file) until ctx ends or the raft
// member stops.
func (n *Node) followLeader(ctx context.Context) {
	// While following, the leader's silence is looked at a few times per
	// election timeout (reconcile).
	watch := time.NewTicker(n.raft.ElectionTimeout() / 4)
	defer watch.Stop()
	n.follow(ctx, follower{
		l:   leadership{raft: n.raft, rep: n.rep, broker: n.broker},
		log: n.log, watch: watch.C,
		reconcile: n.reconcile,
		hold:      n.routeNowhere,
		stopped: func(err error) {
			switch {
			case errors.Is(err, peer.ErrRemoved):
				n.log.Warn("this member was removed from the cluster: it no longer serves")
				n.removedOnce.Do(func() { close(n.removed) })
			case err != nil:
				n.log.Error("cluster member stopped: this node no longer serves", "err", err)
			}
		},
	})
}

// follower is one raft group's side of follow: what it reconciles, and
// what it does when it must stop serving or its raft member stops.
type follower struct {
	l   leadership
	log *slog.Logger
	// reconcile applies the current leadership to act (the broker's
	// activation, follow's); false asks to be called again soon.
	reconcile func(ctx context.Context, l leadership, act *activation) bool
	// changed, if set, is called after each leadership change.
	changed func()
	// watch, if set, wakes the loop besides the changes.
	watch <-chan time.Time
	// hold stops serving (before the broker is deactivated).
	hold func()
	// stopped says why the raft member stopped (a staged copy aside,
	// which restarts the node).
	stopped func(err error)
}

// follow keeps f's broker in step with f's leadership until ctx ends or
// the raft member stops. It owns the activation.
func (n *Node) follow(ctx context.Context, f follower) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var act activation
	rotate := time.NewTicker(time.Hour)
	defer rotate.Stop()
	// unseen fires clientGrace after an activation (releaseUnseen).
	unseen := time.NewTimer(time.Hour)
	unseen.Stop()
	defer unseen.Stop()
	for {
		changes, uncertain := f.l.raft.Changes(), f.l.rep.UncertainChanges()
		was := act
		if !f.reconcile(ctx, f.l, &act) {
			retry.Reset(200 * time.Millisecond)
		}
		if act != was && f.l.broker.Active() {
			unseen.Reset(clientGrace)
		}
		select {
		case <-changes:
			if f.changed != nil {
				f.changed()
			}
		case <-uncertain:
		case <-unseen.C:
			n.releaseUnseen(ctx, f.l)
		case <-rotate.C:
			n.rotateKeys(ctx, f.l)
		case <-retry.C:
		case <-f.watch:
		case <-ctx.Done():
			return
		case <-f.l.raft.Done():
			if err := f.l.raft.Err(); errors.Is(err, raftstore.ErrCopyStaged) {
				f.log.Info("a copy of another member's store is staged: restarting to install it")
				n.restartOnce.Do(func() { close(n.restart) })
			} else {
				f.stopped(err)
			}
			f.hold()
			if err := f.l.broker.Deactivate(context.WithoutCancel(ctx)); err != nil {
				f.log.Warn("deactivating the broker", "err", err)
			}
			return
		}
	}
}

// reconcile applies the current leadership; false asks to be called again
// soon (a step failed while nothing changed). act is the broker's
// current activation (followLeader's).
func (n *Node) reconcile(ctx context.Context, l leadership, act *activation) bool {
	if term := l.raft.LeaderTerm(); term != 0 {
		// Until it serves, nothing is piped to the previous leader any
		// more, and new connections wait.
		return n.lead(ctx, l, act, term, n.log, n.routeLocal, n.routeNowhere)
	}
	if l.broker.Active() {
		n.routeNowhere() // close local connections first
		if err := l.broker.Deactivate(ctx); err != nil {
			n.log.Warn("deactivating the broker", "err", err)
		}
		n.log.Info("this member no longer leads: relaying to the leader")
	}
	lead := l.raft.Leader()
	if lead == 0 {
		n.routeNowhere()
		return true // the next change names a leader
	}
	if silent := time.Since(l.raft.LeaderHeard()); silent > l.raft.ElectionTimeout() {
		if n.routedTo != 0 {
			n.log.Warn("the leader went silent: relayed connections closed, new ones wait for a leader",
				"leader", lead, "silent_for", silent.Round(time.Millisecond))
		}
		n.routeNowhere()
		return true // looked at again at the next watch tick
	}
	if n.routedTo == lead {
		return true
	}
	// What was piped to another leader goes now; new connections wait
	// for this one's addresses.
	n.routeNowhere()
	// Asked afresh at each change: a member restarted under another
	// version answers otherwise (RemotingGreeting), and it can only lead
	// again after a change.
	l.raft.ForgetMemberInfo(lead)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := l.raft.MemberInfo(cctx, lead)
	if err != nil {
		n.log.Warn("cannot learn the leader's addresses", "leader", lead, "err", err)
		return false
	}
	n.route(false, info)
	n.routedTo = lead
	return true
}

// lead is reconcile while this member leads in term: the broker's
// services are built again unless they were built in this term with no
// outcome uncertain since (act), then serve is called; hold is called
// first whenever they are not current (nothing must be served from
// services built in another term or before an outcome this member could
// not learn). log is the group's logger. False asks to be called again
// soon.
func (n *Node) lead(ctx context.Context, l leadership, act *activation, term uint64, log *slog.Logger, serve, hold func()) bool {
	want := activation{term: term, uncertain: l.rep.Uncertain()}
	if l.broker.Active() && *act == want {
		serve()
		return true
	}
	hold()
	if l.broker.Active() {
		if err := l.broker.Deactivate(ctx); err != nil {
			log.Warn("deactivating the broker", "err", err)
		}
		log.Info("the broker's state may be stale: building it again", "term", term, "built_in_term", act.term,
			"uncertain_outcomes", want.uncertain-act.uncertain)
	}
	if err := n.activate(ctx, l, want); err != nil {
		log.Warn("leading, but not serving yet", "err", err)
		if errors.Is(err, errClockSkew) {
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := l.raft.Handoff(hctx); err != nil {
				log.Warn("handing the leadership to a member with a sound clock failed", "err", err)
			}
			cancel()
		}
		return false
	}
	*act = want
	serve()
	log.Info("this member leads: serving", "node_id", n.cfg.NodeID, "term", term, "applied", l.rep.Applied())
	return true
}

// activate builds the broker's services for want: a barrier entry is
// applied (and with it every entry committed before, another leader's
// and this member's uncertain ones included), the cluster bootstrapped
// if it was not, and the services opened from the store. If leadership
// changed meanwhile, or another outcome became uncertain, the services
// are closed again and an error returned: they may have missed entries.
func (n *Node) activate(ctx context.Context, l leadership, want activation) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := n.checkClock(cctx, l)
	if err == nil {
		l.rep.MarkLeading(want.term)
		err = l.rep.Barrier(cctx)
	}
	if err == nil {
		err = l.rep.Bootstrap(cctx, n.cfg.ClusterID)
	}
	if err == nil {
		n.raiseFormat(cctx, l)
		err = l.rep.EnsureKeys(cctx, time.Now())
	}
	if err == nil {
		_, err = l.rep.RotateKeys(cctx, time.Now(), keyRotation)
	}
	if err == nil {
		err = l.broker.Activate(cctx)
	}
	if err != nil {
		return err
	}
	if got := (activation{term: l.raft.LeaderTerm(), uncertain: l.rep.Uncertain()}); got != want {
		err := fmt.Errorf("leadership or an outcome changed while activating (term %d, now %d)", want.term, got.term)
		if derr := l.broker.Deactivate(ctx); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	return nil
}

// maxClockSkew is how far the members' wall clocks may differ. Deadlines
// (a delivery's invisibility, a delayed message's time) are wall-clock
// times of the member that recorded them: a leader checks its clock
// against the others' before it serves (checkClock), and pushes the
// deadlines it inherits back by this much (pop's InheritedGrace), so a
// clock ahead within the bound never shows a message early.
const maxClockSkew = time.Second

// errClockSkew: this member's clock is too far from the others'.
var errClockSkew = errors.New("this member's clock differs from the others'")

// checkClock refuses to serve when this member's clock differs from the
// clocks of more than half of the other voters by more than maxClockSkew
// (beyond the measurement's uncertainty): its deadlines would then fire
// early or late for every delivery. One other member off is that
// member's problem (it refuses when it leads). Members of a version
// that does not report its clock, and members that do not answer, are
// left out.
func (n *Node) checkClock(ctx context.Context, l leadership) error {
	var others []uint64
	for _, id := range l.raft.Members().Voters {
		if id != uint64(n.cfg.NodeID) {
			others = append(others, id)
		}
	}
	// Asked at once, each within probeTimeout: a member that is down or
	// frozen must not hold up the leader that replaces it.
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	skews := make([]time.Duration, len(others))
	var wg sync.WaitGroup
	for i, id := range others {
		wg.Go(func() {
			if o, u, err := l.raft.ClockOffset(pctx, id); err == nil {
				skews[i] = max(o, -o) - u
			}
		})
	}
	wg.Wait()
	var off int
	var worst time.Duration
	for _, d := range skews {
		if d > maxClockSkew {
			off++
			worst = max(worst, d)
		}
	}
	if len(others) > 0 && 2*off > len(others) {
		return fmt.Errorf("%w by up to %v (%d of %d members), more than the %v allowed: fix its time synchronization (NTP); "+
			"it hands the leadership over", errClockSkew, worst.Round(time.Millisecond), off, len(others), maxClockSkew)
	}
	return nil
}

// probeTimeout bounds what a new leader asks the other members before it
// serves (their clocks, the entry format they read).
const probeTimeout = 500 * time.Millisecond

// keyRotation is how often a leader puts a new key at the head of the
// token key rings (broker/raftstore's keys.go).
const keyRotation = 30 * 24 * time.Hour

// raiseFormat raises the group's entry format to this version's when
// every member says it reads it (a member of an older version says
// nothing, read as format 1); otherwise the group stays where it is,
// which is logged, and the leader proposes only what it allows.
func (n *Node) raiseFormat(ctx context.Context, l leadership) {
	if l.rep.Format() >= raftstore.FormatVersion {
		return
	}
	m := l.raft.Members()
	ids := append(slices.Clone(m.Voters), m.Learners...)
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	reads := make([]int, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			info, err := l.raft.MemberInfo(pctx, id)
			reads[i], errs[i] = max(info.Format, 1), err
		})
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil || reads[i] < raftstore.FormatVersion {
			n.log.Info("the group's entry format stays until every member reads the newer one", "format", l.rep.Format(),
				"newer", raftstore.FormatVersion, "member", id, "member_reads", reads[i], "err", errs[i])
			return
		}
	}
	if err := l.rep.RaiseFormat(ctx); err != nil {
		n.log.Warn("raising the group's entry format", "format", raftstore.FormatVersion, "err", err)
	}
}

// clientGrace is how long a new leader waits for the clients of the
// previous one to come to it before it stops renewing their deliveries.
const clientGrace = 30 * time.Second

// releaseUnseen stops the automatic renewal of the deliveries of every
// client that has not come to this leader since it activated: it never
// saw the clients of the previous leader go away, and would otherwise
// renew their deliveries for hours (pop's renewal limit).
func (n *Node) releaseUnseen(ctx context.Context, l leadership) {
	if !l.broker.Active() {
		return
	}
	released := l.broker.ReleaseUnseen(ctx, func(id string) bool {
		_, ok := n.sess.LastSeen(id)
		return ok
	})
	if len(released) > 0 {
		n.log.Info("clients of an earlier leader did not come back: their deliveries are no longer renewed", "clients", released)
	}
}

// rotateKeys has the leader rotate the token key rings when they are due
// (keyRotation), and its services reload them.
func (n *Node) rotateKeys(ctx context.Context, l leadership) {
	if !l.broker.Active() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rotated, err := l.rep.RotateKeys(cctx, time.Now(), keyRotation)
	if err == nil && rotated {
		err = l.broker.ReloadKeys()
		n.log.Info("rotated the token keys")
	}
	if err != nil {
		n.log.Warn("rotating the token keys", "err", err)
	}
}

// routeLocal makes the relays hand connections to this member's servers.
func (n *Node) routeLocal() {
	n.route(true, peer.MemberInfo{})
	n.routedTo = 0
}

// routeNowhere makes the relays close what they routed and hold new
// connections (up to --leader-wait) until the next route.
func (n *Node) routeNowhere() {
	n.route(false, peer.MemberInfo{})
	n.routedTo = 0
}

// relayMember is a member that routes send clients to, and its
// listeners' addresses.
type relayMember struct {
	id   uint64
	info peer.MemberInfo
}

// relayMembers are the members routes name, in id order. Routes are
// answered by the leader (a follower's relay pipes every client
// connection to it), which names the voters it heard from within the
// last election timeout, itself excepted: clients then reach it through
// a follower's relay, so a leader that hangs stalls none of them beyond
// the election that replaces it (the relays close what they piped to it
// and pipe anew to the next leader), where a client connected to it
// directly would wait for as long as it hangs.
//
// A route names a majority of the voters all the same: when fewer
// followers were heard from (one is down or restarting, or raft's
// check-quorum has just cleared what it heard), the other followers
// whose addresses are known come next, then the leader itself. Clients
// keep a route for a while (the official ones ask again every 30 s) and
// cannot leave the members it names: every majority shares a member
// with every other, so whatever members die and come back meanwhile,
// while the group has a majority up to elect a leader, the route names
// one of them, whose relay reaches that leader. A route naming fewer (a
// follower alone, or the leader alone) leaves the client nowhere to go
// once those die, though the group serves on.
//
// A member that is not the leader (the moment between losing leadership
// and closing its listeners) names every voter.
func (n *Node) relayMembers(ctx context.Context) []relayMember {
	return pickRelayMembers(ctx, n.raft, uint64(n.cfg.NodeID), n.memberInfo())
}

// routeView is what relayMembers reads of the raft member (*peer.Node;
// an interface so that a test can drive it).
type routeView interface {
	Members() peer.Membership
	Status(ctx context.Context) (peer.Status, error)
	MemberInfo(ctx context.Context, id uint64) (peer.MemberInfo, error)
}

// pickRelayMembers is relayMembers for the member self (whose own
// listeners are own) of the group r sees.
func pickRelayMembers(ctx context.Context, r routeView, self uint64, own peer.MemberInfo) []relayMember {
	voters := slices.Clone(r.Members().Voters)
	slices.Sort(voters)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	st, err := r.Status(cctx)
	leading := err == nil && st.Progress != nil
	// Asked at once: a member that is down costs the wait once, not
	// once per member.
	all := make([]relayMember, len(voters))
	var wg sync.WaitGroup
	for i, id := range voters {
		wg.Go(func() {
			all[i].id = id
			if id == self {
				all[i].info = own
			} else if info, err := r.MemberInfo(cctx, id); err == nil {
				all[i].info = info
			}
		})
	}
	wg.Wait()
	all = slices.DeleteFunc(all, func(m relayMember) bool { return m.info == (peer.MemberInfo{}) })
	if !leading {
		if len(all) == 0 {
			return []relayMember{{id: self, info: own}}
		}
		return all
	}
	var heard, others []relayMember
	for _, m := range all {
		switch {
		case m.id == self:
		case st.Progress[m.id].RecentActive:
			heard = append(heard, m)
		default:
			others = append(others, m)
		}
	}
	majority := len(voters)/2 + 1
	out := heard
	if len(out) < majority {
		out = append(out, others[:min(len(others), majority-len(out))]...)
	}
	if len(out) < majority {
		out = append(out, relayMember{id: self, info: own})
	}
	slices.SortFunc(out, func(a, b relayMember) int { return cmp.Compare(a.id, b.id) })
	return out
}

// routeMembers are relayMembers' gRPC addresses (v2service routes).
func (n *Node) routeMembers(ctx context.Context) []v2service.RouteMember {
	var out []v2service.RouteMember
	for _, m := range n.relayMembers(ctx) {
		if m.info.GRPC != "" {
			out = append(out, v2service.RouteMember{ID: m.id, Addr: m.info.GRPC})
		}
	}
	return out
}

// remotingMembers are relayMembers' remoting addresses (classic routes).
func (n *Node) remotingMembers(ctx context.Context) []remoting.RouteMember {
	var out []remoting.RouteMember
	for _, m := range n.relayMembers(ctx) {
		if m.info.Remoting != "" {
			out = append(out, remoting.RouteMember{ID: m.id, Addr: m.info.Remoting})
		}
	}
	return out
}

// handoff moves leadership away before this member stops (SIGTERM), so
// the group keeps serving without waiting for an election timeout.
func (n *Node) handoff(ctx context.Context) error {
	if n.multiGroup() {
		return n.handoffGroups(ctx)
	}
	if n.raft == nil || !n.raft.IsLeader() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := n.raft.Handoff(cctx); err != nil {
		n.log.Warn("leadership handoff before stopping failed; the others elect a leader after the election timeout", "err", err)
	}
	return nil
}

// stagingDir is the store's staging setting: off for a replica, whose
// records are durable in the raft logs before the store writes them, and
// whose members may share a machine's /dev/shm.
func (n *Node) stagingDir() string {
	if n.cfg.Clustered() {
		return "off"
	}
	return n.cfg.StagingDir
}
