package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
)

// Replicator is the replica group a clustered broker writes through
// (broker/raftstore's Replica): message batches as entries, and metadata
// changes (topics, groups, committed offsets, topic deletions) as
// entries too, so that every member's store and metadata hold the same.
// Reads go to the local store, which only the replica's apply step
// writes.
type Replicator interface {
	Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error)
	ProposeMeta(ctx context.Context, op raftstore.MetaOp) (storage.AppendResult, error)
	// ReadBarrier returns once this member (leading) has applied every
	// entry committed before the call (raftstore.Replica.ReadBarrier).
	ReadBarrier(ctx context.Context) error
	// Fence is the leader term the member marked its replica with before
	// activating the broker (raftstore.Replica.MarkLeading; 0: none).
	Fence() uint64
}

// writes are the store and metadata as the services write them: the
// local ones on a single node, the replica group's in cluster mode.
type writes struct {
	// store is for the services that keep state in memory (POP, delay,
	// transactions, metadata): settledStore. sends is for plain message
	// batches, which change no memory: a send given up half way is
	// answered as such ("may still be stored") and a retry deduplicates.
	store storeWriter
	sends storeWriter
	meta  metadata.Store
	// drop removes a deleted topic's queues: the store's, or every data
	// group's (Catalog).
	drop    metadata.QueueDropper
	offsets offsetWriter
	// current returns once the local store holds every write answered
	// before the call (nil on a single node, whose store is the only
	// one): reads that must not miss what another leader committed
	// (offsets, pulls) call it first.
	current func(ctx context.Context) error
}

// forTerm is w with every write of the replica group marked for leader
// term term (raftstore.ForTerm): the writes of the services one
// activation builds, so that a call that took them and writes after they
// were stopped, when services of a later term serve, writes nothing.
// Catalog changes (another group's) are left as they are.
func (w writes) forTerm(term uint64) writes {
	if term == 0 {
		return w
	}
	out := w
	if rs, ok := w.sends.(replStore); ok {
		out.sends = termStore{storeWriter: rs, term: term}
		out.store = termStore{storeWriter: w.store, term: term}
	}
	if m, ok := w.meta.(replMeta); ok {
		m.term = term
		out.meta = m
	}
	if rs, ok := w.drop.(replStore); ok {
		out.drop = termStore{storeWriter: rs, term: term}
	}
	if o, ok := w.offsets.(replOffsets); ok {
		o.term = term
		out.offsets = o
	}
	return out
}

// termStore is a store whose appends and topic drops are for one leader
// term (writes.forTerm).
type termStore struct {
	storeWriter
	term uint64
}

func (s termStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	return s.storeWriter.Append(raftstore.ForTerm(ctx, s.term), msgs...)
}

func (s termStore) DeleteTopic(ctx context.Context, topic string) error {
	return s.storeWriter.DeleteTopic(raftstore.ForTerm(ctx, s.term), topic)
}

// readCurrent waits until reads from the local store are current (see
// writes.current).
func (w writes) readCurrent(ctx context.Context) error {
	if w.current == nil {
		return nil
	}
	return replicationError(w.current(ctx))
}

// storeWriter is the store with its writes: what pop, delay, txn,
// produce, offset and metadata need of it (deferred.Store is the widest
// of their views, with pop's look-ups of deletion records), and the
// deletion of a topic's queues.
type storeWriter interface {
	deferred.Store
	DeleteTopic(ctx context.Context, topic string) error
	ReadEntries(ents []storage.QueueEntry, msgs []*message.Message, errs []error)
	DispatchedUpTo() int64
	LastDeletion(topic string) (int64, error)
}

// offsetWriter is the committed-offset store.
type offsetWriter interface {
	CommitOffset(k metastore.OffsetKey, offset int64) (metastore.Durability, error)
	Offset(k metastore.OffsetKey) (int64, bool)
	Flush() error
}

func newWrites(st *storage.Store, r Replicator, cat Catalog) writes {
	if r == nil {
		return writes{store: settledStore{st}, sends: st, meta: st.Meta(), drop: st, offsets: localOffsets{st.Meta()}}
	}
	rs := replStore{Store: st, r: r}
	w := writes{store: settledStore{rs}, sends: rs, meta: replMeta{Store: st.Meta(), r: r}, drop: rs, offsets: replOffsets{Store: st.Meta(), r: r},
		current: r.ReadBarrier}
	if cat != nil {
		w.meta, w.drop = catalogMeta{c: cat}, catalogDrop{c: cat}
	}
	return w
}

