package raftstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Raft is the replicated log a Replica proposes its entries to (the
// raft node of gateway/peer).
type Raft interface {
	// Propose hands the group one entry, whose bytes build returns: it is
	// called once, on the raft node's loop as it takes the proposal into
	// the leader's log, so that the entry holds what was waiting then
	// (batch.go); nil means there is nothing to propose after all.
	// Propose returns once the leader took the entry into its log (or
	// build returned nil); *NotLeaderError if this node does not lead
	// (build is not called); ctx's error if it could not be handed over
	// in time (build is not called); any other error after build was
	// called means raft refused the entry. A term other than 0 is the
	// leader term the entry is for: a node leading in another term
	// refuses it as not leading (an error that is ErrNotLeader; build is
	// not called).
	Propose(ctx context.Context, term uint64, build func() []byte) error
	// ReadIndex returns once this node, leading, has applied every entry
	// committed before the call; *NotLeaderError if it does not lead,
	// ErrLeadershipLost if it stopped meanwhile.
	ReadIndex(ctx context.Context) error
}

// Options configure a Replica.
type Options struct {
	// Store configures the replica's store. Its SegmentSize and size
	// limits must be the same on every member. Its FlushMode is not used:
	// the store runs in async mode (doc.go, "Applied position and
	// crashes").
	Store storage.Options
	// StoreHost is written into the records this node proposes.
	StoreHost string
	// ClusterID, when set, must be the id the group was bootstrapped with
	// (MetaBootstrap); a member of another cluster stops at that entry.
	ClusterID string
	// CommitTimeout bounds how long an Append waits for its entry to
	// commit and apply (ctx bounds only the wait before raft takes the
	// entry). Default Store.FlushTimeout, else 5s.
	CommitTimeout time.Duration
	// PersistEvery is how many applied entries may follow the recorded
	// applied position (each one is applied again after a crash).
	// Default 4096.
	PersistEvery uint64
	Logger       *slog.Logger
	// Now is the clock for store times; nil: the system clock.
	Now func() time.Time
}

// Replica is one member's copy of the replicated store: a storage.Store
// written only by Apply, in raft-log order. See doc.go.
type Replica struct {
	dir    string
	opts   Options
	store  *storage.Store
	logger *slog.Logger
	fs     vfs.FS

	geo         geometry
	raft        atomic.Pointer[Raft]
	incarnation uint64 // proposer id of this process's entries
	seq         atomic.Uint64
	lastStamp   atomic.Int64

	mu sync.Mutex
	// waiters are the proposals of this process waiting for their
	// entry's outcome, by sequence number; each is called once, with mu
	// held, and must not block.
	waiters map[uint64]func(applyResult)

	// The group commit of appends (batch.go): the queue, whether the
	// proposer runs, and whether the replica is closed to new appends.
	gmu        sync.Mutex
	gqueue     []*appendReq
	gproposing bool
	gclosed    bool
	gwg        sync.WaitGroup

	uncertainMu sync.Mutex
	uncertain   uint64
	uncertainCh chan struct{} // closed at the next uncertain outcome

	// Owned by the applying goroutine (the raft loop).
	st           appliedState // applied so far
	persistedIdx uint64
	since        uint64

	applied   atomic.Uint64
	persisted atomic.Uint64
	failed    atomic.Pointer[error]
	closed    atomic.Bool

	// undecodable counts the committed entries applied as no-ops because
	// they do not decode (skipUndecodable); undecodableLogged is when one
	// was last logged (raft loop only).
	undecodable       atomic.Uint64
	undecodableLogged time.Time

	format atomic.Int64 // the group's entry format (format.go)

	// leading is set by MarkLeading and cleared by LeadershipLost: whether
	// every record applied since the mark is this member's own.
	leading atomic.Bool
	// fence is the leader term of the last MarkLeading (0: none): what
	// this member proposes, but for the changes other members forward,
	// is for that term alone (Raft.Propose), so that services built in
	// one term of its leadership write nothing in a later one, before
	// they are stopped.
	fence atomic.Uint64

	// appliedWaiting counts the WaitApplied calls waiting; onMeta is told
	// of each metadata change applied (OnMetaApplied).
	appliedWaiting atomic.Int32
	onMeta         atomic.Pointer[func(MetaOp)]

	// appliedMu guards appliedCh, closed (and replaced) at the next Apply
	// while some WaitApplied waits.
	appliedMu sync.Mutex
	appliedCh chan struct{}
}

type applyResult struct {
	res storage.AppendResult
	err error
	// index is the raft index the entry was applied at.
	index uint64
}

// OpenReplica opens the replica in dir (the store in dir/store, the
// applied position in dir/applied). The store's commit log is cut at the
// recorded position: the raft log supplies every entry after it again.
func OpenReplica(dir string, opts Options) (*Replica, error) {
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	opts.CommitTimeout = cmp.Or(opts.CommitTimeout, opts.Store.FlushTimeout, 5*time.Second)
	opts.PersistEvery = cmp.Or(opts.PersistEvery, 4096)
	// The raft logs are the durability point: an entry is answered once a
	// majority has it fsynced there. A store in sync mode would fsync it
	// again, on the raft loop, before the next entry applies; Persist
	// fsyncs the store before it records the applied position instead.
	opts.Store.FlushMode = storage.FlushAsync
	fs := opts.Store.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	installed, err := installStaged(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: install the staged copy of another member's store: %w", err)
	}
	if installed {
		opts.Logger.Info("cluster: installed the copy of another member's store")
	}
	st, err := readState(fs, filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	s, err := storage.OpenCut(filepath.Join(dir, "store"), opts.Store, st.logEnd)
	if err != nil {
		return nil, fmt.Errorf("cluster: open store at applied index %d: %w", st.index, err)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	d := opts.Store.Defaults()
	geo := geometry{segmentSize: d.SegmentSize, maxRecordSize: int32(d.MaxRecordSize), maxBodySize: int32(d.MaxBodySize)}
	r := &Replica{dir: dir, opts: opts, store: s, logger: opts.Logger, fs: fs, st: st, persistedIdx: st.index, geo: geo,
		incarnation: binary.BigEndian.Uint64(nonce[:]) | 1, waiters: map[uint64]func(applyResult){}, uncertainCh: make(chan struct{})}
	r.applied.Store(st.index)
	r.persisted.Store(st.index)
	r.format.Store(int64(st.format))
	r.lastStamp.Store(st.storeTime)
	return r, nil
}

// Attach sets the raft node the replica proposes to.
func (r *Replica) Attach(raft Raft) { r.raft.Store(&raft) }

// Store is the replica's store, for reads. Writing to it other than
// through Append breaks the replication.
func (r *Replica) Store() *storage.Store { return r.store }

// Applied is the index of the last raft entry applied to the store.
func (r *Replica) Applied() uint64 { return r.applied.Load() }

// Persisted is the applied index last recorded with an fsynced log: the
// raft log may be compacted up to it.
func (r *Replica) Persisted() uint64 { return r.persisted.Load() }

// Failed returns the error that stopped Apply, if any.
func (r *Replica) Failed() error {
	if p := r.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// stamp is the store time this node proposes: the clock, never earlier
// than what it proposed or applied before.
func (r *Replica) stamp() int64 {
	now := time.Now()
	if r.opts.Now != nil {
		now = r.opts.Now()
	}
	t := now.UnixMilli()
	for {
		last := r.lastStamp.Load()
		if t <= last {
			t = last
		}
		if r.lastStamp.CompareAndSwap(last, t) {
			return t
		}
	}
}

// Append replicates msgs as one commit-log batch: it proposes them, waits
// until the entry is committed (stored in a majority of the members'
// raft logs, each fsynced) and applied to this node's store, and returns
// the store's receipt. It never answers OK for a batch that is not
// committed. Errors: *NotLeaderError (ErrNotLeader), ErrLeadershipLost,
// ErrNoQuorum (nothing committed within CommitTimeout; uncertain when
// raft had taken the entry), ErrStopped, ctx's error (raft never took
// the entry), and the store's own ErrInvalid or ErrTooLarge (the entry
// is then skipped by every member). Concurrent Appends share entries
// (batch.go); each one's messages stay one contiguous batch.
func (r *Replica) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	if len(msgs) == 0 {
		return storage.AppendResult{}, fmt.Errorf("%w: no messages", storage.ErrInvalid)
	}
	size, err := entrySize(msgs, r.maxRecord())
	if err != nil {
		return storage.AppendResult{}, fmt.Errorf("cluster: append: %w", err)
	}
	if r.closed.Load() || r.Failed() != nil {
		return storage.AppendResult{}, ErrStopped
	}
	if r.raft.Load() == nil {
		return storage.AppendResult{}, fmt.Errorf("%w: no raft node attached", ErrStopped)
	}
	if size > maxMergedEntry {
		return r.appendAlone(ctx, msgs)
	}
	return r.appendQueued(ctx, msgs, size)
}

// appendAlone proposes msgs as an entry of their own.
func (r *Replica) appendAlone(ctx context.Context, msgs []*message.Message) (storage.AppendResult, error) {
	seq := r.seq.Add(1)
	data, err := encodeAppend(&appendEntry{proposer: r.incarnation, seq: seq, storeTime: r.stamp(), geo: r.geo, storeHost: r.opts.StoreHost, msgs: msgs}, r.maxRecord())
	if err != nil {
		return storage.AppendResult{}, fmt.Errorf("cluster: append: %w", err)
	}
	return r.propose(ctx, seq, data)
}

// awaitKey marks a context whose appends wait for their outcome
// (AwaitOutcome).
type awaitKey struct{}

// AwaitOutcome makes the appends and changes proposed with ctx wait,
// once raft has their entry, until it commits and applies or this member
// stops leading, past the commit timeout: the caller changes memory on
// the outcome (a broker service). While this member leads in the same
// term, an entry in its log commits once a majority stores it, so the
// wait ends with an outcome; only an entry still not committed after
// ctx's deadline is given up, and counted as uncertain (Uncertain).
func AwaitOutcome(ctx context.Context) context.Context {
	return context.WithValue(ctx, awaitKey{}, true)
}

// propose hands the entry data (carrying this process's incarnation and
// seq) to raft and waits for the answer its apply gives. Once raft has
// the entry, the wait heeds neither ctx's cancellation nor, unless ctx
// awaits the outcome (AwaitOutcome), anything but the commit timeout:
// an entry not committed then may still commit (ErrNoQuorum). With
// AwaitOutcome it lasts until the entry is applied, this member stops
// leading (ErrLeadershipLost) or ctx's deadline passes; the last leaves
// the outcome uncertain (Uncertain).
func (r *Replica) propose(ctx context.Context, seq uint64, data []byte) (storage.AppendResult, error) {
	res, err := r.proposeIndexed(ctx, seq, data, r.termFor(ctx))
	return res.res, err
}

// proposeIndexed is propose, for leader term term (0: any; see fence),
// answering the raft index the entry was applied at too.
func (r *Replica) proposeIndexed(ctx context.Context, seq uint64, data []byte, term uint64) (applyResult, error) {
	if r.closed.Load() || r.Failed() != nil {
		return applyResult{}, ErrStopped
	}
	rp := r.raft.Load()
	if rp == nil {
		return applyResult{}, fmt.Errorf("%w: no raft node attached", ErrStopped)
	}
	done := make(chan applyResult, 1)
	r.mu.Lock()
	r.waiters[seq] = func(res applyResult) {
		select {
		case done <- res:
		default:
		}
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiters, seq)
		r.mu.Unlock()
	}()
	await, _ := ctx.Value(awaitKey{}).(bool)
	var giveUp <-chan time.Time
	var stop func() bool
	if await {
		if dl, ok := ctx.Deadline(); ok {
			t := time.NewTimer(time.Until(dl))
			giveUp, stop = t.C, t.Stop
		}
	} else {
		t := time.NewTimer(r.opts.CommitTimeout)
		giveUp, stop = t.C, t.Stop
	}
	if stop != nil {
		defer stop()
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommitTimeout)
	defer cancel()
	if err := (*rp).Propose(cctx, term, func() []byte { return data }); err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return applyResult{}, fmt.Errorf("%w: %w", ErrNoQuorum, err)
		}
		return applyResult{}, err
	}
	select {
	case res := <-done:
		return res, res.err
	case <-giveUp:
		if await {
			r.markUncertain()
			return applyResult{}, fmt.Errorf("%w: not committed in time (it may still be)", ErrNoQuorum)
		}
		return applyResult{}, fmt.Errorf("%w: not committed within %v (it may still be)", ErrNoQuorum, r.opts.CommitTimeout)
	}
}

