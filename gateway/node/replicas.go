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
)

// Replica sets (docs/architecture.md, "Replica sets"). With
// Config.GroupReplicas R below the number of members, group 0 (the
// catalog alone: it holds no queue) stays on every member and each other
// data group has replicas on R members only, spread over them when the
// cluster is created (replicaSets). A member hosts the groups it has
// replicas of; for the others it learns the leader and voters from the
// members that host them (watchFarLeaders) and forwards their requests
// there. A member replacing another (Config.Replaces) hosts the groups
// the other votes in, as the running members answer them.

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

// replacement is a new member taking the place of member old (Config.
// Replaces): learn asks the running members for their groups' voters.
type replacement struct {
	self, old uint64
	learn     func() ([][]uint64, error)
}

// groupVoters decides, for a member of a cluster of several data groups,
// which members each group is on: nil when every member hosts every
// group (the cluster was created without --group-replicas, or with one
// at least its number of members), else what replicasFile records, made
// on the first start from --peers, or for a member replacing another
// (rp set) from the running members' answers, this member in the place
// of the other. A member restarted with another --group-replicas than
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

// replacedVoters is each group's voters as the running members answer
// them, rp.self in the place of rp.old: the groups this member hosts are
// those rp.old votes in (or this member already does, when an earlier
// replacement got part of the way), and group 0.
func replacedVoters(rp *replacement, groups int) ([][]uint64, error) {
	vs, err := rp.learn()
	if err != nil {
		return nil, fmt.Errorf("replaces: which data groups member %d votes in: %w", rp.old, err)
	}
	if len(vs) != groups {
		return nil, fmt.Errorf("replaces: the running members have %d data groups, this member %d: start it with --data-groups %d", len(vs), groups, len(vs))
	}
	found := false
	for g, set := range vs {
		had := slices.Contains(set, rp.old) || slices.Contains(set, rp.self)
		found = found || g > 0 && had
		set = slices.DeleteFunc(slices.Clone(set), func(id uint64) bool { return id == rp.old || id == rp.self })
		if had || g == 0 {
			set = append(set, rp.self)
		}
		slices.Sort(set)
		vs[g] = set
	}
	if !found {
		return nil, fmt.Errorf("replaces: member %d votes in no data group of the cluster (its groups: %v)", rp.old, vs)
	}
	return vs, nil
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
					if l.Group < uint64(len(n.groups)) && n.groups[l.Group].far != nil {
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