// Catalog is where topics and consumer groups live in a cluster of
// several data groups: group 0's replica (the catalog), written through
// its leader wherever that is (gateway/node). A broker given one reads
// topics and groups from Meta, this member's replica of the catalog, and
// writes them with ProposeMeta, which answers once the change is applied
// to Meta; a deletion (a topic's or a group's, a topic's queues) is made
// in every data group. Sync returns once Meta holds every change
// committed before the call: asked before a name is taken for missing,
// so a topic created through one member is found through every other,
// and before a change decided on what Meta holds (a creation, a put), so
// a topic deleted through one member can be created again through
// another.
type Catalog interface {
	Meta() *metastore.Store
	ProposeMeta(ctx context.Context, op raftstore.MetaOp) (storage.AppendResult, error)
	Sync(ctx context.Context) error
}

// catalogSync bounds the catch-up of a lookup that missed.
const catalogSync = 2 * time.Second

// catalogMeta is a Catalog as the metadata service's store (and queue
// dropper).
type catalogMeta struct{ c Catalog }

func (m catalogMeta) propose(ctx context.Context, op raftstore.MetaOp) error {
	_, err := m.c.ProposeMeta(ctx, op)
	return replicationError(err)
}

func (m catalogMeta) PutTopic(t metastore.Topic) error {
	return m.propose(context.Background(), raftstore.MetaOp{Kind: raftstore.MetaPutTopic, Topic: &t})
}

func (m catalogMeta) DeleteTopic(name string) error {
	return m.propose(context.Background(), raftstore.MetaOp{Kind: raftstore.MetaDeleteTopic, Name: name})
}

func (m catalogMeta) PutGroup(g metastore.Group) error {
	return m.propose(context.Background(), raftstore.MetaOp{Kind: raftstore.MetaPutGroup, Group: &g})
}

func (m catalogMeta) DeleteGroup(name string) error {
	return m.propose(context.Background(), raftstore.MetaOp{Kind: raftstore.MetaDeleteGroup, Name: name})
}

// catalogDrop drops a deleted topic's queues in every data group.
type catalogDrop struct{ c Catalog }

func (d catalogDrop) DeleteTopic(ctx context.Context, topic string) error {
	return catalogMeta(d).propose(ctx, raftstore.MetaOp{Kind: raftstore.MetaDropQueues, Name: topic})
}

// Sync is metadata.Syncer: the catalog catches up before a change
// decided on what it holds (within catalogSync).
func (m catalogMeta) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, catalogSync)
	defer cancel()
	return replicationError(m.c.Sync(ctx))
}

// sync catches the catalog up before a miss is answered.
func (m catalogMeta) sync() {
	_ = m.Sync(context.Background()) // a catalog that cannot catch up answers what it holds
}

func (m catalogMeta) Topic(name string) (metastore.Topic, bool) {
	if t, ok := m.c.Meta().Topic(name); ok {
		return t, true
	}
	m.sync()
	return m.c.Meta().Topic(name)
}

func (m catalogMeta) Group(name string) (metastore.Group, bool) {
	if g, ok := m.c.Meta().Group(name); ok {
		return g, true
	}
	m.sync()
	return m.c.Meta().Group(name)
}

func (m catalogMeta) Topics() []metastore.Topic { return m.c.Meta().Topics() }
func (m catalogMeta) Groups() []metastore.Group { return m.c.Meta().Groups() }

// settleTimeout bounds an append that its caller no longer waits for.
const settleTimeout = time.Minute

// settledStore is the store as the services that keep state in memory
// write it: an append, once asked for, runs to its outcome whatever the
// caller's context does (within settleTimeout; a single node's flush
// timeout comes first), and a replica group's append waits for its
// entry to commit or for this member to stop leading, past the commit
// timeout (raftstore.AwaitOutcome). A service changes its memory (a
// delivery's generation, a delayed message's timer) only when the append
// says the record was written; an append given up half way could have
// written it all the same, leaving memory behind the store.
type settledStore struct{ storeWriter }

func (s settledStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	ctx, cancel := context.WithTimeout(raftstore.AwaitOutcome(context.WithoutCancel(ctx)), settleTimeout)
	defer cancel()
	return s.storeWriter.Append(ctx, msgs...)
}

// localOffsets is the metadata store's offsets, which cannot fail to
// record in memory.
type localOffsets struct{ *metastore.Store }

func (o localOffsets) CommitOffset(k metastore.OffsetKey, offset int64) (metastore.Durability, error) {
	return o.Store.CommitOffset(k, offset), nil
}

// replStore appends through the replica group and reads locally.
type replStore struct {
	*storage.Store
	r Replicator
}

func (s replStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	res, err := s.r.Append(ctx, msgs...)
	return res, replicationError(err)
}