// ReadBarrier returns once this member, leading, has applied every
// entry committed before the call: a read of its store after it misses
// no write any leader answered before (see Raft.ReadIndex).
func (r *Replica) ReadBarrier(ctx context.Context) error {
	rp := r.raft.Load()
	if rp == nil {
		return fmt.Errorf("%w: no raft node attached", ErrStopped)
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommitTimeout)
	defer cancel()
	if err := (*rp).ReadIndex(cctx); err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrNoQuorum, err)
		}
		return err
	}
	return nil
}

// markUncertain records that an entry this member proposed to change
// memory on its outcome (AwaitOutcome) may or may not commit: what was
// built in memory from the outcomes of this member's proposals may be
// wrong, and must be built again from the store once the outcome is
// settled (a barrier applied after it).
func (r *Replica) markUncertain() {
	r.uncertainMu.Lock()
	r.uncertain++
	close(r.uncertainCh)
	r.uncertainCh = make(chan struct{})
	r.uncertainMu.Unlock()
}

// Uncertain counts the entries this member proposed with AwaitOutcome
// whose outcome it could not learn; UncertainChanges returns a
// channel closed at the next one. A leader that serves from memory built
// on its proposals' outcomes rebuilds it (from the store, after a
// barrier) when the count changes.
func (r *Replica) Uncertain() uint64 {
	r.uncertainMu.Lock()
	defer r.uncertainMu.Unlock()
	return r.uncertain
}

