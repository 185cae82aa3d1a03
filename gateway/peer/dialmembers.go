package peer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	clusterv1 "github.com/mqgate/mqgate/gen/mqgate/cluster/v1"
)

// The membership changes an operator makes through any member (`mqgate
// cluster add-node` and `remove-node`): each change goes to its group's
// leader (atLeader), one group after another, and a call made again
// after a failure resumes where it stopped.

// DialAddMember asks the cluster that the member at peerAddr belongs to
// to add member id, whose peer address is addr (Node.AddMember), to each
// of its raft groups in turn, the first group (the catalog) first, and
// returns once id votes in every group or ctx ends. Each request goes to
// its group's leader (atLeader). Called again after a failure, it
// resumes: a group where id already votes is left as it is.
//
// In a cluster whose data groups are on some members only
// (Config.GroupReplicas R), id joins group 0 and the data groups it
// hosts (it chose them when it started, taking replicas from the members
// holding the most): in each, once id votes, the voter holding the most
// replicas of the cluster's data groups (the highest id of those) is
// removed, so that the group has R voters again.
func DialAddMember(ctx context.Context, peerAddr, clusterID string, id uint64, addr string) error {
	groups, replicas, err := dialGroups(ctx, peerAddr, clusterID)
	if err != nil {
		return err
	}
	ch := changer{ctx: ctx, clusterID: clusterID, groups: groups}
	if replicas > 0 {
		return ch.takeReplicas(peerAddr, id, addr, replicas)
	}
	for g := range uint64(groups) {
		if err := ch.add(peerAddr, g, id, addr); err != nil {
			return err
		}
	}
	return nil
}

// changer makes the membership changes of a Dial call, each at its
// group's leader.
type changer struct {
	ctx       context.Context
	clusterID string
	groups    int
}

// add adds member id, at peer address addr, to group g, entering through
// the member at entry.
func (c changer) add(entry string, g, id uint64, addr string) error {
	return atLeader(c.ctx, entry, c.clusterID, g, func(at string) error {
		return invoke(c.ctx, at, c.clusterID, func(pc clusterv1.PeerServiceClient, ctx context.Context) error {
			_, err := pc.AddMember(ctx, &clusterv1.AddMemberRequest{Id: id, Peer: addr, Group: g})
			return err
		}, "add member %d%s", id, groupNote(c.groups, g))
	})
}

// remove removes member id from group g, entering through the member at
// entry.
func (c changer) remove(entry string, g, id uint64) error {
	return atLeader(c.ctx, entry, c.clusterID, g, func(at string) error {
		return invoke(c.ctx, at, c.clusterID, func(pc clusterv1.PeerServiceClient, ctx context.Context) error {
			_, err := pc.RemoveMember(ctx, &clusterv1.RemoveMemberRequest{Id: id, Group: g})
			return err
		}, "remove member %d%s", id, groupNote(c.groups, g))
	})
}

// takeReplicas is DialAddMember in a cluster of replica sets.
func (c changer) takeReplicas(peerAddr string, id uint64, addr string, replicas int) error {
	if err := c.add(peerAddr, 0, id, addr); err != nil {
		return err
	}
	vs, err := dialGroupVoters(c.ctx, peerAddr, c.clusterID)
	if err != nil {
		return err
	}
	n := held(vs)
	for g := uint64(1); g < uint64(c.groups); g++ {
		_, err := dialGroupStatus(c.ctx, addr, c.clusterID, g)
		if status.Code(errors.Unwrap(err)) == codes.NotFound {
			continue // not one of the new member's groups
		}
		if err != nil {
			return fmt.Errorf("peer: add member %d: %w", id, err)
		}
		entry, st, err := groupEntry(c.ctx, peerAddr, c.clusterID, g)
		if err != nil {
			return err
		}
		if !slices.Contains(st.Voters, id) {
			// Added, it votes (the member asked may not have applied that yet).
			if err := c.add(entry, g, id, addr); err != nil {
				return err
			}
			n[id]++
			st.Voters = append(st.Voters, id)
		}
		if len(st.Voters) <= replicas {
			continue
		}
		var out uint64
		for _, v := range st.Voters {
			if v != id && (out == 0 || n[v] > n[out] || n[v] == n[out] && v > out) {
				out = v
			}
		}
		if err := c.remove(entry, g, out); err != nil {
			return err
		}
		n[out]--
	}
	return nil
}

