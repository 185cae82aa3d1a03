package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// Changes proposed through a member that does not lead, and reads that
// must see every change committed: a member hosting several groups
// writes the catalog (group 0) wherever its leader is (Propose), and
// catches its own replica up with the leader's before it trusts a miss
// (ReadIndex).

// ForwardedProposer is an Applier that takes the changes other members
// propose through its leader (Propose): ProposeForwarded proposes change
// as this member's own, while it leads, and returns once it is applied
// here, with the raft index it was applied at. change is what the
// proposing member sent: it is checked like any input.
type ForwardedProposer interface {
	ProposeForwarded(ctx context.Context, change []byte) (uint64, error)
}

// proposeForwarded answers Propose.
func (n *Node) proposeForwarded(ctx context.Context, change []byte) (uint64, error) {
	fp, ok := n.app.(ForwardedProposer)
	if !ok {
		return 0, badRequest("peer: group %d takes no changes proposed through other members", n.group)
	}
	if !n.isLeader.Load() {
		return 0, n.notLeader()
	}
	idx, err := fp.ProposeForwarded(ctx, change)
	if err == nil {
		// The member that sent it waits to apply it: the commit index
		// goes to the followers now, not with the next append (sendAll).
		_ = n.do(ctx, n.sendHeld)
	}
	return idx, err
}

// readIndexForwarded answers ReadIndex: once this member, leading, has
// applied every entry committed before the call, its applied index.
func (n *Node) readIndexForwarded(ctx context.Context) (uint64, error) {
	if err := n.ReadIndex(ctx); err != nil {
		return 0, err
	}
	return n.app.Applied(), nil
}

// ProposeAtLeader hands change to the group's leader (its Applier a
// ForwardedProposer; this member's own when it leads) and returns the
// raft index it was applied at there. It waits for a leader within ctx,
// and follows the leadership when it moves while asking. Errors: ctx's,
// *raftstore.NotLeaderError (no leader took it), raftstore.ErrNoQuorum (the
// leader did not answer, or answered that it could not commit it in
// time: the change may still be applied), raftstore.ErrLeadershipLost (the
// leader lost its leadership before the change committed; it may still
// commit), or the leader's refusal of the change.
func (n *Node) ProposeAtLeader(ctx context.Context, change []byte) (uint64, error) {
	return n.atLeader(ctx, func() (uint64, error) { return n.proposeForwarded(ctx, change) },
		func(c clusterv1.PeerServiceClient, cctx context.Context) (uint64, error) {
			resp, err := c.Propose(cctx, &clusterv1.ProposeRequest{Group: n.group, Change: change})
			return resp.GetIndex(), err
		})
}

// LeaderReadIndex asks the group's leader (this member, when it leads)
// for an index at or past every entry committed before the call: once
// this member has applied it, its replica misses no change committed
// before. Errors as ProposeAtLeader's.
func (n *Node) LeaderReadIndex(ctx context.Context) (uint64, error) {
	return n.atLeader(ctx, func() (uint64, error) { return n.readIndexForwarded(ctx) },
		func(c clusterv1.PeerServiceClient, cctx context.Context) (uint64, error) {
			resp, err := c.ReadIndex(cctx, &clusterv1.ReadIndexRequest{Group: n.group})
			return resp.GetIndex(), err
		})
}

// atLeader calls local when this member leads the group, remote on the
// leader otherwise, again (a few times) when the member asked no longer
// leads.
func (n *Node) atLeader(ctx context.Context, local func() (uint64, error),
	remote func(clusterv1.PeerServiceClient, context.Context) (uint64, error)) (uint64, error) {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(n.cfg.TickInterval)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return 0, fmt.Errorf("%w (last: %w)", ctx.Err(), last)
			}
		}
		if err := n.waitLeader(ctx); err != nil {
			return 0, err
		}
		lead := n.lead.Load()
		var idx uint64
		var err error
		if lead == n.cfg.NodeID {
			idx, err = local()
		} else if conn := n.tr.conn(lead); conn == nil {
			err = fmt.Errorf("peer: no connection to member %d", lead)
		} else if ready, werr := n.awaitReady(ctx, lead, conn); werr != nil {
			return 0, werr
		} else if !ready {
			attempt-- // the leadership moved before anything was sent
			continue
		} else {
			idx, err = remote(clusterv1.NewPeerServiceClient(conn), outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID))
			err = fromRPC(lead, err)
		}
		if err == nil {
			return idx, nil
		}
		var nl *raftstore.NotLeaderError
		if !errors.As(err, &nl) {
			return 0, err
		}
		last = err
	}
	return 0, last
}

