package peer

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/broker/raftstore"
)

// Applier is the state machine the node feeds committed entries to
// (*raftstore.Replica).
type Applier interface {
	// Applied is the last applied index (the node resumes after it).
	Applied() uint64
	// Apply applies the committed entry at index; data is nil for
	// entries without a payload. An error stops the node, except one
	// wrapping raftstore.ErrNoSpace: nothing of the entry was applied, and
	// the node applies it again once there is room (awaitSpace).
	Apply(index uint64, data []byte) error
	// Persisted is the applied index whose effects are durable: the raft
	// log may be compacted up to it.
	Persisted() uint64
	// LeadershipLost is called when the node stops leading.
	LeadershipLost()
	// Checkpoint, OpenSegment and StageCopy copy a store to a member that
	// fell behind (copy.go): Checkpoint is called by the raft loop only,
	// StageCopy by one goroutine at a time.
	Checkpoint() (raftstore.Checkpoint, error)
	OpenSegment(name string) (io.ReaderAt, io.Closer, error)
	StageCopy(cp raftstore.Checkpoint, fill func(raftstore.SegmentPart, io.Writer) error) error
}

// Config configures a Node.
type Config struct {
	ClusterID string
	NodeID    uint64
	// Peers maps member ids to the peer addresses this member dials
	// (members.go), this node's own included: its transport listens
	// there. A new group is bootstrapped with exactly these members,
	// unless Join is set.
	Peers map[uint64]string
	// Join: a new member (no raft log yet) waits to be added to a running
	// group (AddMember on its leader) instead of bootstrapping one.
	Join bool
	// MembersFile keeps the members' replicated addresses (members.go);
	// default "members.json" beside WALDir.
	MembersFile string
	// Token, when set, is a secret every peer call must carry (members
	// of one group share it); calls without it are refused.
	Token string
	// TLS, when set, is mutual TLS between members (tls.go): the peer
	// listener serves with it and requires a client certificate of its
	// CA, and every connection to a member is made with it. Nil:
	// plaintext. Token, TLS or both must be set: Start refuses a member
	// that would admit anyone (ErrNoPeerAuth).
	TLS *TLS
	// WALDir holds the raft log (etcd's WAL).
	WALDir string
	// Listener, if set, is used instead of listening on Peers[NodeID].
	Listener net.Listener
	// HandshakeTimeout closes a peer connection that has not finished its
	// TLS handshake and HTTP/2 preface by then (default 10s).
	HandshakeTimeout time.Duration
	// TickInterval is the raft tick (default 100ms); an election timeout
	// is ElectionTicks (default 10) ticks, a heartbeat HeartbeatTicks
	// (default 1).
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEvery: the raft log is compacted when the applier's
	// persisted index has advanced this far since the last compaction
	// (default 8192); KeepEntries entries below it are kept in memory
	// for followers that lag (default 8192).
	SnapshotEvery uint64
	KeepEntries   uint64
	// Info is where this member serves clients, answered to the other
	// members' MemberInfo.
	Info MemberInfo
	// GroupReplicas is how many members each group but the first has
	// replicas on, when not every member hosts every group (0: every
	// member does). In such a cluster a member added takes replicas from
	// others (DialAddMember), one is replaced (DialReplaceMember), and one
	// removed has its replicas moved off first (DialRemoveMember).
	GroupReplicas int
	// HostGroup, set by a member of such a cluster, answers the peer
	// HostGroup call: it opens an empty replica of data group g and starts
	// its raft member (Node.StartGroup on group 0's node), for the group's
	// leader to add it. Nil: the call is refused.
	HostGroup func(ctx context.Context, g uint64) error
	Logger    *slog.Logger
}

const (
	maxWALFiles      = 5
	walPurgeInterval = 30 * time.Second
)

// Node is this member of the raft group: a raft.RawNode driven by one
// goroutine, the WAL, and the peer transport.
type Node struct {
	cfg Config
	// group is the raft group this node is of, among groups the member
	// hosts (StartGroups); host is what they share.
	group  uint64
	groups int
	host   *host
	logger *slog.Logger
	app    Applier
	rn     *raft.RawNode
	ms     *raft.MemoryStorage
	w      *wal.WAL
	tr     *transport
	cs     *raftpb.ConfState
	// confs: raft loop only. The configurations applied, by the index
	// that made each, oldest first, back to the newest at or below the
	// last raft snapshot: a snapshot at index p records the one in force
	// at p (confAt), not a later one.
	confs []confAt
	book  *book

	propc   chan proposal
	recvc   chan *raftpb.Message
	unreach chan uint64
	calls   chan func()
	stopc   chan struct{}
	done    chan struct{}

	purged <-chan struct{} // closed when the WAL purger has stopped
	lead   atomic.Uint64
	// heard is when a message from the leader this node follows last
	// arrived (UnixNano; LeaderHeard).
	heard atomic.Int64
	// transferAsks counts the leadership transfers asked again after
	// raft abandoned them (TransferLeadership).
	transferAsks atomic.Int64
	isLeader     atomic.Bool
	// view is the leader this node follows and its raft term, as of the
	// last Ready that changed either (LeaderView).
	view atomic.Pointer[leaderView]
	// leaderless is since when this node has known no leader (UnixNano;
	// 0 while it knows one: LeaderlessSince).
	leaderless atomic.Int64
	// txChecker answers CheckTransaction (SetTransactionChecker).
	txChecker atomic.Pointer[TransactionChecker]
	// created: the node's raft log was new when it started.
	created bool
	// leaderTerm is the term this node leads in (0: it does not lead);
	// set with isLeader.
	leaderTerm atomic.Uint64
	failed     atomic.Pointer[error]
	snapIdx    uint64
	stopOnce   sync.Once
	halt       error // set by a call on the raft loop: the loop stops with it

	// stalled: what the raft loop waits to do for lack of disk space,
	// and why (awaitSpace); nil otherwise.
	stalled atomic.Pointer[error]

	members atomic.Pointer[Membership]
	// holds: raft loop only. A member sent a snapshot at an index is
	// catching up from a copy of a store; the entries after that index
	// stay in memory until it replicates again (or copyTimeout passes),
	// however far compaction has gone meanwhile, so that it is not sent
	// another snapshot as soon as it is back.
	holds map[uint64]hold
	// copying and staged: raft loop only (copy.go). A copy of a store
	// being fetched for a snapshot message, and the index of the copy
	// staged (0: none).
	copying    *copyJob
	staged     uint64
	copyFailed time.Time
	// life ends when the node stops (Stop): background work (copies)
	// runs within it, counted in bg.
	life       context.Context
	lifeCancel context.CancelFunc
	bg         sync.WaitGroup
	// work: raft loop only (Status).
	work Work
	// reads: raft loop only. The ReadIndex calls waiting, by request id.
	reads   map[uint64]*pendingRead
	readSeq atomic.Uint64
	// contact: raft loop only. When a message from each member was last
	// received (unix nanoseconds), for Status.
	contact map[uint64]int64
	// held: raft loop only. The leader's appends that carry no entries,
	// only a newer commit index, by follower, held back until heldTimer
	// fires (sendAll); heldTimer runs while any is held.
	held      map[uint64]*raftpb.Message
	heldTimer *time.Timer

	changeMu sync.Mutex
	changed  chan struct{} // closed at the next change of lead or isLeader

	infoMu sync.Mutex
	infos  map[uint64]cachedInfo // MemberInfo's answers
}

