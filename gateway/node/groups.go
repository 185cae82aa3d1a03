package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/placement"
	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/gateway/peer"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/metastore"
)

// Data groups (docs/architecture.md, "Data groups"). With
// Config.DataGroups G > 1 a member hosts G raft groups (peer.StartGroups),
// each with its own replica and broker; the catalog (topics, consumer
// groups) lives in group 0. There are no relays: every member serves
// clients itself, each group's broker while this member leads the group
// (followGroup, the same activation as one group's), and the listeners
// route each request to the group it concerns (groupsView), forwarding
// what another member serves. balanceLeaders spreads the leaderships.

// maxDataGroups bounds Config.DataGroups.
const maxDataGroups = 64

// dataGroups is c's DataGroups (0 is 1).
func (c Config) dataGroups() int { return max(c.DataGroups, 1) }

// dataGroup is one data group of this member's cluster. Of a group this
// member does not host (replica sets), only id, voters, far and log are
// set.
type dataGroup struct {
	id     int
	rep    *raftstore.Replica
	raft   *peer.Node
	broker *broker.Broker
	log    *slog.Logger
	// voters are the members the group was created on, as recorded (nil:
	// every member; votersNow has them as they are now); far its leader
	// and voters, when this member does not host it.
	voters []uint64
	far    *farLeader
	// live: rep, raft and broker are set (stored after them: a member that
	// comes to host the group sets them while it runs, hostGroup). gone:
	// this member was removed from the group since (its replica moved to
	// another member); rep, raft and broker stay, idle, until the member
	// stops.
	live, gone atomic.Bool

	// serving: the broker is active for this member's current
	// leadership of the group (followGroup's).
	serving atomic.Bool
	// forgetted wakes forgetDeleted.
	forgetted chan struct{}

	// mu guards changed, closed at each change of serving.
	mu      sync.Mutex
	changed chan struct{}

	// forgetMu guards forget: the deletions applied to the group, for its
	// broker to drop what it keeps of them (forgetDeleted).
	forgetMu sync.Mutex
	forget   []raftstore.MetaOp
}

func newDataGroup(id int, rep *raftstore.Replica, raft *peer.Node, log *slog.Logger) *dataGroup {
	dg := &dataGroup{id: id, rep: rep, raft: raft, log: log, far: newFarLeader(), changed: make(chan struct{}), forgetted: make(chan struct{}, 1)}
	rep.OnMetaApplied(dg.applied)
	dg.live.Store(true)
	return dg
}

// hosted reports whether this member holds a replica of the group (and
// was not removed from it since: unhost).
func (dg *dataGroup) hosted() bool { return dg.live.Load() && !dg.gone.Load() }

// leader is the group's leader as this member knows it (0: none known).
func (dg *dataGroup) leader() uint64 {
	if dg.hosted() {
		return dg.raft.Leader()
	}
	return dg.far.leader()
}

// votersNow are the group's voters as this member knows them now: as it
// applied the group's configuration when it hosts the group, else as the
// members hosting it said last, else as recorded when it was created.
func (dg *dataGroup) votersNow() []uint64 {
	if dg.hosted() {
		return dg.raft.Members().Voters
	}
	if v := dg.far.knownVoters(); v != nil {
		return v
	}
	return dg.voters
}

// leaderChanges is closed at the next change of leader.
func (dg *dataGroup) leaderChanges() <-chan struct{} {
	if dg.hosted() {
		return dg.raft.Changes()
	}
	return dg.far.changes()
}

// changes returns a channel closed at the next change of serving.
func (dg *dataGroup) changes() <-chan struct{} {
	dg.mu.Lock()
	defer dg.mu.Unlock()
	return dg.changed
}

func (dg *dataGroup) setServing(v bool) {
	if dg.serving.Swap(v) == v {
		return
	}
	dg.mu.Lock()
	close(dg.changed)
	dg.changed = make(chan struct{})
	dg.mu.Unlock()
}

// applied is the replica's OnMetaApplied: deletions are queued for the
// broker (forgetDeleted); it never blocks the raft loop.
func (dg *dataGroup) applied(op raftstore.MetaOp) {
	switch op.Kind {
	case raftstore.MetaDropQueues, raftstore.MetaDeleteGroup:
	default:
		return
	}
	dg.forgetMu.Lock()
	dg.forget = append(dg.forget, op)
	dg.forgetMu.Unlock()
	select {
	case dg.forgetted <- struct{}{}:
	default:
	}
}

