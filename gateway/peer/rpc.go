package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/broker/cluster"
)

// MemberInfo is where a member serves clients; an empty address is a
// listener the member does not run.
type MemberInfo struct {
	GRPC     string `json:"grpc,omitempty"`
	HTTP     string `json:"http,omitempty"`
	Remoting string `json:"remoting,omitempty"`
}

// infoAnswer is the Info method's answer, JSON in a BytesValue.
type infoAnswer struct {
	ID     uint64     `json:"id"`
	Leader uint64     `json:"leader"`
	Info   MemberInfo `json:"info"`
}

// memberInfoTTL is how long a member's answer to Info is used before it
// is asked again.
const memberInfoTTL = 10 * time.Second

type cachedInfo struct {
	info MemberInfo
	at   time.Time
}

func (n *Node) info() infoAnswer {
	return infoAnswer{ID: n.cfg.NodeID, Leader: n.lead.Load(), Info: n.cfg.Info}
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
	conn := n.tr.conn(id)
	if conn == nil {
		return MemberInfo{}, fmt.Errorf("peer: no member %d", id)
	}
	a, err := callInfo(WithToken(ctx, n.cfg.Token), conn, n.cfg.ClusterID)
	if err != nil {
		return MemberInfo{}, fmt.Errorf("peer: info of member %d at %s: %w", id, n.cfg.Peers[id], err)
	}
	if a.ID != id {
		return MemberInfo{}, fmt.Errorf("peer: member %d's address %s answers as member %d", id, n.cfg.Peers[id], a.ID)
	}
	n.infoMu.Lock()
	n.infos[id] = cachedInfo{info: a.Info, at: time.Now()}
	n.infoMu.Unlock()
	return a.Info, nil
}

// ForgetMemberInfo drops what MemberInfo keeps of member id, so that the
// next call asks it again (after its addresses failed a client).
func (n *Node) ForgetMemberInfo(id uint64) {
	n.infoMu.Lock()
	delete(n.infos, id)
	n.infoMu.Unlock()
}

func callInfo(ctx context.Context, conn *grpc.ClientConn, clusterID string) (infoAnswer, error) {
	var a infoAnswer
	out := new(wrapperspb.BytesValue)
	if err := conn.Invoke(outgoing(ctx, clusterID), infoMethod, new(emptypb.Empty), out); err != nil {
		return a, err
	}
	if err := json.Unmarshal(out.GetValue(), &a); err != nil {
		return a, fmt.Errorf("peer: info answer: %w", err)
	}
	return a, nil
}

func outgoing(ctx context.Context, clusterID string) context.Context {
	if tok, _ := ctx.Value(tokenKey{}).(string); tok != "" {
		return metadata.AppendToOutgoingContext(ctx, mdClusterID, clusterID, mdToken, tok)
	}
	return metadata.AppendToOutgoingContext(ctx, mdClusterID, clusterID)
}

func (t *transport) serveInfo(_ context.Context, _ *emptypb.Empty) (*wrapperspb.BytesValue, error) {
	return jsonValue(t.svc.info())
}

func (t *transport) serveStatus(ctx context.Context, _ *emptypb.Empty) (*wrapperspb.BytesValue, error) {
	st, err := t.svc.Status(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	return jsonValue(st)
}

func (t *transport) serveTransfer(ctx context.Context, to *wrapperspb.UInt64Value) (*emptypb.Empty, error) {
	if _, ok := t.cfg.Peers[to.GetValue()]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "peer: no member %d", to.GetValue())
	}
	if err := t.svc.TransferLeadership(ctx, to.GetValue()); err != nil {
		return nil, rpcError(err)
	}
	return new(emptypb.Empty), nil
}

func jsonValue(v any) (*wrapperspb.BytesValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "peer: %v", err)
	}
	return wrapperspb.Bytes(b), nil
}

// rpcError gives a node's error its gRPC code: not leading is
// FailedPrecondition naming the leader id.
func rpcError(err error) error {
	var nl *cluster.NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.LeaderID == 0:
		return status.Error(codes.FailedPrecondition, "peer: this member does not lead and knows no leader (an election may be under way)")
	case errors.As(err, &nl):
		return status.Errorf(codes.FailedPrecondition, "peer: this member does not lead; the leader is %d", nl.LeaderID)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, cluster.ErrStopped):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// dial connects to a member's peer address (no TLS: the peer network is
// trusted, see doc.go).
func dial(peerAddr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(peerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("peer: address %q: %w", peerAddr, err)
	}
	return conn, nil
}

// DialStatus asks the member at peerAddr (its peer address) for its
// Status; clusterID must be the member's cluster id.
func DialStatus(ctx context.Context, peerAddr, clusterID string) (Status, error) {
	var st Status
	conn, err := dial(peerAddr)
	if err != nil {
		return st, err
	}
	defer conn.Close()
	out := new(wrapperspb.BytesValue)
	if err := conn.Invoke(outgoing(ctx, clusterID), statusMethod, new(emptypb.Empty), out); err != nil {
		return st, fmt.Errorf("peer: status of %s: %w", peerAddr, err)
	}
	if err := json.Unmarshal(out.GetValue(), &st); err != nil {
		return st, fmt.Errorf("peer: status of %s: %w", peerAddr, err)
	}
	return st, nil
}

// DialTransfer asks the group that the member at peerAddr belongs to to
// hand the leadership to member to, and returns when to leads (as the
// leader saw it) or ctx ends. A member that does not lead answers
// FailedPrecondition; DialTransfer then asks it for its Status and sends
// the request once more, to the leader it names.
func DialTransfer(ctx context.Context, peerAddr, clusterID string, to uint64) error {
	err := callTransfer(ctx, peerAddr, clusterID, to)
	if status.Code(err) != codes.FailedPrecondition {
		return err
	}
	st, serr := DialStatus(ctx, peerAddr, clusterID)
	if serr != nil {
		return fmt.Errorf("%w (and finding the leader failed: %w)", err, serr)
	}
	leaderAddr := st.Peers[st.Leader]
	if st.Leader == 0 || leaderAddr == "" {
		return fmt.Errorf("%w (and the member knows no leader)", err)
	}
	if leaderAddr == peerAddr {
		return err
	}
	return callTransfer(ctx, leaderAddr, clusterID, to)
}

func callTransfer(ctx context.Context, peerAddr, clusterID string, to uint64) error {
	conn, err := dial(peerAddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Invoke(outgoing(ctx, clusterID), transferMethod, wrapperspb.UInt64(to), new(emptypb.Empty)); err != nil {
		return fmt.Errorf("peer: transfer leadership to %d at %s: %w", to, peerAddr, err)
	}
	return nil
}

type tokenKey struct{}

// WithToken makes the peer calls made with ctx (DialStatus, DialTransfer)
// carry the group's peer token (Config.Token).
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}
