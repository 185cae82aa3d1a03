package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/broker/cluster"
)

// Copying a store to a member that fell behind (raft snapshots; see
// broker/cluster's snapshot.go). CopyStore is a server stream: the
// request names the least applied index the copy must reach; the first
// answer is the JSON of a cluster.Checkpoint, then come the segments'
// bytes in order, in chunks of copyChunk.

const (
	copyChunk   = 1 << 20
	copyTimeout = 30 * time.Minute
	// maxCopyHeader bounds the checkpoint's JSON (the metadata files).
	maxCopyHeader = 512 << 20
)

func (t *transport) serveCopy(stream grpc.ServerStream) error {
	var req wrapperspb.UInt64Value
	if err := t.decodeControl(stream.RecvMsg, &req); err != nil {
		return err
	}
	return t.svc.copyStore(stream.Context(), req.GetValue(), func(b []byte) error {
		return stream.SendMsg(wrapperspb.Bytes(b))
	})
}

// copyStore checkpoints this member's replica (on the raft loop) and
// sends it.
func (n *Node) copyStore(ctx context.Context, least uint64, send func([]byte) error) error {
	var cp cluster.Checkpoint
	var cerr error
	if err := n.do(ctx, func() { cp, cerr = n.app.Checkpoint() }); err != nil {
		return status.Errorf(codes.Unavailable, "peer: %v", err)
	}
	if cerr != nil {
		return status.Errorf(codes.Internal, "peer: checkpoint: %v", cerr)
	}
	if cp.Index < least {
		return status.Errorf(codes.FailedPrecondition, "peer: this member applied up to %d, the copy must reach %d", cp.Index, least)
	}
	head, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := send(head); err != nil {
		return err
	}
	buf := make([]byte, copyChunk)
	for _, sp := range cp.Segments {
		ra, c, err := n.app.OpenSegment(sp.Name)
		if err != nil {
			return status.Errorf(codes.Unavailable, "peer: segment %s: %v", sp.Name, err)
		}
		for off := int64(0); off < sp.Length; {
			k := int(min(int64(len(buf)), sp.Length-off))
			if _, err := ra.ReadAt(buf[:k], off); err != nil {
				c.Close()
				return status.Errorf(codes.Unavailable, "peer: segment %s: %v", sp.Name, err)
			}
			if err := send(buf[:k]); err != nil {
				c.Close()
				return err
			}
			off += int64(k)
		}
		c.Close()
	}
	n.logger.Info("peer: sent a copy of the store", "index", cp.Index, "log_end", cp.LogEnd, "segments", len(cp.Segments))
	return nil
}

// fetchCopy asks member from for a copy of its store at index least or
// later and stages it (cluster.Replica.StageCopy).
func (n *Node) fetchCopy(ctx context.Context, from, least uint64) error {
	conn := n.tr.conn(from)
	if conn == nil {
		return fmt.Errorf("peer: no connection to member %d", from)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	desc := &grpc.StreamDesc{StreamName: "CopyStore", ServerStreams: true}
	s, err := conn.NewStream(outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID), desc, copyMethod, grpc.MaxCallRecvMsgSize(maxCopyHeader))
	if err != nil {
		return err
	}
	if err := s.SendMsg(wrapperspb.UInt64(least)); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var head wrapperspb.BytesValue
	if err := s.RecvMsg(&head); err != nil {
		return err
	}
	var cp cluster.Checkpoint
	if err := json.Unmarshal(head.GetValue(), &cp); err != nil {
		return fmt.Errorf("peer: copy header: %w", err)
	}
	if cp.Index < least {
		return fmt.Errorf("peer: member %d sent a copy at %d, below %d", from, cp.Index, least)
	}
	var pending []byte
	fill := func(sp cluster.SegmentPart, w io.Writer) error {
		for left := sp.Length; left > 0; {
			if len(pending) == 0 {
				var chunk wrapperspb.BytesValue
				if err := s.RecvMsg(&chunk); err != nil {
					if errors.Is(err, io.EOF) {
						return fmt.Errorf("peer: the copy of segment %s ended %d bytes early", sp.Name, left)
					}
					return err
				}
				pending = chunk.GetValue()
				if len(pending) == 0 {
					return fmt.Errorf("peer: empty chunk in the copy of segment %s", sp.Name)
				}
			}
			k := min(int64(len(pending)), left)
			if _, err := w.Write(pending[:k]); err != nil {
				return err
			}
			pending, left = pending[k:], left-k
		}
		return nil
	}
	if err := n.app.StageCopy(cp, fill); err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("peer: the copy carried %d bytes past its last segment", len(pending))
	}
	n.logger.Info("peer: staged a copy of another member's store", "from", from, "index", cp.Index, "log_end", cp.LogEnd, "segments", len(cp.Segments))
	return nil
}

// installSnapshot handles a raft snapshot from the leader: this member
// lags behind the entries the leader keeps. It copies a store at the
// snapshot's index or later from the leader (or, failing that, another
// member), records the snapshot and the hard state in the WAL, and stops
// the node with cluster.ErrCopyStaged: the member must be restarted, and
// its replica then installs the copy and applies the entries after it.
// The copy is staged before the WAL names the snapshot, so a crash in
// between leaves a member that asks for the snapshot again. Called by
// the raft loop.
func (n *Node) installSnapshot(rd raft.Ready) error {
	snap := rd.Snapshot
	idx := snap.GetMetadata().GetIndex()
	n.logger.Warn("peer: this member fell behind the entries the leader keeps: copying a store", "snapshot_index", idx, "applied", n.app.Applied())
	order := []uint64{n.lead.Load()}
	for id := range n.book.dialable(n.cfg.NodeID) {
		if id != order[0] {
			order = append(order, id)
		}
	}
	var errs []error
	staged := false
	for _, from := range order {
		if from == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), copyTimeout)
		err := n.fetchCopy(ctx, from, idx)
		cancel()
		if err == nil {
			staged = true
			break
		}
		n.logger.Warn("peer: copying the store failed", "from", from, "err", err)
		errs = append(errs, fmt.Errorf("from member %d: %w", from, err))
	}
	if !staged {
		return fmt.Errorf("peer: no member sent a copy of its store at index %d or later: %w", idx, errors.Join(errs...))
	}
	// The members' addresses as of the snapshot come before the WAL
	// names it: once it does, the changes that carried them are no
	// longer read from the log.
	if err := n.book.restore(snap.GetData()); err != nil {
		return err
	}
	md := snap.GetMetadata()
	if err := n.w.SaveSnapshot(&walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}); err != nil {
		return fmt.Errorf("peer: record the snapshot: %w", err)
	}
	hs := rd.HardState
	if hs == nil || raft.IsEmptyHardState(hs) {
		cur, _, err := n.ms.InitialState()
		if err != nil {
			return err
		}
		hs = cur
	}
	hs = proto.Clone(hs).(*raftpb.HardState)
	if hs.GetCommit() < md.GetIndex() {
		hs.Commit = new(md.GetIndex())
	}
	if err := n.w.Save(hs, rd.Entries); err != nil {
		return fmt.Errorf("peer: record the snapshot's state: %w", err)
	}
	return cluster.ErrCopyStaged
}

// snapshotSent reports a snapshot message's fate to raft, on the raft
// loop: raft sends the member nothing more until it knows.
func (n *Node) snapshotSent(id uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.do(ctx, func() { n.rn.ReportSnapshot(id, st) })
	}()
}
