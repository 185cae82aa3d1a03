package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
	"github.com/mqgate/mqgate/internal/clock"
)

// MemberInfo is where a member serves clients; an empty address is a
// listener the member does not run.
type MemberInfo struct {
	GRPC     string `json:"grpc,omitempty"`
	HTTP     string `json:"http,omitempty"`
	Remoting string `json:"remoting,omitempty"`
	// RemotingGreeting: the remoting listener reads a relay's greeting
	// ahead of a piped connection's frames (the address the client
	// dialled). A member of a version without it answers without the
	// field, so the others' relays send it none: to that member the
	// greeting would be a malformed frame.
	RemotingGreeting bool `json:"remoting_greeting,omitempty"`
	// Format is the newest raft entry format the member reads (its
	// raftstore.FormatVersion; absent, 0, from a version without formats:
	// 1). A leader raises the group's format only when every member
	// reads it.
	Format int `json:"format,omitempty"`
	// GRPCCertSHA256 is the SHA-256 of the certificate the gRPC listener
	// presents, in lowercase hex (CertFingerprint): a member forwarding a
	// client's request there checks it (empty from a version without
	// it).
	GRPCCertSHA256 string `json:"grpc_cert_sha256,omitempty"`
}

// CertFingerprint is MemberInfo.GRPCCertSHA256 of a certificate (DER).
func CertFingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func (m MemberInfo) toProto() *clusterv1.MemberInfo {
	return &clusterv1.MemberInfo{Grpc: m.GRPC, Http: m.HTTP, Remoting: m.Remoting, RemotingGreeting: m.RemotingGreeting, Format: int32(m.Format),
		GrpcCertSha256: m.GRPCCertSHA256}
}

func memberInfoOf(p *clusterv1.MemberInfo) MemberInfo {
	return MemberInfo{GRPC: p.GetGrpc(), HTTP: p.GetHttp(), Remoting: p.GetRemoting(), RemotingGreeting: p.GetRemotingGreeting(), Format: int(p.GetFormat()),
		GRPCCertSHA256: p.GetGrpcCertSha256()}
}

// memberInfoTTL is how long a member's answer to Info is used before it
// is asked again.
const memberInfoTTL = 10 * time.Second

type cachedInfo struct {
	info MemberInfo
	at   time.Time
}

func (n *Node) info() *clusterv1.InfoResponse {
	return &clusterv1.InfoResponse{Id: n.cfg.NodeID, Leader: n.lead.Load(), Info: n.cfg.Info.toProto(), NowUnixMs: wallClock.Now().UnixMilli(),
		DataGroups: uint32(n.groups), GroupReplicas: uint32(n.cfg.GroupReplicas)}
}

// wallClock is the clock the members compare (ClockOffset): the one the
// broker's deadlines are kept on.
var wallClock = clock.Process()

// ErrNoClock: a member of a version that does not report its clock.
var ErrNoClock = errors.New("peer: the member does not report its clock")

// ClockOffset measures how far member id's wall clock runs ahead of this
// member's (negative: behind), within ± uncertainty: half the round trip
// of the Info call that asked, and a millisecond of resolution.
func (n *Node) ClockOffset(ctx context.Context, id uint64) (offset, uncertainty time.Duration, err error) {
	conn := n.tr.conn(id)
	if conn == nil {
		return 0, 0, fmt.Errorf("peer: no member %d", id)
	}
	t0 := wallClock.Now()
	a, err := callInfo(WithToken(ctx, n.cfg.Token), conn, n.cfg.ClusterID)
	t1 := wallClock.Now()
	if err != nil {
		return 0, 0, fmt.Errorf("peer: clock of member %d: %w", id, err)
	}
	if a.GetNowUnixMs() == 0 {
		return 0, 0, fmt.Errorf("%w (member %d)", ErrNoClock, id)
	}
	mid := t0.Add(t1.Sub(t0) / 2)
	return time.UnixMilli(a.GetNowUnixMs()).Sub(mid), t1.Sub(t0)/2 + time.Millisecond, nil
}