type hold struct {
	index uint64
	since time.Time
}

type proposal struct {
	build func() []byte // the entry's bytes (raftstore.Raft.Propose)
	term  uint64        // the leader term it is for (0: any)
	errc  chan error
}

// Start opens (or creates and bootstraps) the raft log in cfg.WALDir,
// starts the transport and the raft loop, and resumes applying after
// app.Applied(): a member hosting one raft group (group 0).
func Start(cfg Config, app Applier) (*Node, error) {
	ns, err := StartGroups(cfg, []Group{{WALDir: cfg.WALDir, MembersFile: cfg.MembersFile, App: app}})
	if err != nil {
		return nil, err
	}
	return ns[0], nil
}

// Group is one raft group of a member's cluster: the directory of its
// raft log, its address book (MembersFile; default "members.json" beside
// WALDir) and its state machine. A Group without an App is one the member
// does not host (its replicas are on other members).
type Group struct {
	WALDir, MembersFile string
	App                 Applier
	// Voters, when set, are the members a new group is bootstrapped with
	// (a subset of Config.Peers, this member among them); nil: every
	// member of Config.Peers.
	Voters []uint64
}

// StartGroups starts a member of a cluster of len(groups) raft groups,
// group g of groups[g], hosting those with an App: each a Node of its own
// (its raft loop, its raft log, its applier), all sharing one transport
// (one raft stream to each other member, carrying every group's
// messages, and one peer listener), which stops with the last of them.
// The nodes are returned by group, nil for a group not hosted. Group 0
// must be hosted: the transport dials its members. cfg.WALDir and
// cfg.MembersFile are not used. A group is bootstrapped with its Voters
// (default cfg.Peers); a member joins and leaves every group it hosts
// (DialAddMember, DialRemoveMember), the first group first in and last
// out.
func StartGroups(cfg Config, groups []Group) ([]*Node, error) {
	cfg.TickInterval = cmp.Or(cfg.TickInterval, 100*time.Millisecond)
	cfg.ElectionTicks = cmp.Or(cfg.ElectionTicks, 10)
	cfg.HeartbeatTicks = cmp.Or(cfg.HeartbeatTicks, 1)
	cfg.SnapshotEvery = cmp.Or(cfg.SnapshotEvery, 8192)
	cfg.KeepEntries = cmp.Or(cfg.KeepEntries, 8192)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.NodeID == 0 || cfg.Peers[cfg.NodeID] == "" || cfg.ClusterID == "" {
		return nil, fmt.Errorf("peer: node id %d must be one of the peers %v, cluster id %q set", cfg.NodeID, cfg.Peers, cfg.ClusterID)
	}
	if len(groups) == 0 || groups[0].App == nil {
		return nil, errors.New("peer: group 0 must be hosted")
	}
	if err := checkAuthConfig(cfg); err != nil {
		return nil, err
	}
	nodes := make([]*Node, 0, len(groups))
	var hosted []*Node
	closeAll := func() {
		for _, n := range hosted {
			n.w.Close()
		}
	}
	created := false // group 0's raft log is new: the cluster is being created
	for g, gc := range groups {
		if gc.App == nil {
			nodes = append(nodes, nil)
			continue
		}
		gcfg := cfg
		// A data group is bootstrapped only with the cluster: a member
		// that comes to host one later (a replica moved to it) waits to be
		// added, even when its log is new (it crashed before it wrote it).
		gcfg.Join = cfg.Join || g > 0 && !created
		n, err := newNode(gcfg, uint64(g), len(groups), gc)
		if err != nil {
			closeAll()
			if g > 0 && errors.Is(err, ErrRemoved) {
				// Removals take group 0 last: one that did not finish.
				return nil, fmt.Errorf("%w: member %d was removed from data group %d but not from group 0, so its removal did not finish: run `mqgate cluster remove-node` for it again, through another member, to finish it",
					err, cfg.NodeID, g)
			}
			return nil, err
		}
		if g == 0 {
			created = n.created
		}
		nodes = append(nodes, n)
		hosted = append(hosted, n)
	}
	svcs := make([]services, len(nodes))
	for i, n := range nodes {
		if n != nil {
			svcs[i] = n
		}
	}
	tr, err := newTransport(cfg, cfg.Logger.With("node", cfg.NodeID), svcs)
	if err != nil {
		closeAll()
		return nil, err
	}
	h := &host{tr: tr, running: len(hosted)}
	for _, n := range hosted {
		n.tr, n.host = tr, h
	}
	tr.setPeers(nodes[0].book.dialable(cfg.NodeID))
	for _, n := range hosted {
		n.startLoops()
	}
	return nodes, nil
}

