package peer

import (
	"slices"
	"testing"
)

// Draining a member moves each of its replicas to the member holding
// the fewest among those not in the group; rebalancing evens the members'
// counts out to within one.
func TestReplicaMovePlans(t *testing.T) {
	// Five members, five data groups of three: three replicas each.
	vs := [][]uint64{{1, 2, 3, 4, 5}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	got := drainMoves(vs, 3, nil)
	want := []Move{{Group: 1, From: 3, To: 4}, {Group: 2, From: 3, To: 1}, {Group: 3, From: 3, To: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("drain member 3: %v, want %v", got, want)
	}
	after := held(apply(vs, got))
	delete(after, 3)
	for id, n := range after {
		if n < 3 || n > 4 {
			t.Fatalf("after draining member 3, member %d holds %d (%v)", id, n, after)
		}
	}
	// A member that cannot host a group now is passed over.
	if got := drainMoves(vs, 3, map[Move]bool{{Group: 1, To: 4}: true}); got[0] != (Move{Group: 1, From: 3, To: 5}) {
		t.Fatalf("drain member 3, member 4 unable to host group 1: %v", got)
	}
	if moves := rebalanceMoves(vs, nil); len(moves) != 0 {
		t.Fatalf("balanced replicas: rebalance moves %v", moves)
	}
	// Member 1 holds four, member 2 two: one move evens them.
	skew := [][]uint64{{1, 2, 3, 4, 5}, {1, 3, 4}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	got = rebalanceMoves(skew, nil)
	if len(got) != 1 {
		t.Fatalf("rebalance %v: moves %v, want one", skew, got)
	}
	n := held(apply(skew, got))
	for id, c := range n {
		if c < 2 || c > 4 || c == 4 && id != 4 {
			t.Fatalf("after rebalancing: %v (moves %v)", n, got)
		}
	}
	// A member of no group (one just added) gets its share.
	grown := [][]uint64{{1, 2, 3, 4, 5, 6}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	got = rebalanceMoves(grown, nil)
	n = held(apply(grown, got))
	if n[6] != 2 {
		t.Fatalf("rebalance with a new member: %v after %v", n, got)
	}
}

// apply is vs after moves.
func apply(vs [][]uint64, moves []Move) [][]uint64 {
	out := make([][]uint64, len(vs))
	for g := range vs {
		out[g] = slices.Clone(vs[g])
	}
	for _, m := range moves {
		out[m.Group] = append(slices.DeleteFunc(out[m.Group], func(id uint64) bool { return id == m.From }), m.To)
	}
	return out
}