// UncertainChanges: see Uncertain.
func (r *Replica) UncertainChanges() <-chan struct{} {
	r.uncertainMu.Lock()
	defer r.uncertainMu.Unlock()
	return r.uncertainCh
}

// maxRecord is the largest record the group's store takes (its geometry's).
func (r *Replica) maxRecord() int { return int(r.geo.maxRecordSize) }

// MarkLeading records that this member leads in term and is about to
// build its memory of the group's state from its store (before the
// barrier of an activation): until LeadershipLost, every entry applied is
// one this member proposed or one committed before the barrier. From
// then on this member's proposals are for term only: if it loses the
// leadership and wins it again, what was built in term (a broker's
// services not stopped yet) can no longer write; the next MarkLeading
// lets the services built for the new term write.
func (r *Replica) MarkLeading(term uint64) {
	r.fence.Store(term)
	r.leading.Store(true)
}

// Fence is the leader term of the last MarkLeading (0: none).
func (r *Replica) Fence() uint64 { return r.fence.Load() }

// termKey marks a context whose appends and changes are for one leader
// term (ForTerm).
type termKey struct{}

// ForTerm makes what is appended or proposed with ctx for leader term
// term alone, whatever the last MarkLeading says: a broker's services,
// built in one term, write with it, so that a call that took them before
// they were stopped, and writes only after services of a later term were
// built, writes nothing. Term 0 leaves ctx as it is (its proposals are
// for the last MarkLeading's term).
func ForTerm(ctx context.Context, term uint64) context.Context {
	if term == 0 {
		return ctx
	}
	return context.WithValue(ctx, termKey{}, term)
}