// StartGroup starts, on group 0's node of a running member, a node for
// data group g that the member did not host: its raft log in gc, empty,
// waiting to be added to the group (AddMember at the group's leader);
// the transport hands it the group's messages from then on. It fails
// when the member hosts g, or hosted it and was removed from it since it
// started (restart it first).
func (n *Node) StartGroup(g uint64, gc Group) (*Node, error) {
	if n.group != 0 || g == 0 || g >= uint64(n.groups) || gc.App == nil {
		return nil, fmt.Errorf("peer: start group %d: on group 0's node, a data group of the %d, with an applier", g, n.groups)
	}
	if n.tr.left(g) {
		return nil, fmt.Errorf("data group %d: %w", g, ErrRestartToHost)
	}
	if n.tr.svc(g) != nil {
		return nil, fmt.Errorf("peer: this member hosts data group %d already", g)
	}
	cfg := n.cfg
	cfg.Join = true
	gn, err := newNode(cfg, g, n.groups, gc)
	if err != nil {
		return nil, err
	}
	if !n.host.acquire() {
		gn.w.Close()
		return nil, errors.New("peer: the member is stopping")
	}
	gn.tr, gn.host = n.tr, n.host
	n.tr.hosting(g, gn)
	gn.startLoops()
	gn.logger.Info("peer: hosting the data group: waiting to be added to it")
	return gn, nil
}

// host is what the groups of one member share: the transport, closed
// when the last group's node stops.
type host struct {
	tr *transport
	// mu guards running: the nodes not stopped yet.
	mu      sync.Mutex
	running int
}

// acquire counts one more node, unless the last one stopped already.
func (h *host) acquire() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running == 0 {
		return false
	}
	h.running++
	return true
}

// release is called by each node as it stops.
func (h *host) release() {
	h.mu.Lock()
	h.running--
	last := h.running == 0
	h.mu.Unlock()
	if last {
		h.tr.close()
	}
}

// newNode opens group g's raft log and raft node (not started).
func newNode(cfg Config, g uint64, groups int, gc Group) (*Node, error) {
	cfg.WALDir = gc.WALDir
	cfg.MembersFile = cmp.Or(gc.MembersFile, filepath.Join(filepath.Dir(filepath.Clean(cfg.WALDir)), "members.json"))
	logger := cfg.Logger.With("node", cfg.NodeID)
	if groups > 1 {
		logger = logger.With("group", g)
	}
	n := &Node{cfg: cfg, group: g, groups: groups, logger: logger, app: gc.App, ms: raft.NewMemoryStorage(),
		propc: make(chan proposal), calls: make(chan func()), recvc: make(chan *raftpb.Message, 4096), unreach: make(chan uint64, 64),
		stopc: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{}), infos: map[uint64]cachedInfo{},
		holds: map[uint64]hold{}, reads: map[uint64]*pendingRead{}, contact: map[uint64]int64{}, held: map[uint64]*raftpb.Message{}}
	n.life, n.lifeCancel = context.WithCancel(context.Background())
	n.leaderless.Store(time.Now().UnixNano())
	var err error
	if n.book, err = openBook(cfg.MembersFile, cfg.Peers); err != nil {
		return nil, err
	}
	if n.book.isRemoved(cfg.NodeID) {
		return nil, fmt.Errorf("peer: member %d: %w", cfg.NodeID, ErrRemoved)
	}
	bootstrap, err := n.openWAL()
	if err != nil {
		return nil, err
	}
	rc := &raft.Config{
		ID: cfg.NodeID, ElectionTick: cfg.ElectionTicks, HeartbeatTick: cfg.HeartbeatTicks, Storage: n.ms,
		Applied: n.snapIdx, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum: true, PreVote: true, StepDownOnRemoval: true, Logger: raftLogger{n.logger},
		// ReadIndex confirms leadership with a round of heartbeats to a
		// majority (not a lease: a leader paused, or on a stalled VM,
		// counts no ticks meanwhile, and would trust a lease another
		// leader has long outlived).
		ReadOnlyOption: raft.ReadOnlySafe,
	}
	// Applied is the raft snapshot's index, not the store's: raft then
	// hands over every entry after the snapshot again, so that the
	// configuration changes among them reach it (the snapshot holds the
	// configuration as of its index); the applier skips the entries it
	// has already applied.
	if n.rn, err = raft.NewRawNode(rc); err != nil {
		n.w.Close()
		return nil, fmt.Errorf("peer: raft: %w", err)
	}
	n.created = bootstrap
	if bootstrap && !cfg.Join {
		// Each first member's configuration change carries its address,
		// so that a member added later learns it from the raft log.
		var peers []raft.Peer
		for id, addr := range cfg.Peers {
			if gc.Voters != nil && !slices.Contains(gc.Voters, id) {
				continue
			}
			ctx, err := json.Marshal(changeContext{Peer: addr})
			if err != nil {
				n.w.Close()
				return nil, err
			}
			peers = append(peers, raft.Peer{ID: id, Context: ctx})
		}
		if err := n.rn.Bootstrap(peers); err != nil {
			n.w.Close()
			return nil, fmt.Errorf("peer: bootstrap: %w", err)
		}
	}
	n.setMembership(n.rn.Status().Config)
	return n, nil
}

// startLoops starts the node's raft loop and WAL purger (its transport
// set).
func (n *Node) startLoops() {
	cfg := n.cfg
	// Old WAL files: the WAL unlocks those before its last snapshot
	// record (maybeCompact); the purger removes unlocked ones beyond the
	// newest maxWALFiles.
	var purgeErrs <-chan error
	n.purged, purgeErrs = fileutil.PurgeFileWithDoneNotify(zap.NewNop(), cfg.WALDir, "wal", maxWALFiles, walPurgeInterval, n.stopc)
	go func() {
		select {
		case err := <-purgeErrs:
			n.logger.Error("peer: purging old raft log files stopped", "err", err)
		case <-n.purged:
		}
	}()
	go n.run()
	if cfg.Join && n.group == 0 && !n.Members().includes(cfg.NodeID) {
		go n.awaitAdded()
	}
}

