package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/gateway/peer"
)

// Replica sets (docs/architecture.md, "Replica sets"). With
// Config.GroupReplicas R below the number of members, group 0 (the
// catalog alone: it holds no queue) stays on every member and each other
// data group has replicas on R members only, spread over them when the
// cluster is created (replicaSets). A member hosts the groups it has
// replicas of; for the others it learns the leader and voters from the
// members that host them (watchFarLeaders) and forwards their requests
// there. A member joining such a cluster takes replicas from the members
// holding the most (peer.GrowMoves), or, replacing one (Config.Replaces),
// those of that member; a member removed from a data group while it runs
// stops hosting it (unhost) and deletes its replica at the next start
// (unhosted).

// replicasFile records, in a member's data directory, the members each
// data group was created on, when not every member hosts every group.
const replicasFile = "group-replicas"

// replicaRecord is replicasFile's content.
type replicaRecord struct {
	// Replicas is --group-replicas as the cluster was created with it.
	Replicas int `json:"replicas"`
	// Voters are each group's members, by group.
	Voters [][]uint64 `json:"voters"`
}

// replicaSets spreads groups data groups over the members ids: group 0 on
// every member, group g > 0 on r members in id order starting at the
// (g-1)-th, wrapping: each member holds about the same number of
// replicas, and each pair of members shares few groups (a member's
// failure spreads its groups' leaderships over several others).
func replicaSets(ids []uint64, groups, r int) [][]uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	out := make([][]uint64, groups)
	out[0] = ids
	for g := 1; g < groups; g++ {
		set := make([]uint64, 0, r)
		for i := range r {
			set = append(set, ids[(g-1+i)%len(ids)])
		}
		slices.Sort(set)
		out[g] = set
	}
	return out
}

// replacement is a new member joining a cluster of replica sets: in the
// place of member old (Config.Replaces), or, with old 0, taking some of
// the running members' replicas; learn asks the running members for
// their groups' voters.
type replacement struct {
	self, old uint64
	learn     func() ([][]uint64, error)
}

// groupVoters decides, for a member of a cluster of several data groups,
// which members each group is on: nil when every member hosts every
// group (the cluster was created without --group-replicas, or with one
// at least its number of members), else what replicasFile records, made
// on the first start from --peers, or for a member joining (rp set) from
// the running members' answers, this member in the place of the one it
// replaces or of those it takes replicas from. A member restarted with another --group-replicas than
// its cluster was created with refuses to start.
func groupVoters(dataDir string, peers map[uint64]string, groups, r int, rp *replacement) ([][]uint64, error) {
	path := filepath.Join(dataDir, replicasFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var rec replicaRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.Replicas < 1 || len(rec.Voters) != groups {
			return nil, fmt.Errorf("group-replicas: %s is damaged (%q): it records the members each data group was created on", path, b)
		}
		if r != rec.Replicas {
			return nil, fmt.Errorf("group-replicas: this member's cluster was created with --group-replicas %d and cannot change: restart it with --group-replicas %d (%s)",
				rec.Replicas, rec.Replicas, path)
		}
		return rec.Voters, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("group-replicas: %w", err)
	}
	if rp == nil && (r == 0 || r >= len(peers)) {
		return nil, nil // every member hosts every group
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
		return nil, fmt.Errorf("group-replicas: this member's cluster was created with every member hosting every data group and cannot change: restart it without --group-replicas")
	}
	rec := replicaRecord{Replicas: r}
	if rp == nil {
		ids := make([]uint64, 0, len(peers))
		for id := range peers {
			ids = append(ids, id)
		}
		rec.Voters = replicaSets(ids, groups, r)
	} else if rp.old == 0 {
		if rec.Voters, err = grownVoters(rp, groups, r); err != nil {
			return nil, err
		}
	} else if rec.Voters, err = replacedVoters(rp, groups); err != nil {
		return nil, err
	}
	b, err = json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("group-replicas: %w", err)
	}
	if err := writeFileSync(path, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("group-replicas: recording them: %w", err)
	}
	return rec.Voters, nil
}

// voters asks the running members for each group's voters (rp.learn),
// and refuses another number of data groups than this member's.
func (rp *replacement) voters(groups int) ([][]uint64, error) {
	vs, err := rp.learn()
	if err != nil {
		return nil, fmt.Errorf("join: the data groups' voters: %w", err)
	}
	if len(vs) != groups {
		return nil, fmt.Errorf("join: the running members have %d data groups, this member %d: start it with --data-groups %d", len(vs), groups, len(vs))
	}
	return vs, nil
}

