package peer

import (
	"context"
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
	return s.t.svc.info(), nil
}

// hosted refuses a call for a group this member does not host.
func hosted(g uint64) error {
	if g != group {
		return status.Errorf(codes.NotFound, "peer: this member hosts no group %d", g)
	}
	return nil
}

func (s *peerServer) Status(ctx context.Context, req *clusterv1.StatusRequest) (*clusterv1.StatusResponse, error) {
	if err := hosted(req.GetGroup()); err != nil {
		return nil, err
	}
	st, err := s.t.svc.Status(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	return st.toProto(), nil
}

func (s *peerServer) TransferLeadership(ctx context.Context, req *clusterv1.TransferLeadershipRequest) (*clusterv1.TransferLeadershipResponse, error) {
	if err := hosted(req.GetGroup()); err != nil {
		return nil, err
	}
	if err := s.t.svc.TransferLeadership(ctx, req.GetTo()); err != nil {
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
	if err := s.t.svc.AddMember(ctx, req.GetId(), req.GetPeer()); err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.AddMemberResponse{}, nil
}

func (s *peerServer) RemoveMember(ctx context.Context, req *clusterv1.RemoveMemberRequest) (*clusterv1.RemoveMemberResponse, error) {
	if req.GetId() == 0 {
		return nil, status.Error(codes.InvalidArgument, "peer: remove member: the id must be above 0")
	}
	if err := s.t.svc.RemoveMember(ctx, req.GetId()); err != nil {
		return nil, rpcError(err)
	}
	return &clusterv1.RemoveMemberResponse{}, nil
}

func (s *peerServer) CopyStore(req *clusterv1.CopyStoreRequest, stream clusterv1.PeerService_CopyStoreServer) error {
	if err := hosted(req.GetGroup()); err != nil {
		return err
	}
	return s.t.svc.copyStore(stream.Context(), req.GetLeast(), func(b []byte) error {
		return stream.Send(&clusterv1.CopyStoreResponse{Chunk: b})
	})
}