// MemberInfo is member id's client addresses: this node's own from its
// Config, another member's from its answer to the Info method, kept for
// 10 seconds (ForgetMemberInfo drops it sooner).
func (n *Node) MemberInfo(ctx context.Context, id uint64) (MemberInfo, error) {
	if id == n.cfg.NodeID {
		return n.cfg.Info, nil
	}
	n.infoMu.Lock()
	c, ok := n.infos[id]
	n.infoMu.Unlock()
	if ok && time.Since(c.at) < memberInfoTTL {
		return c.info, nil
	}
	a, err := n.askInfo(ctx, id)
	if err != nil {
		return MemberInfo{}, err
	}
	info := memberInfoOf(a.GetInfo())
	n.infoMu.Lock()
	n.infos[id] = cachedInfo{info: info, at: time.Now()}
	n.infoMu.Unlock()
	return info, nil
}

// GroupLeader is a group's leader as a member knows it, and the member's
// raft term in the group: of two views, the one of the higher term is the
// newer.
type GroupLeader struct {
	Group, Leader, Term uint64
	// Voters are the group's voters as the member applied them last.
	Voters []uint64
}

// GroupLeaders asks member id for the leader of every group it hosts, as
// it knows them (not kept: each call asks).
func (n *Node) GroupLeaders(ctx context.Context, id uint64) ([]GroupLeader, error) {
	a, err := n.askInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]GroupLeader, 0, len(a.GetLeaders()))
	for _, l := range a.GetLeaders() {
		out = append(out, GroupLeader{Group: l.GetGroup(), Leader: l.GetLeader(), Term: l.GetTerm(), Voters: l.GetVoters()})
	}
	return out, nil
}

// askInfo calls member id's Info, checking that it answers as id.
func (n *Node) askInfo(ctx context.Context, id uint64) (*clusterv1.InfoResponse, error) {
	conn := n.tr.conn(id)
	if conn == nil {
		return nil, fmt.Errorf("peer: no member %d", id)
	}
	a, err := callInfo(WithToken(ctx, n.cfg.Token), conn, n.cfg.ClusterID)
	if err != nil {
		return nil, fmt.Errorf("peer: info of member %d at %s: %w", id, n.book.addr(id), err)
	}
	if a.GetId() != id {
		return nil, fmt.Errorf("peer: member %d's address %s answers as member %d", id, n.book.addr(id), a.GetId())
	}
	return a, nil
}

// ForgetMemberInfo drops what MemberInfo keeps of member id, so that the
// next call asks it again (after its addresses failed a client).
func (n *Node) ForgetMemberInfo(id uint64) {
	n.infoMu.Lock()
	delete(n.infos, id)
	n.infoMu.Unlock()
}

func callInfo(ctx context.Context, conn *grpc.ClientConn, clusterID string) (*clusterv1.InfoResponse, error) {
	return clusterv1.NewPeerServiceClient(conn).Info(outgoing(ctx, clusterID), &clusterv1.InfoRequest{})
}

func outgoing(ctx context.Context, clusterID string) context.Context {
	if tok, _ := ctx.Value(tokenKey{}).(string); tok != "" {
		return metadata.AppendToOutgoingContext(ctx, mdClusterID, clusterID, mdToken, tok)
	}
	return metadata.AppendToOutgoingContext(ctx, mdClusterID, clusterID)
}