// grownVoters is each group's voters as the running members answer
// them, with this new member (rp.self) taking replicas from the members
// holding the most (peer.GrowMoves): the groups it hosts, and group 0.
func grownVoters(rp *replacement, groups, r int) ([][]uint64, error) {
	vs, err := rp.voters(groups)
	if err != nil {
		return nil, err
	}
	for g := 1; g < groups; g++ {
		if len(vs[g]) != r && !slices.Contains(vs[g], rp.self) {
			return nil, fmt.Errorf("join: data group %d has %d voters %v, not %d: a membership change is under way; finish it first", g, len(vs[g]), vs[g], r)
		}
	}
	peer.Move{To: rp.self}.Apply(vs) // group 0: every member
	for _, mv := range peer.GrowMoves(vs, rp.self) {
		mv.Apply(vs)
	}
	return vs, nil
}

// replacedVoters is each group's voters as the running members answer
// them, rp.self in the place of rp.old: the groups this member hosts are
// those rp.old votes in (or this member already does, when an earlier
// replacement got part of the way), and group 0.
func replacedVoters(rp *replacement, groups int) ([][]uint64, error) {
	vs, err := rp.voters(groups)
	if err != nil {
		return nil, err
	}
	found := false
	for g, set := range vs {
		if had := slices.Contains(set, rp.old) || slices.Contains(set, rp.self); had || g == 0 {
			found = found || g > 0
			peer.Move{Group: uint64(g), From: rp.old, To: rp.self}.Apply(vs)
		}
	}
	if !found {
		return nil, fmt.Errorf("replaces: member %d votes in no data group of the cluster (its groups: %v)", rp.old, vs)
	}
	return vs, nil
}

// unhost makes dg, a data group this member was removed from (its
// replica moved to another member), one it does not host: its requests
// go to its leader from now on, the record says so (a restart does not
// open it), and the next start deletes its replica (unhosted). Its
// replica, raft member and broker stay open, idle, until the member
// stops.
func (n *Node) unhost(dg *dataGroup) {
	dg.setServing(false)
	lead, term := dg.raft.LeaderView()
	voters := dg.raft.Members().Voters
	dg.far.learn(lead, term, voters)
	dg.gone.Store(true)
	if err := n.recordVoters(dg.id, voters); err != nil {
		dg.log.Error("this member was removed from the data group, and recording it failed: the next start finds the removal in the group's address book and finishes it", "err", err)
		return
	}
	dg.log.Warn("this member was removed from the data group (its replica moved to another member): it no longer hosts it; the replica is deleted at the next start")
	n.kickBalance()
}

// hostGroup is the peer HostGroup call: this member opens an empty
// replica of data group g, which it does not host, and starts the group's
// raft member waiting to be added, its broker in standby and its
// follower, for a replica moving to it (peer.DialMoveReplica). The record
// says it hosts g first: a restart opens the replica again, waiting to be
// added all the same. A group this member was removed from since it
// started is refused (restart it first).
func (n *Node) hostGroup(ctx context.Context, g uint64) error {
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	switch {
	case n.stopping.Load():
		return fmt.Errorf("%w: this member is stopping", raftstore.ErrRefused)
	case !n.replicaSets() || g == 0 || g >= uint64(len(n.groups)):
		return fmt.Errorf("%w: host group %d: not a data group on some members only", raftstore.ErrRefused, g)
	case !n.brokersOpen:
		return fmt.Errorf("%w: this member is still starting", raftstore.ErrRefused)
	}
	dg := n.groups[g]
	if dg.hosted() {
		return nil
	}
	if dg.gone.Load() || dg.live.Load() {
		return fmt.Errorf("data group %d: %w", g, peer.ErrRestartToHost)
	}
	self := uint64(n.cfg.NodeID)
	voters := append(slices.DeleteFunc(slices.Clone(dg.votersNow()), func(id uint64) bool { return id == self }), self)
	slices.Sort(voters)
	if err := n.recordVoters(dg.id, voters); err != nil {
		return fmt.Errorf("data group %d: recording that this member hosts it: %w", g, err)
	}
	rep, pg, err := n.openGroupReplica(dg.id, n.storeOpts)
	if err != nil {
		return fmt.Errorf("data group %d: %w", g, err)
	}
	rn, err := n.groups[0].raft.StartGroup(g, pg)
	if err != nil {
		return errors.Join(fmt.Errorf("data group %d: %w", g, err), rep.Close(context.Background()))
	}
	rep.Attach(rn)
	b, err := n.openGroupBroker(ctx, dg.id, rep, dg.log)
	if err != nil {
		// The group's node stays registered, stopped: the member hosts
		// the group again once restarted (its record says it does).
		return errors.Join(fmt.Errorf("data group %d: its broker: %w (restart this member)", g, err), rn.Stop(), rep.Close(context.Background()))
	}
	dg.rep, dg.raft, dg.broker = rep, rn, b
	rep.OnMetaApplied(dg.applied)
	dg.live.Store(true)
	if err := n.followGroups(dg); err != nil {
		return err
	}
	dg.log.Info("hosting the data group: its replica opened, waiting to be added to the group")
	return nil
}

