package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/gateway/v2service"
)

// groupsView is v2service.Groups over this member's data groups.
type groupsView struct {
	n *Node
	// self is this member; members the members whose gRPC address is
	// known, kept a second (membersTTL).
	self    v2service.RouteMember
	members atomic.Pointer[knownMembers]
}

type knownMembers struct {
	at time.Time
	ms []v2service.RouteMember
}

// membersTTL is how long groupsView keeps the members' addresses.
const membersTTL = time.Second

func newGroupsView(n *Node) *groupsView {
	return &groupsView{n: n, self: v2service.RouteMember{ID: uint64(n.cfg.NodeID), Addr: n.memberInfo().GRPC}}
}

var _ v2service.Groups = (*groupsView)(nil)

func (v *groupsView) Count() int { return len(v.n.groups) }

func (v *groupsView) Layout() placement.Layout { return v.n.layout() }

func (v *groupsView) LookupTopic(ctx context.Context, name string) (model.Topic, bool) {
	t, err := v.n.catalog.GetTopic(ctx, name)
	return t, err == nil
}

func (v *groupsView) Topic(ctx context.Context, name string) (model.Topic, error) {
	return v.n.catalog.Topic(ctx, name)
}

func (v *groupsView) Group(ctx context.Context, name string) (model.Group, error) {
	return v.n.catalog.Group(ctx, name)
}

// Serve waits, up to --leader-wait, while the group has no leader or
// this member leads it without serving it yet (activating). A member
// that has known no leader of a group it hosts for two election timeouts
// (longer than an election takes) does not wait: it is likely cut off
// from the group's other members, which may serve it meanwhile, and the
// client is told at once to retry (elsewhere) rather than held.
func (v *groupsView) Serve(ctx context.Context, g int) (v2service.Broker, v2service.RouteMember, error) {
	dg := v.n.groups[g]
	if dg.serving.Load() {
		return dg.broker, v2service.RouteMember{}, nil
	}
	self := uint64(v.n.cfg.NodeID)
	deadline := time.Now().Add(v.n.cfg.LeaderWait)
	wait := time.NewTimer(v.n.cfg.LeaderWait)
	defer wait.Stop()
	raft := v.n.groups[0].raft
	for {
		leads, serves := dg.leaderChanges(), dg.changes()
		if dg.serving.Load() {
			return dg.broker, v2service.RouteMember{}, nil
		}
		until := time.Until(deadline)
		if cut, ok := cutOffAt(dg); ok {
			if !time.Now().Before(cut) {
				return nil, v2service.RouteMember{}, mqerr.Errorf(mqerr.KindNoQuorum,
					"this member has known no leader of data group %d for %v (it may be cut off from the group's other members): retry", g,
					time.Since(dg.raft.LeaderlessSince()).Round(time.Millisecond))
			}
			until = min(until, time.Until(cut))
		}
		wait.Reset(max(until, 0))
		if lead := dg.leader(); lead != 0 && lead != self {
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := raft.MemberInfo(ictx, lead)
			cancel()
			if err == nil && info.GRPC != "" {
				return nil, v2service.RouteMember{ID: lead, Addr: info.GRPC}, nil
			}
		}
		select {
		case <-leads:
		case <-serves:
		case <-wait.C:
			if time.Now().Before(deadline) {
				continue // cut off now: answered at the top
			}
			return nil, v2service.RouteMember{}, mqerr.Errorf(mqerr.KindNoQuorum,
				"data group %d has no leader serving within %v (an election is under way, or a majority of the members is unreachable): retry", g, v.n.cfg.LeaderWait)
		case <-ctx.Done():
			return nil, v2service.RouteMember{}, mqerr.Wrap(mqerr.KindRequestTimeout, ctx.Err(), fmt.Sprintf("waiting for data group %d's leader", g))
		}
	}
}

// cutOffAt is when this member, knowing no leader of dg (a group it
// hosts), stops waiting for one: two election timeouts after it lost the
// last one. ok is false while it knows a leader, or does not host dg.
func cutOffAt(dg *dataGroup) (time.Time, bool) {
	if !dg.hosted() || dg.raft.Leader() != 0 {
		return time.Time{}, false
	}
	since := dg.raft.LeaderlessSince()
	if since.IsZero() {
		return time.Time{}, false
	}
	return since.Add(2 * dg.raft.ElectionTimeout()), true
}

func (v *groupsView) Served() []int {
	var out []int
	for _, dg := range v.n.groups {
		if dg.serving.Load() {
			out = append(out, dg.id)
		}
	}
	return out
}