// learnMembers asks the members this joining member knows for the
// group's members and where they dial them, and learns the addresses of
// those its --peers does not name: the member that adds it (the leader)
// may be one of them, and it takes raft messages only from members it
// knows, and answers them where it dials them.
func (n *Node) learnMembers() {
	ctx, cancel := context.WithTimeout(n.life, n.cfg.TickInterval*10)
	defer cancel()
	learned := false
	for id := range n.book.dialable(n.cfg.NodeID) {
		st, err := n.MemberGroupStatus(ctx, id, 0)
		if err != nil {
			continue
		}
		for _, v := range slices.Concat(st.Voters, st.Learners) {
			if v != n.cfg.NodeID && n.book.learn(v, st.Peers[v]) {
				learned = true
				n.logger.Info("peer: learned where a member of the group is dialled", "member", v, "addr", st.Peers[v], "from", id)
			}
		}
	}
	if learned {
		n.tr.setPeers(n.book.dialable(n.cfg.NodeID))
	}
}

// joinReminder is how often a member started with Join says again that
// no member has added it yet.
const joinReminder = 30 * time.Second

// awaitAdded logs, until the group adds this member (or the node stops),
// that it waits to be added and how to add it, so that a member nobody
// added does not wait in silence.
func (n *Node) awaitAdded() {
	t := time.NewTicker(n.cfg.TickInterval * 10)
	defer t.Stop()
	var said time.Time
	for {
		if n.Members().includes(n.cfg.NodeID) || n.lead.Load() != 0 {
			n.logger.Info("peer: added to the group", "member", n.cfg.NodeID)
			return
		}
		n.learnMembers()
		if time.Since(said) >= joinReminder {
			said = time.Now()
			n.logger.Warn("peer: waiting to be added to a group; on a running member run: mqgate cluster add-node --node-id ID --node-peer ADDR",
				"member", n.cfg.NodeID, "peer", n.cfg.Peers[n.cfg.NodeID], "cluster", n.cfg.ClusterID)
		}
		select {
		case <-t.C:
		case <-n.done:
			return
		}
	}
}

// openWAL opens the WAL and loads it into the memory storage; it reports
// whether the group must be bootstrapped (a new, or never written, log).
func (n *Node) openWAL() (bool, error) {
	lg := zap.NewNop()
	dir := n.cfg.WALDir
	if !wal.Exist(dir) {
		w, err := wal.Create(lg, dir, []byte(n.cfg.ClusterID))
		if err != nil {
			return false, fmt.Errorf("peer: create raft log: %w", err)
		}
		n.w = w
		return true, nil
	}
	snaps, err := wal.ValidSnapshotEntries(lg, dir)
	if err != nil {
		return false, fmt.Errorf("peer: raft log snapshots: %w", err)
	}
	snap := &walpb.Snapshot{}
	if len(snaps) > 0 {
		snap = snaps[len(snaps)-1]
	}
	w, md, hs, ents, err := readWAL(lg, dir, snap)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// The last record is torn: it was being written when the process
		// or machine stopped, so no Save covering it returned and nothing
		// in it was acknowledged. Cut it off and read again.
		n.logger.Warn("peer: raft log ends in a torn record; repairing", "dir", dir, "err", err)
		if !wal.Repair(lg, dir) {
			return false, fmt.Errorf("peer: raft log in %s cannot be repaired: %w", dir, err)
		}
		w, md, hs, ents, err = readWAL(lg, dir, snap)
	}
	if err != nil {
		return false, err
	}
	if string(md) != n.cfg.ClusterID {
		w.Close()
		return false, fmt.Errorf("peer: raft log in %s belongs to cluster %q, not %q", dir, md, n.cfg.ClusterID)
	}
	n.w = w
	if snap.GetIndex() > 0 {
		if err := n.ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			Index: new(snap.GetIndex()), Term: new(snap.GetTerm()), ConfState: snap.GetConfState()}}); err != nil {
			return false, fmt.Errorf("peer: raft log snapshot: %w", err)
		}
		n.snapIdx = snap.GetIndex()
		n.cs = snap.GetConfState()
		n.confs = []confAt{{index: n.snapIdx, cs: n.cs}}
	}
	if hs != nil {
		if err := n.ms.SetHardState(hs); err != nil {
			return false, err
		}
	}
	if err := n.ms.Append(ents); err != nil {
		return false, err
	}
	if a := n.app.Applied(); a < n.snapIdx {
		return false, fmt.Errorf("peer: the store applied up to %d, the raft log starts after %d", a, n.snapIdx)
	}
	// A log created but never written (a crash right after Create) is
	// bootstrapped again.
	last, _ := n.ms.LastIndex()
	return last == 0 && raft.IsEmptyHardState(hs), nil
}

// readWAL opens the WAL at snap and reads it to its end.
func readWAL(lg *zap.Logger, dir string, snap *walpb.Snapshot) (*wal.WAL, []byte, *raftpb.HardState, []*raftpb.Entry, error) {
	w, err := wal.Open(lg, dir, snap)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("peer: open raft log: %w", err)
	}
	md, hs, ents, err := w.ReadAll()
	if err != nil {
		w.Close()
		return nil, nil, nil, nil, fmt.Errorf("peer: read raft log: %w", err)
	}
	return w, md, hs, ents, nil
}

// Propose implements raftstore.Raft: nil means the entry build returned
// is in this leader's raft log (or build returned nil); an error, that it
// is not (ctx is heeded only until the raft loop has the proposal). The
// raft loop calls build as it takes the proposal.
func (n *Node) Propose(ctx context.Context, term uint64, build func() []byte) error {
	if !n.isLeader.Load() {
		if n.lead.Load() == 0 {
			// An election may be under way: wait for it within ctx.
			if err := n.waitLeader(ctx); err != nil {
				return err
			}
		}
		if !n.isLeader.Load() {
			return n.notLeader()
		}
	}
	p := proposal{build: build, term: term, errc: make(chan error, 1)}
	select {
	case n.propc <- p:
	case <-n.done:
		return n.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	// Handed over: the raft loop answers at once whether the entry is in
	// its log, and the caller must know that whatever ctx does.
	select {
	case err := <-p.errc:
		return err
	case <-n.done:
		return n.stoppedErr()
	}
}

func (n *Node) notLeader() error {
	id := n.lead.Load()
	return &raftstore.NotLeaderError{LeaderID: id, LeaderAddr: n.book.addr(id)}
}

func (n *Node) stoppedErr() error {
	if p := n.failed.Load(); p != nil {
		return fmt.Errorf("%w: %w", raftstore.ErrStopped, *p)
	}
	return raftstore.ErrStopped
}

// waitLeader waits until some leader is known.
func (n *Node) waitLeader(ctx context.Context) error {
	t := time.NewTicker(n.cfg.TickInterval / 2)
	defer t.Stop()
	for n.lead.Load() == 0 {
		select {
		case <-t.C:
		case <-n.done:
			return n.stoppedErr()
		case <-ctx.Done():
			return fmt.Errorf("no leader: %w", ctx.Err())
		}
	}
	return nil
}

// Leader is the id of the leader this node knows of (0: none).
func (n *Node) Leader() uint64 { return n.lead.Load() }

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return n.isLeader.Load() }

