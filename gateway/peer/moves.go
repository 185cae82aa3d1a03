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

// Moving data groups' replicas between the members of a cluster whose
// data groups are on some members only (Config.GroupReplicas): one
// replica (DialMoveReplica), every replica of a member being removed
// (DialRemoveMember: drain), as many as even the members' shares
// (DialRebalance), and the plan of those a new member takes (GrowMoves). A move adds the new replica before it removes the old
// one, so a group never has fewer voters than it had.

// DialMoveReplica asks the cluster that the member at peerAddr belongs
// to (one whose data groups are on some members only) to move data group
// g's replica from member from to member to: to opens an empty replica
// and starts the group's raft member (the peer HostGroup call), is added
// to the group (learner, caught up, promoted: AddMember), and from is
// removed from it (it stops hosting the group: the next start deletes its
// replica). Each change goes to the group's leader; called again after a
// failure, it resumes.
func DialMoveReplica(ctx context.Context, peerAddr, clusterID string, g, from, to uint64) error {
	groups, replicas, err := dialGroups(ctx, peerAddr, clusterID)
	if err != nil {
		return err
	}
	switch {
	case replicas == 0:
		return badRequest("peer: the cluster's data groups are on every member: there is no replica to move")
	case g == 0 || g >= uint64(groups):
		return badRequest("peer: move a replica of group %d: not a data group of the %d (group 0 is on every member)", g, groups)
	case from == to:
		return badRequest("peer: move a replica of data group %d from member %d to itself", g, from)
	}
	ch := changer{ctx: ctx, clusterID: clusterID, groups: groups}
	return ch.move(peerAddr, g, from, to)
}

// move is DialMoveReplica's work.
func (c changer) move(peerAddr string, g, from, to uint64) error {
	st0, err := dialGroupStatus(c.ctx, peerAddr, c.clusterID, 0)
	if err != nil {
		return err
	}
	addr := st0.Peers[to]
	if addr == "" || !slices.Contains(st0.Voters, to) {
		return badRequest("peer: move a replica of data group %d to member %d: not a member of the cluster (its members: %v)", g, to, st0.Voters)
	}
	entry, st, err := groupEntry(c.ctx, peerAddr, c.clusterID, g)
	if err != nil {
		return err
	}
	switch {
	case slices.Contains(st.Voters, to) && !slices.Contains(st.Voters, from):
		return nil // moved already
	case !slices.Contains(st.Voters, from) && !slices.Contains(st.Voters, to):
		return badRequest("peer: move a replica of data group %d from member %d: it holds none (the group's voters: %v)", g, from, st.Voters)
	}
	if !slices.Contains(st.Voters, to) {
		if err := invoke(c.ctx, addr, c.clusterID, func(pc clusterv1.PeerServiceClient, ctx context.Context) error {
			_, err := pc.HostGroup(ctx, &clusterv1.HostGroupRequest{Group: g})
			return err
		}, "host data group %d on member %d", g, to); err != nil {
			if status.Code(errors.Unwrap(err)) == codes.FailedPrecondition {
				return fmt.Errorf("%w: %w", errCannotHost, err)
			}
			return err
		}
		if err := c.add(entry, g, to, addr); err != nil {
			return err
		}
	}
	return c.remove(entry, g, from)
}

// errCannotHost: the member a replica was to move to cannot host the
// group now (it was removed from it since it started).
var errCannotHost = errors.New("peer: the member cannot host the data group now")

// drain is DialRemoveMember in a cluster of replica sets: each data group
// of member id moves to the member holding the fewest replicas among
// those not in it (the lowest id of those; the next one when that one
// cannot host it now), then id leaves group 0.
func (c changer) drain(peerAddr string, id uint64) error {
	entry, err := otherMember(c.ctx, peerAddr, c.clusterID, id)
	if err != nil {
		return err
	}
	vs, err := dialGroupVoters(c.ctx, entry, c.clusterID)
	if err != nil {
		return err
	}
	blocked := map[Move]bool{}
	for {
		moves := drainMoves(vs, id, blocked)
		if len(moves) == 0 {
			break
		}
		m := moves[0]
		if m.To == 0 {
			return badRequest("peer: remove member %d: no member can take its replica of data group %d now (the group's voters: %v; the members: %v)",
				id, m.Group, vs[m.Group], vs[0])
		}
		err := c.move(entry, m.Group, id, m.To)
		switch {
		case errors.Is(err, errCannotHost):
			blocked[Move{Group: m.Group, To: m.To}] = true
			continue
		case err != nil:
			return err
		}
		m.Apply(vs)
	}
	return c.remove(entry, 0, id)
}

// Move is one replica of a data group moving from one member to another.
type Move struct {
	Group    uint64
	From, To uint64
}

// Apply changes vs (each group's voters, by group) as m does: its group's
// voters lose From and gain To, sorted. The group's set is a new slice.
func (m Move) Apply(vs [][]uint64) {
	set := slices.DeleteFunc(slices.Clone(vs[m.Group]), func(id uint64) bool { return id == m.From || id == m.To })
	set = append(set, m.To)
	slices.Sort(set)
	vs[m.Group] = set
}