// forgetDeleted has the group's broker drop what it keeps in memory of
// the topics and consumer groups deleted (through whichever group's
// broker or member the deletion came), until ctx ends.
func (dg *dataGroup) forgetDeleted(ctx context.Context) {
	for {
		select {
		case <-dg.forgetted:
		case <-ctx.Done():
			return
		}
		dg.forgetMu.Lock()
		ops := dg.forget
		dg.forget = nil
		dg.forgetMu.Unlock()
		for _, op := range ops {
			if op.Kind == raftstore.MetaDropQueues {
				dg.broker.ForgetTopic(op.Name)
			} else {
				dg.broker.ForgetGroup(op.Name)
			}
		}
	}
}

// groupDir is where group g keeps its raft log, replica and address
// book: group 0 where a cluster of one group keeps them, so that its
// data opens as group 0.
func groupDir(dataDir string, g int) string {
	if g == 0 {
		return dataDir
	}
	return filepath.Join(dataDir, "groups", strconv.Itoa(g))
}

// dataGroupsFile records, in a member's data directory, how many data
// groups its cluster was created with.
const dataGroupsFile = "data-groups"

// checkDataGroups refuses to open a member's data directory with another
// number of data groups than the cluster was created with (recorded in
// dataGroupsFile; a directory holding a raft log but no record belongs
// to a cluster of one group), and records the number on the first start
// of a cluster of several.
func checkDataGroups(dataDir string, groups int) error {
	path := filepath.Join(dataDir, dataGroupsFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		created, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr != nil || created < 1 {
			return fmt.Errorf("data-groups: %s is damaged (%q): it records how many data groups the cluster was created with", path, b)
		}
		if created != groups {
			return fmt.Errorf("data-groups: this member's cluster was created with %d data groups and cannot change: restart it with --data-groups %d (%s)", created, created, path)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("data-groups: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
		if groups != 1 {
			return fmt.Errorf("data-groups: this member's cluster was created with 1 data group and cannot change: restart it with --data-groups 1 (its raft log is in %s)", filepath.Join(dataDir, "raft"))
		}
		return nil
	}
	if groups == 1 {
		return nil // a cluster of one group keeps its data directory as it always did
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("data-groups: %w", err)
	}
	if err := writeFileSync(path, []byte(strconv.Itoa(groups)+"\n")); err != nil {
		return fmt.Errorf("data-groups: recording them: %w", err)
	}
	return nil
}

// writeFileSync writes path through a temporary file, fsyncs it and
// renames it into place, then fsyncs the directory.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// openGroups opens every data group's replica and starts their raft
// groups on one transport (a cluster of several data groups).
func (n *Node) openGroups(opts storage.Options) error {
	groups := n.cfg.dataGroups()
	if err := checkDataGroups(n.cfg.DataDir, groups); err != nil {
		return err
	}
	peers, err := peer.ParsePeers(n.cfg.Peers)
	if err != nil {
		return err
	}
	var tlsCfg *peer.TLS
	if n.cfg.PeerTLS() {
		if tlsCfg, err = peer.LoadTLS(n.cfg.PeerTLSFiles(), n.log); err != nil {
			return fmt.Errorf("peer-tls-cert: %w", err)
		}
	}
	self := uint64(n.cfg.NodeID)
	var rp *replacement
	if n.cfg.Join && n.cfg.GroupReplicas > 0 {
		old := uint64(n.cfg.Replaces)
		rp = &replacement{self: self, old: old, learn: func() ([][]uint64, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = peer.WithToken(peer.WithTLS(ctx, tlsCfg), n.cfg.PeerToken)
			return peer.DialGroupVoters(ctx, peers, []uint64{self, old}, n.cfg.ClusterID)
		}}
	}
	voters, err := groupVoters(n.cfg.DataDir, peers, groups, n.cfg.GroupReplicas, rp)
	if err != nil {
		return err
	}
	if voters != nil {
		if voters, err = n.unhosted(voters); err != nil {
			return err
		}
	}
	reps := make([]*raftstore.Replica, groups)
	closeAll := func() error {
		var errs []error
		for _, r := range reps {
			if r != nil {
				errs = append(errs, r.Close(context.Background()))
			}
		}
		return errors.Join(errs...)
	}
	var pgs []peer.Group
	for g := range groups {
		if voters != nil && !slices.Contains(voters[g], self) {
			pgs = append(pgs, peer.Group{}) // on other members only
			continue
		}
		rep, pg, err := n.openGroupReplica(g, opts)
		if err != nil {
			return errors.Join(fmt.Errorf("data group %d: %w", g, err), closeAll())
		}
		reps[g] = rep
		if voters != nil {
			pg.Voters = voters[g]
		}
		pgs = append(pgs, pg)
	}
	replicas := 0
	var hostGroup func(context.Context, uint64) error
	if voters != nil {
		replicas, hostGroup = n.cfg.GroupReplicas, n.hostGroup
	}
	n.storeOpts = opts
	nodes, err := peer.StartGroups(peer.Config{ClusterID: n.cfg.ClusterID, NodeID: uint64(n.cfg.NodeID), Peers: peers, Join: n.cfg.Join,
		Token: n.cfg.PeerToken, TLS: tlsCfg, Listener: n.lis["peers"], Info: n.memberInfo(), Logger: n.log,
		SnapshotEvery: uint64(n.cfg.RaftLogKeep), KeepEntries: uint64(n.cfg.RaftLogKeep), GroupReplicas: replicas, HostGroup: hostGroup}, pgs)
	if err != nil {
		return errors.Join(err, closeAll())
	}
	var hosted []int
	for g, rn := range nodes {
		log := n.log.With("group", g)
		if rn == nil {
			n.groups = append(n.groups, &dataGroup{id: g, voters: voters[g], far: newFarLeader(), log: log, changed: make(chan struct{}),
				forgetted: make(chan struct{}, 1)})
			continue
		}
		reps[g].Attach(rn)
		dg := newDataGroup(g, reps[g], rn, log)
		if voters != nil {
			dg.voters = voters[g]
		}
		n.groups = append(n.groups, dg)
		hosted = append(hosted, g)
	}
	n.rep, n.raft, n.store = reps[0], nodes[0], reps[0].Store()
	n.log.Info("cluster member started", "cluster_id", n.cfg.ClusterID, "node_id", n.cfg.NodeID, "peers", n.cfg.Peers,
		"peer_tls", n.cfg.PeerTLS(), "data_groups", groups, "group_replicas", replicas, "hosted_groups", hosted)
	return nil
}

// closeGroups stops every group's raft member, then the replicas (of
// the groups this member was removed from too).
func (n *Node) closeGroups(ctx context.Context) error {
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	var errs []error
	for _, dg := range n.groups {
		if dg.live.Load() {
			errs = append(errs, dg.raft.Stop())
		}
	}
	for _, dg := range n.groups {
		if dg.live.Load() {
			errs = append(errs, dg.rep.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// openGroupReplica opens data group g's replica in its directory, and
// says where its raft log and address book go.
func (n *Node) openGroupReplica(g int, opts storage.Options) (*raftstore.Replica, peer.Group, error) {
	dir := groupDir(n.cfg.DataDir, g)
	rep, err := raftstore.OpenReplica(filepath.Join(dir, "replica"), raftstore.Options{
		Store: opts, StoreHost: n.storeHost(), ClusterID: n.cfg.ClusterID, CommitTimeout: n.cfg.FlushTimeout, Logger: n.log.With("group", g),
		PersistEvery: uint64(min(4096, max(1, n.cfg.RaftLogKeep/2)))})
	if err != nil {
		return nil, peer.Group{}, err
	}
	return rep, peer.Group{WALDir: filepath.Join(dir, "raft"), MembersFile: filepath.Join(dir, "members.json"), App: rep}, nil
}

// multiGroup reports whether this node is a member of a cluster of
// several data groups.
func (n *Node) multiGroup() bool { return len(n.groups) > 1 }

// layout is how the queues are spread over the data groups: over every
// group, or, with replica sets, over every group but group 0, which
// keeps the catalog only (every member hosts it).
func (n *Node) layout() placement.Layout {
	l := placement.Layout{Groups: len(n.groups)}
	if n.replicaSets() {
		l.First = 1
	}
	return l
}

// replicaSets reports whether the data groups are on some members only
// (replicas.go): their voters were recorded when the cluster was made.
func (n *Node) replicaSets() bool { return len(n.groups) > 1 && n.groups[0].voters != nil }

// hostedGroups are the data groups this member holds a replica of.
func (n *Node) hostedGroups() []*dataGroup {
	out := make([]*dataGroup, 0, len(n.groups))
	for _, dg := range n.groups {
		if dg.hosted() {
			out = append(out, dg)
		}
	}
	return out
}

// startGroupBrokers opens a broker per data group (in standby), each
// holding the queues placement gives its group and reading topics and
// groups from the catalog.
func (n *Node) startGroupBrokers(ctx context.Context, bc broker.Config) error {
	n.hostMu.Lock()
	n.brokerCfg = bc
	for _, dg := range n.hostedGroups() {
		b, err := n.openGroupBroker(ctx, dg.id, dg.rep, dg.log)
		if err != nil {
			n.hostMu.Unlock()
			return errors.Join(fmt.Errorf("data group %d: %w", dg.id, err), n.closeBrokers(ctx))
		}
		dg.broker = b
	}
	n.brokersOpen = true
	n.hostMu.Unlock()
	cat := &catalog{n: n}
	bc.Placement = n.layout().Of(0)
	n.catalog = broker.CatalogService(bc, cat)
	n.broker = n.groups[0].broker
	return nil
}

// openGroupBroker opens data group g's broker (in standby) on its
// replica, holding the queues placement gives the group; n.brokerCfg set.
func (n *Node) openGroupBroker(ctx context.Context, g int, rep *raftstore.Replica, log *slog.Logger) (*broker.Broker, error) {
	c := n.brokerCfg
	c.Replicated = rep
	c.SnapshotOK = rep.Leading
	c.Placement = n.layout().Of(g)
	c.Catalog = &catalog{n: n}
	c.Logger = log
	return broker.Open(ctx, c, rep.Store())
}

// closeBrokers closes every data group's broker opened.
func (n *Node) closeBrokers(ctx context.Context) error {
	var errs []error
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	for _, dg := range n.groups {
		if dg.live.Load() && dg.broker != nil {
			errs = append(errs, dg.broker.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// eachBroker calls f with every data group's broker (the one broker
// outside a cluster of several).
func (n *Node) eachBroker(f func(b *broker.Broker)) {
	if !n.multiGroup() {
		f(n.broker)
		return
	}
	for _, dg := range n.hostedGroups() {
		f(dg.broker)
	}
}

// releaseClient is the session registry's OnGone: every active broker
// stops renewing the client's deliveries.
func (n *Node) releaseClient(clientID string) {
	n.eachBroker(func(b *broker.Broker) {
		if b.Active() {
			b.ReleaseClient(clientID)
		}
	})
}

// startGroups starts, for a cluster of several data groups, each
// group's follower and deletion queue and the leadership balance.
func (n *Node) startGroups() error {
	n.balanceKick = make(chan struct{}, 1)
	if err := n.group.Go("far-leaders", n.watchFarLeaders); err != nil {
		return err
	}
	for _, dg := range n.hostedGroups() {
		if err := n.followGroups(dg); err != nil {
			return err
		}
	}
	return n.group.Go("balance-leaders", n.balanceLeaders)
}

// followGroups starts dg's follower and deletion queue.
func (n *Node) followGroups(dg *dataGroup) error {
	if err := n.group.Go(fmt.Sprintf("follow-group-%d", dg.id), func(ctx context.Context) { n.followGroup(ctx, dg) }); err != nil {
		return err
	}
	return n.group.Go(fmt.Sprintf("forget-deleted-%d", dg.id), dg.forgetDeleted)
}

// stopGroups closes the connections requests were forwarded on.
func (n *Node) stopGroups(context.Context) error {
	n.fwd.close()
	return nil
}

// followGroup keeps the group's broker in step with this member's
// leadership of the group, as followLeader does for a cluster of one
// group, without relays: while the broker serves, dg.serving is set and
// the listeners route the group's requests to it.
func (n *Node) followGroup(ctx context.Context, dg *dataGroup) {
	n.follow(ctx, follower{
		l:   leadership{raft: dg.raft, rep: dg.rep, broker: dg.broker},
		log: dg.log,
		reconcile: func(ctx context.Context, l leadership, act *activation) bool {
			return n.reconcileGroup(ctx, dg, l, act)
		},
		changed: n.kickBalance,
		hold:    func() { dg.setServing(false) },
		stopped: func(err error) {
			switch {
			case errors.Is(err, peer.ErrRemoved) && dg.id == 0:
				// Group 0 is left last: the member is out of the cluster.
				n.log.Warn("this member was removed from the cluster: it no longer serves")
				n.removedOnce.Do(func() { close(n.removed) })
			case errors.Is(err, peer.ErrRemoved) && n.replicaSets():
				n.unhost(dg)
			case errors.Is(err, peer.ErrRemoved):
				dg.log.Warn("this member was removed from the data group: it no longer serves it")
			case err != nil:
				dg.log.Error("cluster member stopped: this data group no longer serves here", "err", err)
			}
		},
	})
}

// reconcileGroup is reconcile for one data group: leading, the broker is
// activated as for one group and the group served; otherwise it is
// deactivated and the group's requests go to its leader.
func (n *Node) reconcileGroup(ctx context.Context, dg *dataGroup, l leadership, act *activation) bool {
	if term := l.raft.LeaderTerm(); term != 0 && n.stopping.Load() {
		// Handed the leadership while stopping (by another member's
		// balance): it goes on at once.
		dg.setServing(false)
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := l.raft.Handoff(hctx); err != nil {
			dg.log.Warn("handing over a leadership received while stopping failed", "err", err)
		}
		return true
	}
	if term := l.raft.LeaderTerm(); term != 0 {
		return n.lead(ctx, l, act, term, dg.log, func() { dg.setServing(true) }, func() { dg.setServing(false) })
	}
	dg.setServing(false)
	if l.broker.Active() {
		if err := l.broker.Deactivate(ctx); err != nil {
			dg.log.Warn("deactivating the broker", "err", err)
		}
		dg.log.Info("this member no longer leads the data group: its requests go to the leader", "leader", l.raft.Leader())
	}
	return true
}

// checkElsewhere is the transaction checks' RemoteChecker with data
// groups: it asks the other members, one after the other, to pass the
// check on to a producer of topic whose control stream they hold.
func (n *Node) checkElsewhere(ctx context.Context, topic, txID string, msg []byte) (string, bool) {
	raft := n.groups[0].raft
	for _, id := range raft.Members().Voters {
		if id == uint64(n.cfg.NodeID) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		client, sent, err := raft.CheckTransactionAt(cctx, id, topic, txID, msg)
		cancel()
		if err != nil {
			n.log.Debug("passing a transaction check on to another member failed", "member", id, "topic", topic, "err", err)
			continue
		}
		if sent {
			return client, true
		}
	}
	return "", false
}

// kickBalance asks balanceLeaders to look again now.
func (n *Node) kickBalance() {
	select {
	case n.balanceKick <- struct{}{}:
	default:
	}
}

const (
	// balanceEvery is how often the leadership balance is looked at
	// besides the leadership changes.
	balanceEvery = 2 * time.Second
	// balanceHeldNote is how long the balance is held back before the log
	// says why, and how often at most it says it again.
	balanceHeldNote = 30 * time.Second
)

// ledByThis lists the data groups this member leads.
func (n *Node) ledByThis() []int {
	var out []int
	for _, dg := range n.hostedGroups() {
		if dg.raft.IsLeader() {
			out = append(out, dg.id)
		}
	}
	return out
}

// balanceLeaders hands over the leadership of the groups this member
// leads beyond its share (leaderShare), one at a time, to the members
// leading fewer, until ctx ends.
func (n *Node) balanceLeaders(ctx context.Context) {
	t := time.NewTicker(balanceEvery)
	defer t.Stop()
	var pending transfer
	var heldSince, said time.Time
	for {
		select {
		case <-t.C:
		case <-n.balanceKick:
		case <-ctx.Done():
			return
		}
		var held string
		pending, held = n.balanceOnce(ctx, pending)
		switch {
		case held == "":
			heldSince = time.Time{}
		case heldSince.IsZero():
			heldSince = time.Now()
		case time.Since(heldSince) >= balanceHeldNote && time.Since(said) >= balanceHeldNote:
			// A balance held back for long (an unknown leader, a voter
			// not caught up) shows in the log, at most so often.
			said = time.Now()
			n.log.Info("leadership balance held back: "+held, "since", heldSince, "leads", n.ledByThis())
		}
	}
}

// transfer is a leadership transfer balanceLeaders started.
type transfer struct {
	group int
	to    uint64
	at    time.Time
}

// leaderShare is ⌈groups/voters⌉: the most groups one member should
// lead.
func leaderShare(groups, voters int) int {
	if voters <= 0 {
		return groups
	}
	return (groups + voters - 1) / voters
}

// balanceOnce starts at most one leadership transfer: of a group this
// member leads while it leads more than its share, to the voter leading
// fewest below the share among those caught up with the group (heard
// from within an election timeout, replicating, at most a few entries
// behind the commit). While the last transfer it started is under way
// (the group still led here, within a few election timeouts) it waits.
// Nothing moves while some group has no leader. It returns the transfer
// under way, and why it held one back that the balance calls for.
func (n *Node) balanceOnce(ctx context.Context, pending transfer) (transfer, string) {
	if n.stopping.Load() {
		return transfer{}, ""
	}
	self := uint64(n.cfg.NodeID)
	if pending.to != 0 {
		dg := n.groups[pending.group]
		if dg.raft.IsLeader() && time.Since(pending.at) < 3*dg.raft.ElectionTimeout() {
			return pending, ""
		}
		pending = transfer{}
	}
	leaders := make([]uint64, len(n.groups))
	for i, dg := range n.groups {
		if leaders[i] = dg.leader(); leaders[i] == 0 {
			return pending, fmt.Sprintf("no leader of data group %d is known here", i)
		}
	}
	// The groups holding queues are balanced; with replica sets, group 0
	// (the catalog only) is left out: it carries no messages.
	first := n.layout().First
	var plan *balancePlan
	if !n.replicaSets() {
		plan = planTransfer(leaders[first:], n.votersOfAll(), self)
	} else {
		voters := make([][]uint64, 0, len(n.groups)-first)
		for _, dg := range n.groups[first:] {
			voters = append(voters, dg.votersNow())
		}
		plan = planChain(leaders[first:], voters, n.votersOfAll(), self)
	}
	if plan == nil {
		return pending, ""
	}
	var held []string
	for _, g := range plan.groups {
		g += first
		dg := n.groups[g]
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := dg.raft.Status(sctx)
		cancel()
		if err != nil || st.Progress == nil {
			held = append(held, fmt.Sprintf("group %d: no progress of its replicas here (%v)", g, err))
			continue
		}
		for _, to := range plan.to {
			pr, ok := st.Progress[to]
			if !ok || !pr.RecentActive || pr.State != "StateReplicate" || st.Commit > pr.Match+balanceLag {
				held = append(held, fmt.Sprintf("group %d: member %d not caught up (%+v, commit %d)", g, to, pr, st.Commit))
				continue
			}
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			err := dg.raft.StartTransfer(tctx, to)
			cancel()
			if err != nil {
				dg.log.Warn("handing the leadership over for balance failed", "to", to, "err", err)
				return pending, ""
			}
			why := "this member leads more data groups than its share"
			if plan.leads <= plan.share {
				why = "a member leading more data groups than its share hands one to this member next"
			}
			dg.log.Info("handing the leadership over: "+why, "to", to, "leads", plan.leads, "share", plan.share)
			return transfer{group: g, to: to, at: time.Now()}, ""
		}
	}
	return pending, strings.Join(held, "; ")
}

// votersOfAll is the members that vote in every data group, as this
// member applied the groups' configurations: while a member joins or
// leaves the groups one after the other, it neither counts in the share
// nor is handed a leadership. With replica sets (whose members are
// fixed) it is every member, group 0's voters: a group's leadership goes
// only to one of its own voters, since only they have a raft progress
// in it (balanceOnce).
func (n *Node) votersOfAll() []uint64 {
	if n.replicaSets() {
		return n.groups[0].raft.Members().Voters
	}
	sets := make([][]uint64, len(n.groups))
	for i, dg := range n.groups {
		sets[i] = dg.raft.Members().Voters
	}
	return intersect(sets)
}

// intersect is the ids in every one of sets, in the first's order.
func intersect(sets [][]uint64) []uint64 {
	if len(sets) == 0 {
		return nil
	}
	var out []uint64
	for _, id := range sets[0] {
		in := true
		for _, s := range sets[1:] {
			if !slices.Contains(s, id) {
				in = false
				break
			}
		}
		if in {
			out = append(out, id)
		}
	}
	return out
}

// balanceLag is how far behind the commit a member may be to be handed
// a group's leadership by balanceOnce.
const balanceLag = 64

// balancePlan is what planTransfer proposes: hand one of groups (led by
// self) to the first of to that can take it.
type balancePlan struct {
	groups []int
	to     []uint64
	leads  int
	share  int
}

// planTransfer decides, from each group's leader and the voters, whether
// self leads more than its share (leaderShare) and then which of its
// groups may go (highest first) and to whom (the voters leading fewer
// than the share, fewest first, then by id); nil when nothing should
// move.
func planTransfer(leaders, voters []uint64, self uint64) *balancePlan {
	share := leaderShare(len(leaders), len(voters))
	leads := map[uint64]int{}
	for _, v := range voters {
		leads[v] = 0
	}
	var mine []int
	for g, l := range leaders {
		leads[l]++
		if l == self {
			mine = append(mine, g)
		}
	}
	if len(mine) <= share {
		return nil
	}
	var to []uint64
	for _, v := range voters {
		if v != self && leads[v] < share {
			to = append(to, v)
		}
	}
	if len(to) == 0 {
		return nil
	}
	slices.SortFunc(to, func(a, b uint64) int {
		if leads[a] != leads[b] {
			return leads[a] - leads[b]
		}
		return int(a) - int(b)
	})
	slices.Reverse(mine)
	return &balancePlan{groups: mine, to: to, leads: len(mine), share: share}
}

// planChain is planTransfer for replica sets, where a group's
// leadership can go only to one of its own voters (voters, by group): a
// member over the share may have none of its groups' voters below it.
// It looks, breadth first from the members over the share, for the
// shortest chain of handovers ending at a member below it (each member
// handing one of its groups to a voter of that group, which hands one of
// its own on, ...), and plans the chain's last handover when self makes
// it: the others follow at the next looks, as each member on the chain
// falls below the share in turn. Every member finds the same chain from
// the same leaders. nil when nothing should move, or self has no part.
func planChain(leaders []uint64, voters [][]uint64, members []uint64, self uint64) *balancePlan {
	share := leaderShare(len(leaders), len(members))
	ids := slices.Sorted(slices.Values(members))
	leads := map[uint64]int{}
	led := map[uint64][]int{}
	for g, l := range leaders {
		leads[l]++
		led[l] = append(led[l], g)
	}
	type step struct {
		from  uint64
		group int
	}
	came := map[uint64]step{}
	var queue []uint64
	for _, id := range ids {
		if leads[id] > share {
			came[id] = step{}
			queue = append(queue, id)
		}
	}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, g := range led[m] {
			for _, x := range slices.Sorted(slices.Values(voters[g])) {
				if _, seen := came[x]; seen || !slices.Contains(ids, x) {
					continue
				}
				came[x] = step{from: m, group: g}
				if leads[x] < share {
					// The chain's last handover: m hands g to x.
					if m != self {
						return nil
					}
					return &balancePlan{groups: []int{g}, to: []uint64{x}, leads: leads[m], share: share}
				}
				queue = append(queue, x)
			}
		}
	}
	return nil
}

// handoffGroups hands the leadership of every group this member leads
// to another member before it stops (SIGTERM).
func (n *Node) handoffGroups(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, dg := range n.hostedGroups() {
		if !dg.raft.IsLeader() {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := dg.raft.Handoff(cctx); err != nil {
				dg.log.Warn("leadership handoff before stopping failed; the others elect a leader after the election timeout", "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// catalog is broker.Catalog for this member: group 0's replica, written
// through group 0's leader; deletions are made in every data group.
type catalog struct{ n *Node }

func (c *catalog) Meta() *metastore.Store { return c.n.groups[0].rep.Store().Meta() }

func (c *catalog) ProposeMeta(ctx context.Context, op raftstore.MetaOp) (storage.AppendResult, error) {
	switch op.Kind {
	case raftstore.MetaDeleteTopic, raftstore.MetaDeleteGroup, raftstore.MetaDropQueues:
		// Every group, group 0 (the catalog) last: a name is gone from
		// the catalog only once no group holds anything of it. A group
		// other than 0 holds no topic or group, only their offsets and
		// queues: "not found" there is expected.
		var res storage.AppendResult
		for g := len(c.n.groups) - 1; g >= 0; g-- {
			r, err := c.propose(ctx, g, op)
			if g > 0 && (errors.Is(err, storage.ErrNotFound) || errors.Is(err, raftstore.ErrRefused)) {
				continue
			}
			if err != nil {
				return r, err
			}
			res = r
		}
		return res, nil
	}
	return c.propose(ctx, 0, op)
}

// propose proposes op to group g: on this member when it leads g, else
// through g's leader, then waits until this member has applied it. A
// change whose outcome is unknown (the leader went away, or lost its
// leadership, before it answered) is proposed again, at the next leader,
// until its deadline (catalogTimeout without one), so a change made during a failover
// is answered OK rather than UNAVAILABLE. Putting a topic or consumer
// group twice leaves what putting it once does. A deletion proposed
// again finds nothing to delete when an earlier attempt did delete it:
// that is its success (the name was there when the first was proposed).
func (c *catalog) propose(ctx context.Context, g int, op raftstore.MetaOp) (storage.AppendResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, catalogTimeout)
		defer cancel()
	}
	pause := catalogPause
	for attempt := 1; ; attempt++ {
		res, err := c.proposeOnce(ctx, g, op)
		if attempt > 1 && deletion(op) && (errors.Is(err, storage.ErrNotFound) || errors.Is(err, raftstore.ErrRefused)) {
			return storage.AppendResult{Status: storage.StatusOK, Durability: storage.DurabilityLocal}, nil
		}
		if err == nil || ctx.Err() != nil || !repeatable(err) {
			return res, err
		}
		c.n.groups[g].log.Info("catalog: a change's outcome is unknown (its leader went away): proposing it again",
			"kind", op.Kind, "attempt", attempt+1, "err", err)
		if werr := awaitLeader(ctx, c.n.groups[g], 0); werr != nil {
			return res, err
		}
		// Leaderships may still move (an election, then the balance: a
		// leader hands its leadership over, dropping proposals until the
		// member it hands it to has caught up): the pauses grow.
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return res, err
		}
		pause = min(2*pause, catalogPauseMax)
	}
}

// awaitLeader returns once this member knows a leader of dg other than
// not (an election may be under way), or when ctx ends.
func awaitLeader(ctx context.Context, dg *dataGroup, not uint64) error {
	for {
		changed := dg.leaderChanges()
		if l := dg.leader(); l != 0 && l != not {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// catalogPause is the first pause between two attempts of propose,
// doubled after each up to catalogPauseMax.
const (
	catalogPause    = 100 * time.Millisecond
	catalogPauseMax = time.Second
)

// repeatable reports whether a change that failed with err may be
// proposed again: err leaves its outcome unknown.
func repeatable(err error) bool {
	return errors.Is(err, raftstore.ErrNoQuorum) || errors.Is(err, raftstore.ErrLeadershipLost)
}

// deletion reports whether op deletes (a topic, a group, a topic's
// queues).
func deletion(op raftstore.MetaOp) bool {
	switch op.Kind {
	case raftstore.MetaDeleteTopic, raftstore.MetaDeleteGroup, raftstore.MetaDropQueues:
		return true
	}
	return false
}

// proposeOnce is one attempt of propose.
func (c *catalog) proposeOnce(ctx context.Context, g int, op raftstore.MetaOp) (storage.AppendResult, error) {
	dg := c.n.groups[g]
	if !dg.hosted() {
		return c.proposeFar(ctx, dg, op)
	}
	if dg.raft.IsLeader() {
		res, err := dg.rep.ProposeMeta(ctx, op)
		if !errors.Is(err, raftstore.ErrNotLeader) {
			return res, err
		}
	}
	change, err := raftstore.EncodeChange(op)
	if err != nil {
		return storage.AppendResult{}, err
	}
	idx, err := dg.raft.ProposeAtLeader(ctx, change)
	if err != nil {
		return storage.AppendResult{}, err
	}
	if err := dg.rep.WaitApplied(ctx, idx); err != nil {
		return storage.AppendResult{}, fmt.Errorf("%w: the change is applied at the leader, not yet here: %w", raftstore.ErrNoQuorum, err)
	}
	return storage.AppendResult{Status: storage.StatusOK, Durability: storage.DurabilityLocal}, nil
}

// proposeFar proposes op (a deletion's part in a data group) to dg, a
// group this member does not host, at its leader: answered once applied
// there.
func (c *catalog) proposeFar(ctx context.Context, dg *dataGroup, op raftstore.MetaOp) (storage.AppendResult, error) {
	change, err := raftstore.EncodeChange(op)
	if err != nil {
		return storage.AppendResult{}, err
	}
	raft := c.n.groups[0].raft
	for {
		if err := awaitLeader(ctx, dg, 0); err != nil {
			return storage.AppendResult{}, fmt.Errorf("%w: data group %d has no leader known: %w", raftstore.ErrNoQuorum, dg.id, err)
		}
		lead := dg.leader()
		_, err := raft.ProposeAtMember(ctx, lead, uint64(dg.id), change)
		var nl *raftstore.NotLeaderError
		if !errors.As(err, &nl) {
			if err != nil {
				return storage.AppendResult{}, err
			}
			return storage.AppendResult{Status: storage.StatusOK, Durability: storage.DurabilityLocal}, nil
		}
		// Asked a member no longer leading: wait to learn the next.
		if err := awaitLeader(ctx, dg, lead); err != nil {
			return storage.AppendResult{}, fmt.Errorf("%w: data group %d's leader moved: %w", raftstore.ErrNoQuorum, dg.id, err)
		}
	}
}

// catalogTimeout bounds a catalog change proposed without a deadline.
const catalogTimeout = 10 * time.Second

func (c *catalog) Sync(ctx context.Context) error {
	dg := c.n.groups[0]
	idx, err := dg.raft.LeaderReadIndex(ctx)
	if err != nil {
		return err
	}
	return dg.rep.WaitApplied(ctx, idx)
}

var _ broker.Catalog = (*catalog)(nil)

// groupLeaders is each data group's leader as this member knows it (0:
// none known).
func (n *Node) groupLeaders() []uint64 {
	out := make([]uint64, len(n.groups))
	for i, dg := range n.groups {
		out[i] = dg.leader()
	}
	return out
}

// catalogService is the metadata service over the catalog (nil outside a
// cluster of several data groups).
func (n *Node) catalogService() *metadata.Service { return n.catalog }

// groupsReady is memberReady for a member of several data groups: every
// group's raft member runs and knows a leader (a group on other members
// only: they name one); the role names the groups this member leads.
func (n *Node) groupsReady() (string, error) {
	var led []string
	for _, dg := range n.groups {
		if !dg.hosted() {
			if dg.leader() == 0 {
				return "", fmt.Errorf("data group %d (on members %v) has no leader they know of", dg.id, dg.votersNow())
			}
			continue
		}
		select {
		case <-dg.raft.Done():
			return "", fmt.Errorf("the raft member of data group %d stopped: %v", dg.id, dg.raft.Err())
		default:
		}
		if err := dg.raft.Stalled(); err != nil {
			return "", fmt.Errorf("the raft member of data group %d waits for room on the data disk: %v", dg.id, err)
		}
		switch {
		case dg.raft.IsLeader():
			led = append(led, strconv.Itoa(dg.id))
		case dg.raft.Leader() == 0:
			return "", fmt.Errorf("data group %d knows no leader (an election is under way, or a majority of the members is unreachable)", dg.id)
		}
	}
	if len(led) == 0 {
		return "member of data groups leading none", nil
	}
	return "leader of data groups " + strings.Join(led, ", "), nil
}