// recordVoters rewrites replicasFile with group g's voters.
func (n *Node) recordVoters(g int, voters []uint64) error {
	n.recordMu.Lock()
	defer n.recordMu.Unlock()
	path := filepath.Join(n.cfg.DataDir, replicasFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rec replicaRecord
	if err := json.Unmarshal(b, &rec); err != nil || g >= len(rec.Voters) {
		return fmt.Errorf("%s is damaged (%q)", path, b)
	}
	rec.Voters[g] = slices.Clone(voters)
	if b, err = json.Marshal(rec); err != nil {
		return err
	}
	return writeFileSync(path, append(b, '\n'))
}

// unhosted deletes the replica of each data group this member holds a
// directory of but does not host (it was removed from the group: unhost),
// when it starts. A group the record still has it host, but whose address
// book says it was removed from (it stopped before recording it), is
// recorded as not hosted first. It returns voters as they now are.
func (n *Node) unhosted(voters [][]uint64) ([][]uint64, error) {
	self := uint64(n.cfg.NodeID)
	for g := 1; g < len(voters); g++ {
		dir := groupDir(n.cfg.DataDir, g)
		if slices.Contains(voters[g], self) {
			gone, err := peer.WasRemoved(filepath.Join(dir, "members.json"), self)
			if err != nil {
				return nil, fmt.Errorf("data group %d: %w", g, err)
			}
			if !gone {
				continue
			}
			voters[g] = slices.DeleteFunc(slices.Clone(voters[g]), func(id uint64) bool { return id == self })
			if err := n.recordVoters(g, voters[g]); err != nil {
				return nil, fmt.Errorf("data group %d: recording that this member was removed from it: %w", g, err)
			}
		}
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("data group %d: deleting the replica this member no longer hosts: %w", g, err)
		}
		n.log.Info("deleted the replica of a data group this member was removed from", "group", g, "dir", dir)
	}
	return voters, nil
}

// farLeader is the leader and voters of a group this member does not
// host, as the members hosting it say (watchFarLeaders).
type farLeader struct {
	mu      sync.Mutex
	lead    uint64
	term    uint64
	voters  []uint64      // nil: not learned yet
	changed chan struct{} // closed at the next change of lead
}

func newFarLeader() *farLeader { return &farLeader{changed: make(chan struct{})} }

func (f *farLeader) leader() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lead
}

func (f *farLeader) changes() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// knownVoters are the group's voters as learned (nil: none yet).
func (f *farLeader) knownVoters() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.voters
}

// learn takes a hosting member's view: one of a higher term replaces what
// is known; one of the same term fills in a leader not known yet, and its
// voters replace those known (a configuration changes within a term).
func (f *farLeader) learn(lead, term uint64, voters []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if term >= f.term && len(voters) > 0 {
		f.voters = voters
	}
	if term < f.term || term == f.term && (lead == 0 || f.lead != 0) {
		return
	}
	f.term = term
	if f.lead != lead {
		f.lead = lead
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// farLeadersEvery is how often a member asks the others which members
// lead the groups it does not host.
const farLeadersEvery = 200 * time.Millisecond

// watchFarLeaders keeps the leader and voters of each group this member
// does not host known, asking the other members of the cluster (group
// 0's; a member answers for the groups it hosts) every farLeadersEvery,
// until ctx ends.
func (n *Node) watchFarLeaders(ctx context.Context) {
	far := false
	for _, dg := range n.groups {
		far = far || !dg.hosted()
	}
	if !far {
		return
	}
	raft := n.groups[0].raft
	self := uint64(n.cfg.NodeID)
	t := time.NewTicker(farLeadersEvery)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*farLeadersEvery)
		var wg sync.WaitGroup
		m := raft.Members()
		for _, id := range slices.Concat(m.Voters, m.Learners) {
			if id == self {
				continue
			}
			wg.Go(func() {
				ls, err := raft.GroupLeaders(cctx, id)
				if err != nil {
					return
				}
				for _, l := range ls {
					if l.Group < uint64(len(n.groups)) && !n.groups[l.Group].hosted() {
						n.groups[l.Group].far.learn(l.Leader, l.Term, l.Voters)
					}
				}
			})
		}
		wg.Wait()
		cancel()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