// LeaderHeard is when this node last received a message (an append or a
// heartbeat, every HeartbeatTicks) from the leader it follows; zero
// before the first. A leader that stopped answering (a crash, a frozen
// process, a partition) shows as a LeaderHeard that stops advancing.
func (n *Node) LeaderHeard() time.Time {
	if ns := n.heard.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// LeaderlessSince is since when this node has known no leader of its
// group (zero while it knows one): since it started, or since the leader
// it followed was lost (it stepped down, or began an election).
func (n *Node) LeaderlessSince() time.Time {
	if ns := n.leaderless.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// ElectionTimeout is TickInterval × ElectionTicks: a follower that hears
// nothing from its leader for between one and two of these campaigns.
func (n *Node) ElectionTimeout() time.Duration {
	return n.cfg.TickInterval * time.Duration(n.cfg.ElectionTicks)
}

// leaderView is a group's leader as a member knows it, and its term.
type leaderView struct{ lead, term uint64 }

// LeaderView is the leader this node follows (0: none known) and its
// raft term in the group, as of the last Ready that changed either:
// another member's view of the group is newer when its term is higher.
func (n *Node) LeaderView() (lead, term uint64) {
	if v := n.view.Load(); v != nil {
		return v.lead, v.term
	}
	return 0, 0
}

// LeaderTerm is the raft term this node leads in, 0 when it does not
// lead. A node leads at most once per term, so the term names one span
// of leadership: anything built while leading in term t (a broker's
// memory of its group's state) is stale once LeaderTerm differs, even if
// this node leads again.
func (n *Node) LeaderTerm() uint64 { return n.leaderTerm.Load() }

// Changes returns a channel closed at the next change of the leader this
// node knows of (Leader) or of whether this node leads (IsLeader). Take
// the channel before reading Leader and IsLeader, and take a new one
// after it closes:
//
//	for {
//		ch := n.Changes()
//		lead, leading := n.Leader(), n.IsLeader()
//		...
//		select { case <-ch: case <-n.Done(): return }
//	}
//
// Stopping the node does not close it (watch Done for that); a failure
// that stops the raft loop while this node leads does, as the node no
// longer leads then.
func (n *Node) Changes() <-chan struct{} {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	return n.changed
}

// notifyChange closes the channel Changes handed out and puts a fresh one
// in its place; it never blocks for long (the raft loop calls it).
func (n *Node) notifyChange() {
	n.changeMu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.changeMu.Unlock()
}

// ID is this node's id.
func (n *Node) ID() uint64 { return n.cfg.NodeID }

// Group is the raft group this node is of (0: a member's first).
func (n *Node) Group() uint64 { return n.group }

// DataGroups is how many raft groups this member hosts.
func (n *Node) DataGroups() int { return n.groups }

// Done is closed when the raft loop has stopped.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the error that stopped the raft loop, if any.
func (n *Node) Err() error {
	if p := n.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *Node) deliver(m *raftpb.Message) {
	select {
	case n.recvc <- m:
	case <-n.stopc:
	default: // raft tolerates lost messages; the sender retries
	}
}

func (n *Node) reportUnreachable(id uint64) {
	select {
	case n.unreach <- id:
	default:
	}
}

func (n *Node) run() {
	defer close(n.done)
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	n.heldTimer = time.NewTimer(time.Hour)
	n.heldTimer.Stop()
	defer n.heldTimer.Stop()
	var props []proposal
	for {
		select {
		case <-t.C:
			n.rn.Tick()
		case <-n.heldTimer.C:
			n.sendHeld()
		case m := <-n.recvc:
			n.step(m)
		case p := <-n.propc:
			props = append(props, p)
		case id := <-n.unreach:
			n.rn.ReportUnreachable(id)
		case f := <-n.calls:
			f()
		case <-n.stopc:
			return
		}
		if n.halt != nil {
			n.stopLoop(n.halt)
			return
		}
		// Take what else is waiting, so that one Ready (one WAL fsync,
		// one message per peer) serves every proposal and message that
		// arrived meanwhile.
	more:
		for range maxBatch {
			select {
			case m := <-n.recvc:
				n.step(m)
			case p := <-n.propc:
				props = append(props, p)
			default:
				break more
			}
		}
		props = n.propose(props)
		if err := n.ready(); err != nil {
			if errors.Is(err, errStopping) {
				return
			}
			n.stopLoop(err)
			return
		}
	}
}

// stopLoop records why the raft loop stops (it returns next).
func (n *Node) stopLoop(err error) {
	n.failed.CompareAndSwap(nil, &err)
	switch {
	case errors.Is(err, raftstore.ErrCopyStaged):
		n.logger.Info("peer: raft loop stopped to install a copy of the store", "err", err)
	case errors.Is(err, ErrRemoved):
		n.logger.Warn("peer: this member was removed from the group: raft loop stopped")
	default:
		n.logger.Error("peer: raft loop stopped", "err", err)
	}
	n.leaderTerm.Store(0)
	if n.isLeader.Swap(false) {
		n.notifyChange()
	}
	n.app.LeadershipLost()
	n.failReads()
}

// maxBatch bounds the proposals and messages taken into one Ready.
const maxBatch = 512

func (n *Node) step(m *raftpb.Message) {
	n.work.MessagesReceived++
	now := time.Now().UnixNano()
	n.contact[m.GetFrom()] = now
	// A snapshot message waits for a copy of a store (copy.go).
	if m.GetType() != raftpb.MsgSnap || n.haveCopy(m) {
		_ = n.rn.Step(m) // messages of other terms or from removed members are dropped
	}
	if from := m.GetFrom(); from != 0 && from != n.cfg.NodeID && from == n.rn.BasicStatus().Lead {
		n.heard.Store(now)
	}
}

// propose builds the entries of the proposals taken and hands them to
// raft as one message, so that they go to each follower in one append
// (raft sends an append per proposal message), answers each, and
// returns props emptied for reuse.
func (n *Node) propose(props []proposal) []proposal {
	if len(props) == 0 {
		return props
	}
	st := n.rn.BasicStatus()
	var err error
	if st.RaftState != raft.StateLeader {
		err = n.notLeader()
	} else {
		ents := make([]*raftpb.Entry, 0, len(props))
		for i, p := range props {
			if p.term != 0 && p.term != st.GetTerm() {
				// Made for another of this member's terms as leader
				// (raftstore.Replica.MarkLeading): not proposed.
				p.errc <- fmt.Errorf("%w: this member leads in term %d, the proposal is for term %d", raftstore.ErrNotLeader, st.GetTerm(), p.term)
				props[i].errc = nil
				continue
			}
			if data := p.build(); data != nil {
				ents = append(ents, &raftpb.Entry{Data: data})
			}
		}
		if len(ents) > 0 {
			if serr := n.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(n.cfg.NodeID), Entries: ents}); serr != nil {
				err = fmt.Errorf("%w: %w", raftstore.ErrLeadershipLost, serr)
			} else {
				n.work.Proposals += uint64(len(ents))
			}
		}
	}
	for i, p := range props {
		if p.errc != nil {
			p.errc <- err
		}
		props[i] = proposal{}
	}
	return props[:0]
}