// TermOf is the term ForTerm gave ctx, and whether it gave one.
func TermOf(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(termKey{}).(uint64)
	return t, ok
}

// termFor is the leader term what is proposed with ctx is for: its
// ForTerm, else the last MarkLeading's (fence).
func (r *Replica) termFor(ctx context.Context) uint64 {
	if t, ok := TermOf(ctx); ok {
		return t
	}
	return r.fence.Load()
}

// Leading reports whether this member has led without interruption since
// MarkLeading: memory built then reflects every record its store holds.
// The raft loop clears it (LeadershipLost) before it applies any entry of
// another leader, so a caller that reads a store position and then sees
// Leading true knows the position holds none.
func (r *Replica) Leading() bool { return r.leading.Load() }

// LeadershipLost fails every Append still waiting for its entry: the
// entries are not committed as far as this node knows, and may never be.
// The raft loop calls it when the node stops leading.
func (r *Replica) LeadershipLost() {
	r.leading.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	for seq, w := range r.waiters {
		w(applyResult{err: ErrLeadershipLost})
		delete(r.waiters, seq)
	}
}

// Apply applies the committed raft entry at index (data nil for entries
// that carry no batch: the leader's empty entries, configuration
// changes). Entries must come in index order; one already applied (a
// restart re-delivers what followed the recorded position only, but the
// raft log may start earlier) is skipped. An error wrapping ErrNoSpace
// means the disk had no room for the entry: nothing of it was applied,
// and the caller applies it again once there is room (a write that fails
// for lack of space changes nothing: see storage's Append and package
// meta). Any other error means the replica cannot go on (a write failed:
// the entry can be neither skipped nor applied later in its place); it
// stops, and the node must stop too. Called by the raft loop only.
func (r *Replica) Apply(index uint64, data []byte) error {
	if err := r.Failed(); err != nil {
		return err
	}
	if index <= r.st.index {
		return nil
	}
	if index != r.st.index+1 {
		return r.fail(fmt.Errorf("cluster: entry %d applied after %d: raft log gap", index, r.st.index))
	}
	if len(data) > 0 {
		if err := r.applyData(index, data); err != nil {
			err = fmt.Errorf("cluster: apply entry %d: %w", index, err)
			if errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("%w: %w", ErrNoSpace, err)
			}
			return r.fail(err)
		}
	}
	r.st.index = index
	r.applied.Store(index)
	if r.appliedWaiting.Load() > 0 {
		r.notifyApplied()
	}
	if r.since++; r.since >= r.opts.PersistEvery {
		if err := r.Persist(); err != nil && !errors.Is(err, ErrNoSpace) {
			return err
		}
	}
	return nil
}