// DialReplaceMember asks the cluster that the member at peerAddr belongs
// to to put member id, whose peer address is addr, in the place of member
// old: id is added to group 0 (Node.AddMember), then to each data group
// old votes in, where old is removed (Node.RemoveMember) once id votes,
// and old leaves group 0 last. So each group keeps its number of replicas
// but for the one being added. It is how a member of a cluster whose data
// groups are on some members only (Config.GroupReplicas) is replaced
// (old may be down, its data lost): id must run with Config.Join,
// hosting old's groups. Each request goes to its group's leader; called
// again after a failure, it resumes.
func DialReplaceMember(ctx context.Context, peerAddr, clusterID string, old, id uint64, addr string) error {
	if old == id {
		return badRequest("peer: member %d cannot replace itself: the replacement joins under a new id", id)
	}
	a, err := dialInfo(ctx, peerAddr, clusterID)
	if err != nil {
		return err
	}
	if a.GetId() == old {
		return badRequest("peer: replace member %d: enter through another member than the one replaced", old)
	}
	ch := changer{ctx: ctx, clusterID: clusterID, groups: int(max(a.GetDataGroups(), 1))}
	if err := ch.add(peerAddr, 0, id, addr); err != nil {
		return err
	}
	for g := uint64(1); g < uint64(ch.groups); g++ {
		entry, st, err := groupEntry(ctx, peerAddr, clusterID, g)
		if err != nil {
			return err
		}
		if !slices.Contains(st.Voters, old) && !slices.Contains(st.Voters, id) && !slices.Contains(st.Learners, id) {
			continue // neither member's group
		}
		if err := ch.add(entry, g, id, addr); err != nil {
			return err
		}
		if err := ch.remove(entry, g, old); err != nil {
			return err
		}
	}
	return ch.remove(peerAddr, 0, old)
}

// DialGroupVoters asks the members of peers (but those of skip), in id
// order until one answers, for the voters of each of their cluster's raft
// groups (by group), each group's from a member hosting it.
func DialGroupVoters(ctx context.Context, peers map[uint64]string, skip []uint64, clusterID string) ([][]uint64, error) {
	ids := slices.Sorted(maps.Keys(peers))
	var errs []error
	for _, id := range ids {
		if slices.Contains(skip, id) {
			continue
		}
		voters, err := dialGroupVoters(ctx, peers[id], clusterID)
		if err == nil {
			return voters, nil
		}
		errs = append(errs, fmt.Errorf("member %d: %w", id, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("peer: no member answered with its groups' voters: %w", errors.Join(errs...))
}

func dialGroupVoters(ctx context.Context, peerAddr, clusterID string) ([][]uint64, error) {
	a, err := dialInfo(ctx, peerAddr, clusterID)
	if err != nil {
		return nil, err
	}
	out := make([][]uint64, max(a.GetDataGroups(), 1))
	for g := range out {
		_, st, err := groupEntry(ctx, peerAddr, clusterID, uint64(g))
		if err != nil {
			return nil, err
		}
		out[g] = st.Voters
	}
	return out, nil
}

// DialRemoveMember asks the cluster that the member at peerAddr belongs
// to to remove member id (Node.RemoveMember) from each of its raft
// groups, the first group (the catalog, which also decides whom the
// members talk to) last. Each request goes to its group's leader
// (atLeader); a leader asked to remove itself hands the leadership over
// first, and the request follows it. Called again after a failure, it
// resumes. In a cluster whose data groups are on some members only
// (Config.GroupReplicas), each data group replica of id moves first to
// the member holding the fewest among those not in the group (moves.go,
// drain), then id leaves group 0.
func DialRemoveMember(ctx context.Context, peerAddr, clusterID string, id uint64) error {
	groups, replicas, err := dialGroups(ctx, peerAddr, clusterID)
	if err != nil {
		return err
	}
	if replicas > 0 {
		return changer{ctx: ctx, clusterID: clusterID, groups: groups}.drain(peerAddr, id)
	}
	entry := peerAddr
	if groups > 1 {
		// The member removed stops serving its groups one by one: the
		// requests enter through another one.
		if entry, err = otherMember(ctx, peerAddr, clusterID, id); err != nil {
			return err
		}
	}
	ch := changer{ctx: ctx, clusterID: clusterID, groups: groups}
	for g := uint64(groups); g > 0; g-- {
		if err := ch.remove(entry, g-1, id); err != nil {
			return err
		}
	}
	return nil
}

// dialGroups asks the member at peerAddr how many raft groups its
// cluster has, and how many members each data group but the first has
// replicas on (0: every member).
func dialGroups(ctx context.Context, peerAddr, clusterID string) (groups, replicas int, err error) {
	a, err := dialInfo(ctx, peerAddr, clusterID)
	if err != nil {
		return 0, 0, err
	}
	return int(max(a.GetDataGroups(), 1)), int(a.GetGroupReplicas()), nil
}

// dialInfo asks the member at peerAddr for its Info.
func dialInfo(ctx context.Context, peerAddr, clusterID string) (*clusterv1.InfoResponse, error) {
	conn, err := dial(ctx, peerAddr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	a, err := callInfo(ctx, conn, clusterID)
	if err != nil {
		return nil, fmt.Errorf("peer: info of %s: %w", peerAddr, err)
	}
	return a, nil
}

// otherMember is the peer address of a voter other than member id, as
// the member at peerAddr knows them (peerAddr itself when it is not id).
func otherMember(ctx context.Context, peerAddr, clusterID string, id uint64) (string, error) {
	st, err := DialStatus(ctx, peerAddr, clusterID)
	if err != nil {
		return "", err
	}
	if st.ID != id {
		return peerAddr, nil
	}
	for _, v := range st.Voters {
		if v != id && st.Peers[v] != "" {
			return st.Peers[v], nil
		}
	}
	return "", badRequest("peer: remove member %d: the member at %s knows no other voter", id, peerAddr)
}
