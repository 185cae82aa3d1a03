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

// apply is vs after moves (vs unchanged).
func apply(vs [][]uint64, moves []Move) [][]uint64 {
	out := slices.Clone(vs)
	for _, m := range moves {
		m.Apply(out)
	}
	return out
}

// A new member takes replicas from the members holding the most, one
// group each, until no member holds two more than it: five members of
// three replicas each, a sixth takes two (15 replicas over six members:
// three members keep three, the others two); a group it holds already
// counts as taken.
func TestGrowMoves(t *testing.T) {
	vs := [][]uint64{{1, 2, 3, 4, 5, 6}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {1, 4, 5}, {1, 2, 5}}
	got := GrowMoves(vs, 6)
	want := []Move{{Group: 3, From: 5, To: 6}, {Group: 2, From: 4, To: 6}}
	if !slices.Equal(got, want) {
		t.Fatalf("moves %v, want %v", got, want)
	}
	for id, n := range held(apply(vs, got)) {
		if n < 2 || n > 3 {
			t.Fatalf("member %d holds %d replicas after the moves %v", id, n, got)
		}
	}
	// Resumed: the sixth already votes in group 3.
	vs[3] = []uint64{3, 4, 6}
	if got := GrowMoves(vs, 6); !slices.Equal(got, []Move{{Group: 2, From: 4, To: 6}}) {
		t.Fatalf("resumed: moves %v", got)
	}
	// Three members holding two replicas each, a fourth: it takes one
	// (two, two, one, one).
	if got := GrowMoves([][]uint64{{1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3}}, 4); !slices.Equal(got, []Move{{Group: 1, From: 3, To: 4}}) {
		t.Fatalf("three members, two groups of three, a fourth: moves %v", got)
	}
	// Nothing to take when every member holds one more at most.
	if got := GrowMoves([][]uint64{{1, 2, 3, 4}, {1, 2, 3}}, 4); len(got) != 0 {
		t.Fatalf("three members, one group of three, a fourth: moves %v, want none", got)
	}
}