// ready handles what raft has ready: the WAL first (entries and hard
// state, fsynced when raft says so), then the messages to peers, then
// the committed entries.
func (n *Node) ready() error {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		n.work.Rounds++
		if v := n.view.Load(); rd.SoftState != nil || rd.HardState.GetTerm() != 0 && (v == nil || rd.HardState.GetTerm() != v.term) {
			st := n.rn.BasicStatus()
			n.view.Store(&leaderView{lead: st.Lead, term: st.GetTerm()})
		}
		if rd.SoftState != nil {
			leads := rd.SoftState.RaftState == raft.StateLeader
			term := uint64(0)
			if leads {
				term = n.rn.BasicStatus().GetTerm()
			}
			oldTerm := n.leaderTerm.Swap(term)
			oldLead := n.lead.Swap(rd.SoftState.Lead)
			switch {
			case rd.SoftState.Lead != 0:
				n.leaderless.Store(0)
			case oldLead != 0:
				n.leaderless.Store(time.Now().UnixNano())
			}
			was := n.isLeader.Swap(leads)
			if was && !leads {
				n.app.LeadershipLost()
				n.failReads()
				n.dropHeld()
			}
			if oldLead != rd.SoftState.Lead || was != leads || oldTerm != term {
				n.notifyChange()
			}
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			if n.app.Applied() < rd.Snapshot.GetMetadata().GetIndex() {
				return n.installSnapshot(rd)
			}
			if err := n.recordSnapshot(rd.Snapshot); err != nil {
				return err
			}
		}
		// A leader sends before its own WAL write, so that the followers'
		// fsyncs run alongside it (raft thesis §10.2.1, as etcd does): it
		// answers an append only after this write and the apply below,
		// so by then the entry is fsynced on it and on the follower whose
		// acknowledgement made the majority. Others send after the write:
		// their votes and acknowledgements must not precede it.
		leading := n.isLeader.Load()
		if leading {
			n.sendAll(rd.Messages, true)
		}
		if err := n.w.Save(rd.HardState, rd.Entries); err != nil {
			return fmt.Errorf("peer: write raft log: %w", err)
		}
		if len(rd.Entries) > 0 || rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
			n.work.LogWrites++
			if rd.MustSync {
				n.work.LogSyncs++
			}
		}
		n.work.EntriesWritten += uint64(len(rd.Entries))
		n.work.EntriesApplied += uint64(len(rd.CommittedEntries))
		if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
			if err := n.ms.SetHardState(rd.HardState); err != nil {
				return err
			}
		}
		if err := n.ms.Append(rd.Entries); err != nil {
			return err
		}
		if !leading {
			n.sendAll(rd.Messages, false)
		}
		for _, e := range rd.CommittedEntries {
			if err := n.applyEntry(e); err != nil {
				return err
			}
		}
		n.answerReads(rd.ReadStates)
		n.rn.Advance(rd)
		if err := n.maybeCompact(); err != nil {
			return err
		}
	}
	return nil
}

// errStopping: Stop was called while the raft loop waited for space.
var errStopping = errors.New("peer: stopping")

// spaceRetry is how often a member whose disk had no room for a committed
// entry (or its members file) tries again.
const spaceRetry = time.Second

// awaitSpace runs step, which failed with err for lack of disk space
// (raftstore.ErrNoSpace), again every spaceRetry until it succeeds, or
// Stop; what says what waits ("apply raft entry 12"). step must be safe
// to run again: applying an entry the Applier applied nothing of, or
// writing the members file. The raft loop does nothing else meanwhile:
// this member neither applies, answers nor votes, which the others take
// for a member that is down (if it led, they elect a leader among them
// after the election timeout, and proposals made through it answer
// ErrNoQuorum), and it carries on from there once there is room. It
// never skips the step, nor stops for good: the entry is committed, so
// the others hold it. Stalled reports the wait. An error of step that is
// not for lack of space is returned (it stops the node).
func (n *Node) awaitSpace(what string, err error, step func() error) error {
	n.logger.Error("peer: no space left on the data disk: this member waits, trying again every second, and serves nothing meanwhile; free space on its disk",
		"waiting_to", what, "err", err)
	stall := fmt.Errorf("cannot %s for lack of disk space (trying again every %s): %w", what, spaceRetry, err)
	n.stalled.Store(&stall)
	defer n.stalled.Store(nil)
	t := time.NewTicker(spaceRetry)
	defer t.Stop()
	for {
		select {
		case <-n.stopc:
			return errStopping
		case <-t.C:
		}
		err := step()
		switch {
		case err == nil:
			n.logger.Info("peer: the data disk has room again: going on", "done", what)
			return nil
		case !errors.Is(err, raftstore.ErrNoSpace):
			return err
		}
	}
}

