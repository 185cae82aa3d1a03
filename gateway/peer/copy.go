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

	"github.com/mqgate/mqgate/broker/raftstore"
	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// Copying a store to a member that fell behind (raft snapshots; see
// broker/raftstore's snapshot.go). CopyStore is a server stream: the
// request names the least applied index the copy must reach; the first
// chunk is the JSON of a raftstore.Checkpoint, then come the segments'
// bytes in order, in chunks of copyChunk.

const (
	copyChunk   = 1 << 20
	copyTimeout = 30 * time.Minute
	// maxCopyHeader bounds the checkpoint's JSON (the metadata files).
	maxCopyHeader = 512 << 20
)

// copyStore checkpoints this member's replica (on the raft loop) and
// sends it.
func (n *Node) copyStore(ctx context.Context, least uint64, send func([]byte) error) error {
	var cp raftstore.Checkpoint
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
// later and stages it (raftstore.Replica.StageCopy); it returns the copy's
// index.
func (n *Node) fetchCopy(ctx context.Context, from, least uint64) (uint64, error) {
	conn := n.tr.conn(from)
	if conn == nil {
		return 0, fmt.Errorf("peer: no connection to member %d", from)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := clusterv1.NewPeerServiceClient(conn).CopyStore(outgoing(WithToken(ctx, n.cfg.Token), n.cfg.ClusterID),
		&clusterv1.CopyStoreRequest{Least: least, Group: n.group}, grpc.MaxCallRecvMsgSize(maxCopyHeader))
	if err != nil {
		return 0, err
	}
	head, err := s.Recv()
	if err != nil {
		return 0, err
	}
	var cp raftstore.Checkpoint
	if err := json.Unmarshal(head.GetChunk(), &cp); err != nil {
		return 0, fmt.Errorf("peer: copy header: %w", err)
	}
	if cp.Index < least {
		return 0, fmt.Errorf("peer: member %d sent a copy at %d, below %d", from, cp.Index, least)
	}
	var pending []byte
	fill := func(sp raftstore.SegmentPart, w io.Writer) error {
		for left := sp.Length; left > 0; {
			if len(pending) == 0 {
				chunk, err := s.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						return fmt.Errorf("peer: the copy of segment %s ended %d bytes early", sp.Name, left)
					}
					return err
				}
				pending = chunk.GetChunk()
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
		return 0, err
	}
	if len(pending) > 0 {
		return 0, fmt.Errorf("peer: the copy carried %d bytes past its last segment", len(pending))
	}
	n.logger.Info("peer: staged a copy of another member's store", "from", from, "index", cp.Index, "log_end", cp.LogEnd, "segments", len(cp.Segments))
	return cp.Index, nil
}

// A snapshot message from the leader says this member lags behind the
// entries the leader keeps. It is not stepped into raft until this
// member has a copy of a store at its index or later (haveCopy): the
// copy is fetched in the background (runCopy), from the leader, failing
// that from another member, while the raft loop goes on (heartbeats
// answered, no election started). Then the message is stepped; raft's
// Ready carries the snapshot, installSnapshot records it in the WAL with
// the hard state, and the node stops with raftstore.ErrCopyStaged: the
// member must be restarted, and its replica then installs the copy and
// applies the entries after it. The copy is staged before the WAL names
// the snapshot, so a crash in between leaves a member whose store (the
// copy installed at the next open) is ahead of its raft log; a later
// snapshot at or below what its store holds is then recorded without a
// copy (recordSnapshot). A snapshot message whose copy cannot be had (no
// member holds its index) is dropped, and the member goes on.

// copyJob is a copy being fetched for a snapshot message.
type copyJob struct {
	index uint64
	from  uint64
	msg   *raftpb.Message
}

// copyRetry is how long after a failed fetch the next may start.
const copyRetry = time.Second

// haveCopy reports whether the snapshot message m may be stepped into
// raft: this member's store, or a copy staged, is at its index or past
// it. Otherwise it starts fetching a copy unless one is being fetched (or
// one failed within copyRetry), and m is dropped: the leader sends it
// again. Called by the raft loop.
func (n *Node) haveCopy(m *raftpb.Message) bool {
	idx := m.GetSnapshot().GetMetadata().GetIndex()
	if n.app.Applied() >= idx || (n.staged != 0 && n.staged >= idx) {
		return true
	}
	if n.copying != nil || time.Since(n.copyFailed) < copyRetry {
		return false
	}
	job := &copyJob{index: idx, from: m.GetFrom(), msg: m}
	n.copying = job
	n.bg.Add(1)
	go n.runCopy(job)
	return false
}

// runCopy fetches and stages a copy for job, then, on the raft loop,
// steps job's message (or records the failure).
func (n *Node) runCopy(job *copyJob) {
	defer n.bg.Done()
	n.logger.Warn("peer: this member fell behind the entries the leader keeps: copying a store", "snapshot_index", job.index, "applied", n.app.Applied())
	order := []uint64{job.from}
	for id := range n.book.dialable(n.cfg.NodeID) {
		if id != job.from {
			order = append(order, id)
		}
	}
	var staged uint64
	var errs []error
	for _, from := range order {
		ctx, cancel := context.WithTimeout(n.life, copyTimeout)
		idx, err := n.fetchCopy(ctx, from, job.index)
		cancel()
		if err == nil {
			staged = idx
			break
		}
		n.logger.Warn("peer: copying the store failed", "from", from, "err", err)
		errs = append(errs, fmt.Errorf("from member %d: %w", from, err))
		if n.life.Err() != nil {
			return
		}
	}
	_ = n.do(n.life, func() {
		n.copying = nil
		if staged == 0 {
			n.copyFailed = time.Now()
			n.logger.Warn("peer: no member sent a copy of its store for the snapshot: it is dropped, and taken again when the leader sends it",
				"snapshot_index", job.index, "err", errors.Join(errs...))
			return
		}
		n.staged = max(n.staged, staged)
		_ = n.rn.Step(job.msg)
	})
}

// installSnapshot records a raft snapshot whose copy is staged (haveCopy)
// in the WAL, with the hard state, and returns raftstore.ErrCopyStaged:
// the member must be restarted to install the copy. Called by the raft
// loop.
func (n *Node) installSnapshot(rd raft.Ready) error {
	snap := rd.Snapshot
	md := snap.GetMetadata()
	if n.staged < md.GetIndex() {
		return fmt.Errorf("peer: raft took a snapshot at %d without a copy of a store staged", md.GetIndex())
	}
	// The members' addresses as of the snapshot come before the WAL
	// names it: once it does, the changes that carried them are no
	// longer read from the log.
	if err := n.bookSaved(n.book.restore(snap.GetData()), fmt.Sprintf("the members of the raft snapshot at %d", md.GetIndex())); err != nil {
		return err
	}
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
	return raftstore.ErrCopyStaged
}

// recordSnapshot takes a raft snapshot at or below what this member's
// store holds (a copy installed before the raft log named it): it is
// recorded in the WAL and the memory storage, and the member goes on
// without a copy. Called by the raft loop, before the rest of the Ready.
func (n *Node) recordSnapshot(snap *raftpb.Snapshot) error {
	md := snap.GetMetadata()
	if err := n.bookSaved(n.book.restore(snap.GetData()), fmt.Sprintf("the members of the raft snapshot at %d", md.GetIndex())); err != nil {
		return err
	}
	if err := n.w.SaveSnapshot(&walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}); err != nil {
		return fmt.Errorf("peer: record the snapshot: %w", err)
	}
	if err := n.ms.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("peer: record the snapshot: %w", err)
	}
	n.snapIdx, n.cs = md.GetIndex(), md.GetConfState()
	n.confs = []confAt{{index: n.snapIdx, cs: n.cs}}
	n.setMembership(n.rn.Status().Config)
	n.tr.setPeers(n.book.dialable(n.cfg.NodeID))
	n.logger.Info("peer: recorded a snapshot the store already holds", "index", md.GetIndex(), "applied", n.app.Applied())
	return nil
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