func (r *Replica) applyData(index uint64, data []byte) error {
	kind, err := entryKind(data)
	if err != nil {
		r.skipUndecodable(index, err)
		return nil
	}
	switch kind {
	case kindAppend:
		return r.applyAppend(index, data)
	case kindMeta:
		e, err := decodeMeta(data)
		if err == nil && minFormat(&e.op) > r.Format() {
			err = fmt.Errorf("%w: %s needs format %d, the group is at %d", ErrBadEntry, e.op.Kind, minFormat(&e.op), r.Format())
		}
		if err != nil {
			r.skipUndecodable(index, err)
			return nil
		}
		res, opErr, err := r.applyMeta(e)
		if err != nil {
			return err
		}
		if f := r.onMeta.Load(); f != nil {
			(*f)(e.op)
		}
		r.answer(e.proposer, e.seq, applyResult{res: res, err: opErr, index: index})
		r.raiseStamp(e.storeTime)
		return nil
	default:
		r.skipUndecodable(index, fmt.Errorf("%w: unknown kind %d", ErrBadEntry, kind))
		return nil
	}
}

// undecodableLogEvery bounds how often an undecodable entry is logged.
const undecodableLogEvery = time.Minute

// skipUndecodable applies the committed entry at index, which does not
// decode, as a no-op: every member decodes the same bytes the same way,
// so every member skips it and the replicas stay identical, and the
// group keeps serving. The leader proposes only what its own encoders
// built, so such an entry was committed by a member of another version
// or came from outside; it is counted (Undecodable) and logged.
func (r *Replica) skipUndecodable(index uint64, err error) {
	n := r.undecodable.Add(1)
	if now := time.Now(); now.Sub(r.undecodableLogged) >= undecodableLogEvery {
		r.undecodableLogged = now
		r.logger.Error("cluster: a committed entry does not decode: applied as a no-op by every member", "index", index, "err", err, "undecodable_total", n)
	}
}

// Undecodable is how many committed entries were applied as no-ops
// because they did not decode.
func (r *Replica) Undecodable() uint64 { return r.undecodable.Load() }

func (r *Replica) applyAppend(index uint64, data []byte) error {
	e, err := decodeAppend(data, maxEntryRecord)
	if err != nil {
		r.skipUndecodable(index, err)
		return nil
	}
	if e.geo != r.geo {
		// Every member must write the same bytes: one that stored less
		// (or other offsets) than the others would serve other messages
		// if it led. It stops here, before this entry, and says how to
		// go on.
		return fmt.Errorf("the group's entries are written with segment size %d, max record %d, max body %d; this member's store has %d, %d, %d: "+
			"restart it with --segment-size %d and the same message size limits as the others (its raft log and store are kept, and it resumes at this entry)",
			e.geo.segmentSize, e.geo.maxRecordSize, e.geo.maxBodySize, r.geo.segmentSize, r.geo.maxRecordSize, r.geo.maxBodySize, e.geo.segmentSize)
	}
	st := storage.Stamp{StoreTime: max(e.storeTime, r.st.storeTime, 1), StoreHost: e.storeHost}
	res, err := r.store.AppendStamped(context.Background(), st, e.msgs...)
	switch {
	case err == nil:
		r.st.logEnd, r.st.storeTime = res.End, st.StoreTime
		// Committed: in a majority of fsynced raft logs, whatever this
		// store's own flush mode.
		res.Status, res.Durability = storage.StatusOK, storage.DurabilityLocal
	case errors.Is(err, storage.ErrInvalid) || errors.Is(err, storage.ErrTooLarge):
		// Decided by the bytes and the shared limits alone: every member
		// rejects it, nothing is written.
	default:
		return err
	}
	r.answer(e.proposer, e.seq, applyResult{res: res, err: err, index: index})
	r.raiseStamp(st.StoreTime)
	return nil
}