func (s replStore) DeleteTopic(ctx context.Context, topic string) error {
	_, err := s.r.ProposeMeta(ctx, raftstore.MetaOp{Kind: raftstore.MetaDropQueues, Name: topic})
	return replicationError(err)
}

// replMeta changes topics and groups through the replica group; the
// metadata store's interface has no context, so each change is bounded by
// the replica's commit timeout alone.
type replMeta struct {
	*metastore.Store
	r    Replicator
	term uint64 // the leader term its changes are for (writes.forTerm; 0: the replica's mark)
}

func (m replMeta) propose(op raftstore.MetaOp) error {
	_, err := m.r.ProposeMeta(raftstore.ForTerm(context.Background(), m.term), op)
	return replicationError(err)
}

func (m replMeta) PutTopic(t metastore.Topic) error {
	return m.propose(raftstore.MetaOp{Kind: raftstore.MetaPutTopic, Topic: &t})
}

func (m replMeta) DeleteTopic(name string) error {
	return m.propose(raftstore.MetaOp{Kind: raftstore.MetaDeleteTopic, Name: name})
}

func (m replMeta) PutGroup(g metastore.Group) error {
	return m.propose(raftstore.MetaOp{Kind: raftstore.MetaPutGroup, Group: &g})
}

func (m replMeta) DeleteGroup(name string) error {
	return m.propose(raftstore.MetaOp{Kind: raftstore.MetaDeleteGroup, Name: name})
}

// replOffsets commits offsets through the replica group: committed
// there, an offset is in a majority of the members' fsynced raft logs.
type replOffsets struct {
	*metastore.Store
	r    Replicator
	term uint64 // as replMeta's
}

func (o replOffsets) CommitOffset(k metastore.OffsetKey, offset int64) (metastore.Durability, error) {
	if _, err := o.r.ProposeMeta(raftstore.ForTerm(context.Background(), o.term), raftstore.MetaOp{Kind: raftstore.MetaCommitOffset, OffsetKey: &k, Offset: offset}); err != nil {
		return metastore.DurabilityMemory, replicationError(err)
	}
	return metastore.DurabilityLocal, nil
}

// replicationError classifies the replica group's refusals; other errors
// (the store's) pass unchanged to the callers' own classification.
func replicationError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftstore.ErrLeadershipLost):
		return mqerr.Wrap(mqerr.KindReplicationLost, err, "this member stopped leading its replica group before the write committed; retry")
	case errors.Is(err, raftstore.ErrNoQuorum):
		return mqerr.Wrap(mqerr.KindNoQuorum, err, "no majority of the replica group stored the write in time; it may still be stored once a majority is back (the message id identifies it if retried)")
	case errors.Is(err, raftstore.ErrNotLeader):
		// A deposed leader that has not closed its connections yet (it
		// learns it was deposed, or resumes after a freeze): nothing was
		// proposed. The leader changed meanwhile, as for
		// ErrLeadershipLost: clients retry, and reconnect through a
		// relay to the new leader.
		return mqerr.Wrap(mqerr.KindReplicationLost, err, "this member no longer leads its replica group; nothing was stored: retry")
	case errors.Is(err, raftstore.ErrStopped):
		return mqerr.Wrap(mqerr.KindNoQuorum, err, "this member stopped replicating; nothing was stored: retry")
	}
	return err
}

// CatalogService is the metadata service of a cluster of several data
// groups as a whole (its topics and groups in c), for the listeners'
// lookups and the admin API's changes while no broker of this member is
// active: auto-create as cfg says, and dead-letter topics with a queue
// per group of cfg.Placement.
func CatalogService(cfg Config, c Catalog) *metadata.Service {
	b := &Broker{cfg: cfg}
	if b.cfg.Clock == nil {
		b.cfg.Clock = clock.Real{}
	}
	if b.cfg.Logger == nil {
		b.cfg.Logger = slog.Default()
	}
	return metadata.New(b.metaConfig(), catalogMeta{c: c}, catalogDrop{c: c})
}

// ForgetTopic drops what the live services keep in memory of a deleted
// topic (its POP subscriptions, its lite topics), when the deletion was
// made through another group's broker (a cluster of several data groups
// applies it to every group; see Catalog). A broker in standby keeps
// nothing.
func (b *Broker) ForgetTopic(topic string) {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	if !b.active.Load() {
		return
	}
	s := b.s()
	s.pop.DropTopic(topic)
	s.lite.DropTopic(topic)
}

// ForgetGroup drops what the live services keep in memory of a deleted
// consumer group (see ForgetTopic).
func (b *Broker) ForgetGroup(group string) {
	b.actMu.Lock()
	defer b.actMu.Unlock()
	if !b.active.Load() {
		return
	}
	b.s().pop.DropGroup(group)
}