// Leaders names, for a group without a known leader (or whose leader's
// address is not known), this member: it forwards what it does not
// serve, waiting for an election.
func (v *groupsView) Leaders(ctx context.Context) []v2service.RouteMember {
	self := v.Self()
	out := make([]v2service.RouteMember, len(v.n.groups))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	raft := v.n.groups[0].raft
	for g, dg := range v.n.groups {
		out[g] = self
		lead := dg.leader()
		if lead == 0 || lead == self.ID {
			continue
		}
		if info, err := raft.MemberInfo(cctx, lead); err == nil && info.GRPC != "" {
			out[g] = v2service.RouteMember{ID: lead, Addr: info.GRPC}
		}
	}
	return out
}

func (v *groupsView) Self() v2service.RouteMember { return v.self }

func (v *groupsView) Leads(id uint64) bool {
	for _, dg := range v.n.groups {
		if dg.leader() == id {
			return true
		}
	}
	return false
}

// Members asks the voters' addresses at once (each answer kept 10 s by
// the raft member), within a bound: a member down costs the wait once;
// the answer is kept membersTTL.
func (v *groupsView) Members(ctx context.Context) []v2service.RouteMember {
	if k := v.members.Load(); k != nil && time.Since(k.at) < membersTTL {
		return k.ms
	}
	ms := v.askMembers(ctx)
	v.members.Store(&knownMembers{at: time.Now(), ms: ms})
	return ms
}

func (v *groupsView) askMembers(ctx context.Context) []v2service.RouteMember {
	raft := v.n.groups[0].raft
	voters := slices.Clone(raft.Members().Voters)
	slices.Sort(voters)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	all := make([]v2service.RouteMember, len(voters))
	var wg sync.WaitGroup
	for i, id := range voters {
		wg.Go(func() {
			if info, err := raft.MemberInfo(cctx, id); err == nil {
				all[i] = v2service.RouteMember{ID: id, Addr: info.GRPC}
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(all, func(m v2service.RouteMember) bool { return m.Addr == "" })
}

func (v *groupsView) Conn(m v2service.RouteMember) (grpc.ClientConnInterface, error) {
	// The certificate m's listener must present, as m announced it over
	// the authenticated peer transport (cached there).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := v.n.groups[0].raft.MemberInfo(ctx, m.ID)
	if err != nil {
		return nil, mqerr.Wrap(mqerr.KindUnavailable, err, fmt.Sprintf("learning member %d's certificate", m.ID))
	}
	return v.n.fwd.conn(m.Addr, info.GRPCCertSHA256)
}

// Brokers is the broker of every group this member hosts.
func (v *groupsView) Brokers() []v2service.Broker {
	var out []v2service.Broker
	for _, dg := range v.n.hostedGroups() {
		out = append(out, dg.broker)
	}
	return out
}

// forwarder keeps a connection to each member's gRPC listener that
// requests were forwarded to. It dials with TLS (the listeners take TLS
// and plaintext on one port) and accepts only the certificate the member
// announced over the peer transport (MemberInfo.GRPCCertSHA256), which
// authenticates the members to each other: whatever listens at the
// address, only that member reads the client data forwarded. (The
// member serving a request authenticates the client again from the
// metadata forwarded.) A member of a version that announces no
// certificate is dialled with TLS unverified, as the official clients
// dial.
type forwarder struct {
	// mu guards the connections by address, and whether they are closed.
	mu     sync.Mutex
	conns  map[string]forwardConn
	closed bool
}

// forwardConn is a connection and the certificate fingerprint it checks.
type forwardConn struct {
	*grpc.ClientConn
	pin string
}

// maxForwarded bounds a request or answer forwarded (the listeners'
// own limits apply at both ends).
const maxForwarded = 256 << 20

// conn is the connection to addr, whose listener must present the
// certificate of SHA-256 pin (lowercase hex; empty: any).
func (f *forwarder) conn(addr, pin string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, mqerr.Errorf(mqerr.KindUnavailable, "the member is stopping")
	}
	if c, ok := f.conns[addr]; ok {
		if c.pin == pin {
			return c.ClientConn, nil
		}
		_ = c.Close() // the member restarted with another certificate
	}
	// Verification is by pin, not by names and a CA: members' listeners
	// often have self-signed certificates (mqgate's default).
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}} //nolint:gosec // verified by pin below
	if pin != "" {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || peer.CertFingerprint(cs.PeerCertificates[0].Raw) != pin {
				return fmt.Errorf("forwarding to %s: the listener there does not present the certificate its member announced", addr)
			}
			return nil
		}
	}
	c, err := grpc.NewClient(addr, append(peer.DialWindows(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxForwarded), grpc.MaxCallSendMsgSize(maxForwarded)))...)
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = map[string]forwardConn{}
	}
	f.conns[addr] = forwardConn{ClientConn: c, pin: pin}
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}