// answer hands an applied entry's outcome to the Append or ProposeMeta
// waiting for it, when this process proposed it.
func (r *Replica) answer(proposer, seq uint64, res applyResult) {
	if proposer != r.incarnation {
		return
	}
	r.mu.Lock()
	if w, ok := r.waiters[seq]; ok {
		w(res)
		delete(r.waiters, seq)
	}
	r.mu.Unlock()
}

// raiseStamp makes later proposals stamp no earlier than t (another
// leader's entries included).
func (r *Replica) raiseStamp(t int64) {
	for {
		last := r.lastStamp.Load()
		if t <= last || r.lastStamp.CompareAndSwap(last, t) {
			return
		}
	}
}

// Persist fsyncs the commit log and records the applied position (see
// doc.go); from then on the raft log up to Persisted may be compacted.
// Called by the raft loop only.
func (r *Replica) Persist() error {
	if err := r.Failed(); err != nil {
		return err
	}
	r.since = 0
	if r.st.index == r.persistedIdx {
		return nil
	}
	// Committed offsets live in memory until the metadata store flushes
	// them; the entries that set them are not applied again after this.
	if err := errors.Join(r.store.Sync(), r.store.Meta().Flush()); err != nil {
		return r.persistFailed(err)
	}
	if err := vfs.WriteFileAtomic(r.fs, filepath.Join(r.dir, stateFile), encodeState(r.st)); err != nil {
		return r.persistFailed(err)
	}
	r.persistedIdx = r.st.index
	r.persisted.Store(r.st.index)
	return nil
}

// persistFailed is a failed Persist: for lack of disk space the recorded
// position stays where it was (a crash then applies more entries again)
// and the next Persist tries again; anything else stops the replica.
func (r *Replica) persistFailed(err error) error {
	err = fmt.Errorf("cluster: persist applied position: %w", err)
	if errors.Is(err, syscall.ENOSPC) {
		r.logger.Warn("cluster: cannot record the applied position for lack of disk space; trying again later", "err", err)
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return r.fail(err)
}

func (r *Replica) fail(err error) error {
	r.failed.CompareAndSwap(nil, &err)
	r.logger.Error("cluster: replica stopped", "err", err)
	r.LeadershipLost()
	return err
}

// Close records the applied position and closes the store. The raft
// loop must have stopped.
func (r *Replica) Close(ctx context.Context) error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.stopQueue()
	r.LeadershipLost()
	r.notifyApplied()
	perr := r.Persist()
	return errors.Join(perr, r.store.Close(ctx))
}

// Abandon stops the replica as a killed process would leave it: no
// applied position recorded, the store not closed cleanly. For crash
// tests.
func (r *Replica) Abandon() {
	if r.closed.CompareAndSwap(false, true) {
		r.stopQueue()
		r.LeadershipLost()
		r.store.Abandon()
	}
}

// OnMetaApplied has f told of every metadata change this replica
// applies (whatever its outcome), in log order, on the raft loop: f must
// not block (a broker that forgets a deleted topic's state is told so
// through a queue of its own).
func (r *Replica) OnMetaApplied(f func(MetaOp)) { r.onMeta.Store(&f) }

// notifyApplied wakes the WaitApplied calls waiting. Called by the raft
// loop.
func (r *Replica) notifyApplied() {
	r.appliedMu.Lock()
	if r.appliedCh != nil {
		close(r.appliedCh)
		r.appliedCh = nil
	}
	r.appliedMu.Unlock()
}

// WaitApplied returns once this member has applied the raft entry at
// index (a change proposed through another member, whose leader answered
// that index: gateway/peer's ProposeAtLeader and LeaderReadIndex), or
// ctx ends, or the replica stops (ErrStopped).
func (r *Replica) WaitApplied(ctx context.Context, index uint64) error {
	r.appliedWaiting.Add(1)
	defer r.appliedWaiting.Add(-1)
	for {
		r.appliedMu.Lock()
		if r.appliedCh == nil {
			r.appliedCh = make(chan struct{})
		}
		ch := r.appliedCh
		r.appliedMu.Unlock()
		if r.Applied() >= index {
			return nil
		}
		if r.closed.Load() || r.Failed() != nil {
			return ErrStopped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("cluster: entry %d not applied here (applied %d): %w", index, r.Applied(), ctx.Err())
		}
	}
}