// apply hands the committed entry at index to the Applier, waiting for
// room when it has none (awaitSpace).
func (n *Node) apply(index uint64, data []byte) error {
	err := n.app.Apply(index, data)
	if errors.Is(err, raftstore.ErrNoSpace) {
		err = n.awaitSpace(fmt.Sprintf("apply raft entry %d", index), err, func() error { return n.app.Apply(index, data) })
	}
	return err
}

// Stalled is why the raft loop waits for room on the data disk (to apply
// a committed entry, or to write the members file), or nil.
func (n *Node) Stalled() error {
	if p := n.stalled.Load(); p != nil {
		return *p
	}
	return nil
}

// commitHoldTicks: a leader holds an append that only carries a newer
// commit index back for a fifth of a tick (sendAll).
const commitHoldTicks = 5

// commitHoldOff turns the hold off (sendAll): benchmarks set it to
// compare.
var commitHoldOff atomic.Bool

// sendAll hands msgs to the transport (leading: this member leads, as
// of the Ready they came in). A leader holds back an append
// to a replicating follower that carries no entries, only a newer commit
// index (raft sends one to each follower whenever the commit index
// moves), for up to a fifth of a tick: the follower's next append carries
// the commit index too, so under load one soon replaces it, and the
// follower takes one append per entry instead of two, and answers one
// (BenchmarkCommitHold). Raft tolerates a message that is dropped, and
// the follower learns the commit index late at worst: its entries are on
// a majority's disks already, and the leader answers a proposal from its
// own apply. Held at idle, it delays only the follower's apply (a catalog
// change forwarded by a follower waits for it there).
func (n *Node) sendAll(msgs []*raftpb.Message, leading bool) {
	for _, m := range msgs {
		if leading && m.GetType() == raftpb.MessageType_MsgApp {
			to := m.GetTo()
			if len(m.GetEntries()) == 0 && !commitHoldOff.Load() && n.replicating(to) {
				if len(n.held) == 0 {
					n.heldTimer.Reset(n.cfg.TickInterval / commitHoldTicks)
				}
				n.work.CommitsHeld++
				n.replaceHeld(to) // this one's commit index is newer
				n.held[to] = m
				continue
			}
			n.replaceHeld(to) // m carries the commit index too
		}
		n.send(m)
	}
}

// replicating reports whether the leader's progress of member id is
// StateReplicate: it takes appends as they come, none being probed.
func (n *Node) replicating(id uint64) bool {
	ok := false
	n.rn.WithProgress(func(pid uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pid == id && pr.State == tracker.StateReplicate {
			ok = true
		}
	})
	return ok
}

// replaceHeld forgets the append held back for member id, if any: the
// one sent in its place carries a commit index as new.
func (n *Node) replaceHeld(id uint64) {
	if _, ok := n.held[id]; ok {
		delete(n.held, id)
		n.work.CommitsReplaced++
	}
}

// sendHeld sends the appends held back (sendAll); a member that stops
// leading drops them first (dropHeld).
func (n *Node) sendHeld() {
	for to, m := range n.held {
		delete(n.held, to)
		n.send(m)
	}
}

// dropHeld forgets the appends held back: this member no longer leads,
// and the next leader tells the followers its commit index.
func (n *Node) dropHeld() {
	clear(n.held)
	n.heldTimer.Stop()
}

// send hands m to the transport.
func (n *Node) send(m *raftpb.Message) {
	n.work.MessagesSent++
	if m.GetType() == raftpb.MsgSnap {
		// The member asks for a copy of a store when it gets this
		// (copy.go); the transport reports whether it went out.
		idx := m.GetSnapshot().GetMetadata().GetIndex()
		n.logger.Info("peer: a member lags behind the compacted raft log: sending it a snapshot", "member", m.GetTo(), "index", idx)
		if h, ok := n.holds[m.GetTo()]; !ok || h.index > idx {
			n.holds[m.GetTo()] = hold{index: idx, since: time.Now()}
		}
	}
	n.tr.send(n.group, m)
}

func (n *Node) applyEntry(e *raftpb.Entry) error {
	var cc *raftpb.ConfChangeV2
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var v1 raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &v1); err != nil {
			return fmt.Errorf("peer: conf change %d: %w", e.GetIndex(), err)
		}
		cc = v1.AsV2()
	case raftpb.EntryConfChangeV2:
		cc = new(raftpb.ConfChangeV2)
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("peer: conf change %d: %w", e.GetIndex(), err)
		}
	default:
		return n.apply(e.GetIndex(), e.GetData())
	}
	n.cs = n.rn.ApplyConfChange(cc)
	n.confs = append(n.confs, confAt{index: e.GetIndex(), cs: n.cs})
	changed, err := n.book.apply(e.GetIndex(), cc)
	if err := n.bookSaved(err, fmt.Sprintf("configuration change %d", e.GetIndex())); err != nil {
		return err
	}
	n.setMembership(n.rn.Status().Config)
	// A member that installs a raft snapshot must find itself in the
	// snapshot's configuration: a new one is taken at each change (its
	// metadata only; the copy a member fetches is of the store as it is
	// then, at this index or later).
	if err := n.snapshotAt(e.GetIndex(), n.cs); err != nil {
		return err
	}
	if changed {
		// The first group's members are whom the transport dials: a
		// member joins it first and leaves it last.
		if n.group == 0 {
			n.tr.setPeers(n.book.dialable(n.cfg.NodeID))
		}
		n.logger.Info("peer: membership changed", "index", e.GetIndex(), "voters", n.cs.GetVoters(), "learners", n.cs.GetLearners())
	}
	if err := n.apply(e.GetIndex(), nil); err != nil {
		return err
	}
	if n.book.isRemoved(n.cfg.NodeID) {
		return ErrRemoved
	}
	return nil
}