// ProposeAtMember hands change to member id as group g's leader, for a
// group this member does not host (ProposeAtLeader for one it hosts), and
// returns the raft index it was applied at there. Errors as
// ProposeAtLeader's; *raftstore.NotLeaderError when id does not lead g.
func (n *Node) ProposeAtMember(ctx context.Context, id, g uint64, change []byte) (uint64, error) {
	conn := n.tr.conn(id)
	if conn == nil {
		return 0, fmt.Errorf("peer: no connection to member %d", id)
	}
	resp, err := clusterv1.NewPeerServiceClient(conn).Propose(outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID),
		&clusterv1.ProposeRequest{Group: g, Change: change})
	if err != nil {
		return 0, fromRPC(id, err)
	}
	return resp.GetIndex(), nil
}

// awaitReady waits until conn, the connection to lead, is ready to carry
// a call (true), or this member learns of another leader or none
// (false). A call made on a connection that is not ready fails as soon
// as the connection does, without being sent, which cannot be told from
// a call the leader took and could not answer: so a change is sent only
// on a ready connection, and while the leader this member knows is down
// (killed, its connection failing) it waits for the next leader instead
// of failing during the election.
func (n *Node) awaitReady(ctx context.Context, lead uint64, conn *grpc.ClientConn) (bool, error) {
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return true, nil
		}
		if n.lead.Load() != lead {
			return false, nil
		}
		if st == connectivity.Idle {
			conn.Connect()
		}
		wctx, cancel := context.WithTimeout(ctx, n.cfg.TickInterval)
		conn.WaitForStateChange(wctx, st)
		cancel()
		select {
		case <-n.done:
			return false, n.stoppedErr()
		case <-ctx.Done():
			return false, fmt.Errorf("peer: leader %d unreachable (%s): %w", lead, st, ctx.Err())
		default:
		}
	}
}

// fromRPC gives a peer call's error (rpcError's codes) the cluster error
// it stands for.
func fromRPC(member uint64, err error) error {
	if err == nil {
		return nil
	}
	st, _ := status.FromError(err)
	msg := fmt.Sprintf("member %d: %s", member, st.Message())
	switch st.Code() {
	case codes.FailedPrecondition:
		return &raftstore.NotLeaderError{}
	case codes.Aborted:
		return fmt.Errorf("%w: %s", raftstore.ErrLeadershipLost, msg)
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w: %s", raftstore.ErrNoQuorum, msg)
	case codes.Canceled:
		return fmt.Errorf("%w: %s", context.Canceled, msg)
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", raftstore.ErrRefused, msg)
	}
	return errors.New(msg)
}

// TransactionChecker passes a transaction check on to a producer whose
// control stream this member holds (CheckTransactionAt's far end): msg
// is the half message as another member encoded it, checked like any
// input. It reports the producer's client id, or sent false when this
// member holds no stream of a producer of topic.
type TransactionChecker func(ctx context.Context, topic, txID string, msg []byte) (clientID string, sent bool, err error)

// SetTransactionChecker installs the checker CheckTransaction calls
// answer with (nil: none; the calls are then answered not sent).
func (n *Node) SetTransactionChecker(f TransactionChecker) {
	if f == nil {
		n.txChecker.Store(nil)
		return
	}
	n.txChecker.Store(&f)
}

func (n *Node) checkTransactionForwarded(ctx context.Context, topic, txID string, msg []byte) (string, bool, error) {
	f := n.txChecker.Load()
	if f == nil {
		return "", false, nil
	}
	id, sent, err := (*f)(ctx, topic, txID, msg)
	if err != nil {
		// The checker fails only on what it was sent.
		return "", false, badRequest("peer: check transaction: %v", err)
	}
	return id, sent, nil
}

// CheckTransactionAt asks member id to pass a transaction check on to a
// producer of topic whose control stream it holds (its
// TransactionChecker); sent false when it holds none.
func (n *Node) CheckTransactionAt(ctx context.Context, id uint64, topic, txID string, msg []byte) (string, bool, error) {
	conn := n.tr.conn(id)
	if conn == nil {
		return "", false, fmt.Errorf("peer: no connection to member %d", id)
	}
	resp, err := clusterv1.NewPeerServiceClient(conn).CheckTransaction(outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID),
		&clusterv1.CheckTransactionRequest{Topic: topic, TransactionId: txID, Message: msg})
	if err != nil {
		return "", false, fromRPC(id, err)
	}
	return resp.GetClientId(), resp.GetSent(), nil
}