// rpcError gives a node's error its gRPC code: not leading is
// FailedPrecondition naming the leader id.
func rpcError(err error) error {
	var nl *raftstore.NotLeaderError
	var bad *badRequestError
	switch {
	case errors.As(err, &bad), errors.Is(err, raftstore.ErrRefused):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &nl) && nl.LeaderID == 0:
		return status.Error(codes.FailedPrecondition, "peer: this member does not lead and knows no leader (an election may be under way)")
	case errors.As(err, &nl):
		return status.Errorf(codes.FailedPrecondition, "peer: this member does not lead; the leader is %d", nl.LeaderID)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, raftstore.ErrStopped), errors.Is(err, raftstore.ErrNoQuorum):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, raftstore.ErrLeadershipLost):
		return status.Error(codes.Aborted, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// dial connects to a member's peer address, with the TLS of ctx
// (WithTLS; plaintext without).
func dial(ctx context.Context, peerAddr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(peerAddr, append(DialWindows(), tlsFrom(ctx).dialOption())...)
	if err != nil {
		return nil, fmt.Errorf("peer: address %q: %w", peerAddr, err)
	}
	return conn, nil
}

// DialStatus asks the member at peerAddr (its peer address) for its
// Status of group 0; clusterID must be the member's cluster id.
func DialStatus(ctx context.Context, peerAddr, clusterID string) (Status, error) {
	return DialGroupStatus(ctx, peerAddr, clusterID, 0)
}

// DialGroupStatus is DialStatus of raft group g; when the member at
// peerAddr does not host g (replica sets), the first of the other members
// that does answers.
func DialGroupStatus(ctx context.Context, peerAddr, clusterID string, g uint64) (Status, error) {
	_, st, err := groupEntry(ctx, peerAddr, clusterID, g)
	return st, err
}

// groupEntry is the peer address of a member hosting group g, peerAddr
// when that member does (else the first of the others that does), and
// its Status of g.
func groupEntry(ctx context.Context, peerAddr, clusterID string, g uint64) (string, Status, error) {
	st, err := dialGroupStatus(ctx, peerAddr, clusterID, g)
	if g == 0 || status.Code(errors.Unwrap(err)) != codes.NotFound {
		return peerAddr, st, err
	}
	at, herr := hostOf(ctx, peerAddr, clusterID, g)
	if herr != nil {
		return "", Status{}, errors.Join(err, herr)
	}
	st, err = dialGroupStatus(ctx, at, clusterID, g)
	return at, st, err
}

// hostOf is the peer address of a member hosting group g, of those the
// member at peerAddr knows (group 0's voters), in id order.
func hostOf(ctx context.Context, peerAddr, clusterID string, g uint64) (string, error) {
	st, err := dialGroupStatus(ctx, peerAddr, clusterID, 0)
	if err != nil {
		return "", err
	}
	ids := slices.Clone(st.Voters)
	slices.Sort(ids)
	for _, id := range ids {
		addr := st.Peers[id]
		if addr == "" || addr == peerAddr {
			continue
		}
		if _, err := dialGroupStatus(ctx, addr, clusterID, g); err == nil {
			return addr, nil
		}
	}
	return "", fmt.Errorf("peer: no member the member at %s knows answers for group %d", peerAddr, g)
}

func dialGroupStatus(ctx context.Context, peerAddr, clusterID string, g uint64) (Status, error) {
	conn, err := dial(ctx, peerAddr)
	if err != nil {
		return Status{}, err
	}
	defer conn.Close()
	resp, err := clusterv1.NewPeerServiceClient(conn).Status(outgoing(ctx, clusterID), &clusterv1.StatusRequest{Group: g})
	if err != nil {
		return Status{}, fmt.Errorf("peer: status of %s: %w", peerAddr, err)
	}
	return statusOf(resp), nil
}

// DialTransfer asks the group that the member at peerAddr belongs to to
// hand the leadership to member to, and returns when to leads (as the
// leader saw it) or ctx ends. The request goes to the leader (atLeader).
func DialTransfer(ctx context.Context, peerAddr, clusterID string, to uint64) error {
	return DialGroupTransfer(ctx, peerAddr, clusterID, 0, to)
}

// DialGroupTransfer is DialTransfer of raft group g.
func DialGroupTransfer(ctx context.Context, peerAddr, clusterID string, g, to uint64) error {
	if g > 0 {
		if _, err := dialGroupStatus(ctx, peerAddr, clusterID, g); status.Code(errors.Unwrap(err)) == codes.NotFound {
			// Not hosted there (replica sets): enter through a member hosting it.
			if peerAddr, err = hostOf(ctx, peerAddr, clusterID, g); err != nil {
				return err
			}
		}
	}
	return atLeader(ctx, peerAddr, clusterID, g, func(addr string) error {
		return invoke(ctx, addr, clusterID, func(c clusterv1.PeerServiceClient, ctx context.Context) error {
			_, err := c.TransferLeadership(ctx, &clusterv1.TransferLeadershipRequest{To: to, Group: g})
			return err
		}, "transfer leadership to %d", to)
	})
}

// groupNote names group g in a message, when there are several.
func groupNote(groups int, g uint64) string {
	if groups > 1 {
		return fmt.Sprintf(" (data group %d)", g)
	}
	return ""
}

// atLeader runs call at peerAddr, then, while the member called answers
// FailedPrecondition (it does not lead group g), at the leader that
// member names (after its Status of g), up to leaderMoves times:
// leadership may move meanwhile (pausing between the hops after the
// second). A leader named that cannot be reached (Unavailable) may have
// died before the others noticed: the leader is looked up again, after a
// pause, until ctx ends (call must be one that may be made again, as a
// membership change is).
func atLeader(ctx context.Context, peerAddr, clusterID string, g uint64, call func(addr string) error) error {
	addr := peerAddr
	for moved := 0; ; {
		err := call(addr)
		ask := []string{addr, peerAddr}
		switch {
		case status.Code(err) == codes.FailedPrecondition && moved < leaderMoves && ctx.Err() == nil:
			// The leadership moves on (a handoff, then the balance may
			// move it again): after two quick hops, pause between them.
			if moved++; moved > 2 {
				t := time.NewTimer(leaderMovePause)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return err
				}
			}
		case status.Code(err) == codes.Unavailable && addr != peerAddr && ctx.Err() == nil:
			ask = []string{peerAddr}
			t := time.NewTimer(leaderGonePause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
		default:
			return err
		}
		leaderAddr, lerr := findLeader(ctx, clusterID, g, ask...)
		if lerr != nil {
			return fmt.Errorf("%w (and finding the leader failed: %w)", err, lerr)
		}
		addr = leaderAddr
	}
}

const (
	// leaderGonePause is how long atLeader waits before it looks for the
	// leader again when the one named cannot be reached.
	leaderGonePause = 250 * time.Millisecond
	// leaderMoves bounds how often atLeader follows the leadership to
	// another member; leaderMovePause is its pause between two after the
	// second.
	leaderMoves     = 20
	leaderMovePause = 100 * time.Millisecond
)

// findLeader asks the members at addrs, in turn, which member leads
// group g and where; it waits (within ctx) while none knows one.
func findLeader(ctx context.Context, clusterID string, g uint64, addrs ...string) (string, error) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		var errs []error
		for _, a := range addrs {
			st, err := DialGroupStatus(ctx, a, clusterID, g)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if st.Leader != 0 && st.Peers[st.Leader] != "" {
				return st.Peers[st.Leader], nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			if len(errs) > 0 {
				return "", errors.Join(errs...)
			}
			return "", fmt.Errorf("no member knows a leader: %w", ctx.Err())
		}
	}
}

func invoke(ctx context.Context, peerAddr, clusterID string, call func(clusterv1.PeerServiceClient, context.Context) error, what string, args ...any) error {
	conn, err := dial(ctx, peerAddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := call(clusterv1.NewPeerServiceClient(conn), outgoing(ctx, clusterID)); err != nil {
		return fmt.Errorf("peer: %s at %s: %w", fmt.Sprintf(what, args...), peerAddr, err)
	}
	return nil
}

type tokenKey struct{}

// WithToken makes the peer calls made with ctx (DialStatus, DialTransfer,
// DialAddMember, DialRemoveMember) carry the group's peer token
// (Config.Token).
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// badRequestError is a request naming no member, or one that cannot be
// asked for: InvalidArgument.
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}
