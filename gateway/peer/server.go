package peer

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// peerServer serves mqgate.cluster.v1.PeerService on the peer address:
// the raft streams (transport.go) and the control calls, answered by the
// node (services). Calls reach it admitted (auth.go).
type peerServer struct {
	clusterv1.UnimplementedPeerServiceServer
	t *transport
}

func (s *peerServer) Raft(stream clusterv1.PeerService_RaftServer) error {
	return s.t.serveRaft(stream)
}

func (s *peerServer) Info(context.Context, *clusterv1.InfoRequest) (*clusterv1.InfoResponse, error) {
	resp := s.t.member().info()
	resp.Leaders = s.t.leaders()
	return resp, nil
}

// hosted is the node of group g, or the error refusing a call for a
// group this member does not host.
func (s *peerServer) hosted(g uint64) (services, error) {
	if svc := s.t.svc(g); svc != nil {
		return svc, nil
	}
	return nil, status.Errorf(codes.NotFound, "peer: this member hosts no group %d (%s)", g, s.t.hostedNote())
}

func (s *peerServer) Status(ctx context.Context, req *clusterv1.StatusRequest) (*clusterv1.StatusResponse, error) {
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	st, err := svc.Status(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	return st.toProto(), nil
}

func (s *peerServer) TransferLeadership(ctx context.Context, req *clusterv1.TransferLeadershipRequest) (*clusterv1.TransferLeadershipResponse, error) {
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	if err := svc.TransferLeadership(ctx, req.GetTo()); err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.TransferLeadershipResponse{}, nil
}

func (s *peerServer) AddMember(ctx context.Context, req *clusterv1.AddMemberRequest) (*clusterv1.AddMemberResponse, error) {
	if req.GetId() == 0 {
		return nil, status.Error(codes.InvalidArgument, "peer: add member: the id must be above 0")
	}
	if _, _, err := net.SplitHostPort(req.GetPeer()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "peer: add member %d: peer address %q: %v", req.GetId(), req.GetPeer(), err)
	}
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	if err := svc.AddMember(ctx, req.GetId(), req.GetPeer()); err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.AddMemberResponse{}, nil
}

func (s *peerServer) RemoveMember(ctx context.Context, req *clusterv1.RemoveMemberRequest) (*clusterv1.RemoveMemberResponse, error) {
	if req.GetId() == 0 {
		return nil, status.Error(codes.InvalidArgument, "peer: remove member: the id must be above 0")
	}
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	if err := svc.RemoveMember(ctx, req.GetId()); err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.RemoveMemberResponse{}, nil
}

func (s *peerServer) HostGroup(ctx context.Context, req *clusterv1.HostGroupRequest) (*clusterv1.HostGroupResponse, error) {
	g := req.GetGroup()
	switch {
	case g == 0 || g >= uint64(s.t.groupCount()):
		return nil, status.Errorf(codes.InvalidArgument, "peer: host group %d: not a data group of the %d", g, s.t.groupCount())
	case s.t.svc(g) != nil:
		return &clusterv1.HostGroupResponse{}, nil
	case s.t.cfg.HostGroup == nil:
		return nil, status.Errorf(codes.FailedPrecondition, "peer: host group %d: this member's data groups are on every member", g)
	}
	if err := s.t.cfg.HostGroup(ctx, g); err != nil {
		if errors.Is(err, ErrRestartToHost) {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, rpcError(err)
	}
	return &clusterv1.HostGroupResponse{}, nil
}

func (s *peerServer) CopyStore(req *clusterv1.CopyStoreRequest, stream clusterv1.PeerService_CopyStoreServer) error {
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return err
	}
	return svc.copyStore(stream.Context(), req.GetLeast(), func(b []byte) error {
		return stream.Send(&clusterv1.CopyStoreResponse{Chunk: b})
	})
}

func (s *peerServer) Propose(ctx context.Context, req *clusterv1.ProposeRequest) (*clusterv1.ProposeResponse, error) {
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	if len(req.GetChange()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "peer: propose: no change")
	}
	idx, err := svc.proposeForwarded(ctx, req.GetChange())
	if err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.ProposeResponse{Index: idx}, nil
}

func (s *peerServer) CheckTransaction(ctx context.Context, req *clusterv1.CheckTransactionRequest) (*clusterv1.CheckTransactionResponse, error) {
	if req.GetTopic() == "" || req.GetTransactionId() == "" || len(req.GetMessage()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "peer: check transaction: a topic, a transaction id and a message are needed")
	}
	id, sent, err := s.t.member().checkTransactionForwarded(ctx, req.GetTopic(), req.GetTransactionId(), req.GetMessage())
	if err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.CheckTransactionResponse{Sent: sent, ClientId: id}, nil
}

func (s *peerServer) ReadIndex(ctx context.Context, req *clusterv1.ReadIndexRequest) (*clusterv1.ReadIndexResponse, error) {
	svc, err := s.hosted(req.GetGroup())
	if err != nil {
		return nil, err
	}
	idx, err := svc.readIndexForwarded(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.ReadIndexResponse{Index: idx}, nil
}