// maybeCompact records a raft snapshot (metadata only: the store is the
// state) at the applier's persisted index in the WAL, releases the WAL
// files before it, and drops in-memory entries more than KeepEntries
// below it.
func (n *Node) maybeCompact() error {
	p := n.app.Persisted()
	if p < n.snapIdx+n.cfg.SnapshotEvery {
		return nil
	}
	cs := n.confAt(p)
	if cs == nil {
		return nil
	}
	// A member that installed a copy of a store has applied past the
	// raft log it holds until the leader's entries reach it.
	if last, _ := n.ms.LastIndex(); p > last {
		return nil
	}
	term, err := n.ms.Term(p)
	if err != nil {
		return fmt.Errorf("peer: compact at %d: %w", p, err)
	}
	if err := n.snapshotAt(p, cs); err != nil {
		return fmt.Errorf("peer: compact at %d: %w", p, err)
	}
	if err := n.w.SaveSnapshot(&walpb.Snapshot{Index: new(p), Term: new(term), ConfState: cs}); err != nil {
		return fmt.Errorf("peer: compact at %d: %w", p, err)
	}
	if err := n.w.ReleaseLockTo(p); err != nil {
		return fmt.Errorf("peer: compact at %d: %w", p, err)
	}
	if floor := n.compactFloor(p); floor > 0 {
		if err := n.ms.Compact(floor); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("peer: compact at %d: %w", p, err)
		}
	}
	n.snapIdx = p
	n.pruneConfs(p)
	return nil
}

// confAt is a configuration and the index of the entry that made it.
type confAt struct {
	index uint64
	cs    *raftpb.ConfState
}

// confAt is the configuration in force at index (nil: none known).
func (n *Node) confAt(index uint64) *raftpb.ConfState {
	var cs *raftpb.ConfState
	for _, c := range n.confs {
		if c.index > index {
			break
		}
		cs = c.cs
	}
	return cs
}

// pruneConfs drops the configurations older than the one in force at
// index.
func (n *Node) pruneConfs(index uint64) {
	keep := 0
	for i, c := range n.confs {
		if c.index <= index {
			keep = i
		}
	}
	n.confs = n.confs[keep:]
}

// compactFloor is the index the in-memory entries are dropped up to:
// KeepEntries below p, and no further than a hold of a member catching
// up from a copy (holds); 0 is none.
func (n *Node) compactFloor(p uint64) uint64 {
	var floor uint64
	if p > n.cfg.KeepEntries {
		floor = p - n.cfg.KeepEntries
	}
	if len(n.holds) == 0 {
		return floor
	}
	progress := map[uint64]tracker.Progress{}
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { progress[id] = pr })
	for id, h := range n.holds {
		pr, ok := progress[id]
		caughtUp := ok && pr.State == tracker.StateReplicate && pr.Match >= h.index
		if !ok || caughtUp || time.Since(h.since) > copyTimeout {
			delete(n.holds, id)
			continue
		}
		floor = min(floor, h.index)
	}
	return floor
}

// snapshotAt records a raft snapshot at index in the memory storage (the
// one raft sends a member that lags behind the entries kept); its data
// is the members' addresses (members.go). A snapshot there already at
// or past index is kept.
func (n *Node) snapshotAt(index uint64, cs *raftpb.ConfState) error {
	members, err := json.Marshal(n.book.file())
	if err != nil {
		return err
	}
	if _, err := n.ms.CreateSnapshot(index, cs, members); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return err
	}
	return nil
}

// Stop stops the raft loop and the transport and closes the WAL. The
// applier is the caller's to close afterwards.
func (n *Node) Stop() error {
	var err error
	n.stopOnce.Do(func() {
		close(n.stopc)
		<-n.done
		n.lifeCancel()
		n.bg.Wait()
		<-n.purged
		n.host.release()
		err = n.w.Close()
	})
	return err
}

// pendingRead is a ReadIndex call waiting on the raft loop: index is the
// read index raft answered (0: not yet).
type pendingRead struct {
	index uint64
	done  chan error
}

// ReadIndex returns once this member, as the leader, has applied every
// entry committed before the call: a read from its store then reflects
// every write any leader answered OK before it (linearizable). It uses
// raft's ReadIndex: one round of heartbeats that a majority answers at
// this member's term. A member that does not lead
// answers *raftstore.NotLeaderError; one that stops leading meanwhile,
// raftstore.ErrLeadershipLost.
func (n *Node) ReadIndex(ctx context.Context) error {
	if !n.isLeader.Load() {
		return n.notLeader()
	}
	id := n.readSeq.Add(1)
	done := make(chan error, 1)
	if err := n.do(ctx, func() {
		if n.rn.BasicStatus().RaftState != raft.StateLeader {
			done <- n.notLeader()
			return
		}
		n.reads[id] = &pendingRead{done: done}
		n.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, id))
	}); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-n.done:
		return n.stoppedErr()
	case <-ctx.Done():
		// Forgotten on the loop, if it still runs.
		go func() {
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = n.do(dctx, func() { delete(n.reads, id) })
		}()
		return ctx.Err()
	}
}

// answerReads records the read indexes raft answered and releases the
// reads whose index is applied. Called by the raft loop after applying.
func (n *Node) answerReads(states []raft.ReadState) {
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		if p := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; p != nil {
			p.index = max(rs.Index, 1)
		}
	}
	if len(n.reads) == 0 {
		return
	}
	applied := n.app.Applied()
	for id, p := range n.reads {
		if p.index != 0 && applied >= p.index {
			p.done <- nil
			delete(n.reads, id)
		}
	}
}

// failReads answers every waiting read when this member stops leading.
func (n *Node) failReads() {
	for id, p := range n.reads {
		p.done <- raftstore.ErrLeadershipLost
		delete(n.reads, id)
	}
}