// held counts the data group replicas each member of vs[0] (group 0's
// voters: every member) holds.
func held(vs [][]uint64) map[uint64]int {
	n := map[uint64]int{}
	for _, id := range vs[0] {
		n[id] = 0
	}
	for _, set := range vs[1:] {
		for _, id := range set {
			n[id]++
		}
	}
	return n
}

// drainMoves are the moves taking every data group replica off member
// id: each to the member holding the fewest among those not in the group
// (the lowest id of those; 0 when there is none), but for the moves of
// blocked (by group and member moved to).
func drainMoves(vs [][]uint64, id uint64, blocked map[Move]bool) []Move {
	n := held(vs)
	delete(n, id)
	var out []Move
	for g := 1; g < len(vs); g++ {
		if !slices.Contains(vs[g], id) {
			continue
		}
		var to uint64
		for _, m := range slices.Sorted(maps.Keys(n)) {
			if !slices.Contains(vs[g], m) && !blocked[Move{Group: uint64(g), To: m}] && (to == 0 || n[m] < n[to]) {
				to = m
			}
		}
		if to != 0 {
			n[to]++
		}
		out = append(out, Move{Group: uint64(g), From: id, To: to})
	}
	return out
}

// GrowMoves decides which replicas a new member, self, takes, given each
// group's voters (vs[0], group 0's, are every member, self among them):
// one at a time from the member holding the most data group replicas
// (the highest id of those), of its groups the lowest one self does not
// hold yet, while that leaves the giver with at least as many as self
// will then hold. Every member computes the same from the same voters; a
// group where self votes already (an earlier start) counts as taken.
func GrowMoves(vs [][]uint64, self uint64) []Move {
	n := held(vs)
	if _, ok := n[self]; !ok {
		n[self] = 0 // group 0 does not list it yet
	}
	mine := map[int]bool{}
	for g := 1; g < len(vs); g++ {
		mine[g] = slices.Contains(vs[g], self)
	}
	var out []Move
	for {
		var from uint64
		for id, c := range n {
			if id != self && (from == 0 || c > n[from] || c == n[from] && id > from) {
				from = id
			}
		}
		if from == 0 || n[from]-1 < n[self]+1 {
			return out
		}
		g := 0
		for c := 1; c < len(vs); c++ {
			if !mine[c] && slices.Contains(vs[c], from) {
				g = c
				break
			}
		}
		if g == 0 {
			return out
		}
		out = append(out, Move{Group: uint64(g), From: from, To: self})
		mine[g] = true
		n[from]--
		n[self]++
	}
}

// rebalanceMoves are the moves evening the members' replicas out: while
// the member holding the most (the highest id of those) holds two more
// than one holding the fewest (the lowest id of those), one of its
// groups (the lowest) that member lacks moves to it, but for the moves
// of blocked (by group and member moved to).
func rebalanceMoves(vs [][]uint64, blocked map[Move]bool) []Move {
	n := held(vs)
	sets := slices.Clone(vs) // Apply replaces a group's set: vs's stay as they are
	ids := slices.Sorted(maps.Keys(n))
	var out []Move
	for len(out) < len(vs)*len(ids) {
		var most uint64
		for _, id := range ids {
			if most == 0 || n[id] >= n[most] {
				most = id
			}
		}
		var mv Move
		for _, few := range ids {
			if n[most]-n[few] < 2 {
				continue
			}
			for g := 1; g < len(sets) && mv.To == 0; g++ {
				if slices.Contains(sets[g], most) && !slices.Contains(sets[g], few) && !blocked[Move{Group: uint64(g), To: few}] {
					mv = Move{Group: uint64(g), From: most, To: few}
				}
			}
			if mv.To != 0 {
				break
			}
		}
		if mv.To == 0 {
			return out
		}
		mv.Apply(sets)
		n[most]--
		n[mv.To]++
		out = append(out, mv)
	}
	return out
}

// DialRebalance asks the cluster that the member at peerAddr belongs to
// (one whose data groups are on some members only) to even the members'
// replicas out (rebalanceMoves), one move at a time, and returns the
// moves made. The leaderships then spread on their own.
func DialRebalance(ctx context.Context, peerAddr, clusterID string) ([]Move, error) {
	groups, replicas, err := dialGroups(ctx, peerAddr, clusterID)
	if err != nil {
		return nil, err
	}
	if replicas == 0 {
		return nil, badRequest("peer: the cluster's data groups are on every member: there are no replicas to move")
	}
	vs, err := dialGroupVoters(ctx, peerAddr, clusterID)
	if err != nil {
		return nil, err
	}
	c := changer{ctx: ctx, clusterID: clusterID, groups: groups}
	var done []Move
	blocked := map[Move]bool{}
	for {
		moves := rebalanceMoves(vs, blocked)
		if len(moves) == 0 {
			return done, nil
		}
		m := moves[0]
		err := c.move(peerAddr, m.Group, m.From, m.To)
		switch {
		case errors.Is(err, errCannotHost):
			blocked[Move{Group: m.Group, To: m.To}] = true
			continue
		case err != nil:
			return done, err
		}
		m.Apply(vs)
		done = append(done, m)
	}
}
