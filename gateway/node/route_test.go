package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mqgate/mqgate/gateway/peer"
)

// fakeRouteView is a group as its leader (or a follower) sees it: the
// voters, which of them the leader heard from recently, and whose
// addresses it can learn.
type fakeRouteView struct {
	voters []uint64
	// leading: Status reports progress (only the leader has it).
	leading bool
	heard   map[uint64]bool
	// unknown members' addresses cannot be learned (down, and not asked
	// recently enough to be remembered).
	unknown map[uint64]bool
}

func (f *fakeRouteView) Members() peer.Membership { return peer.Membership{Voters: f.voters} }

func (f *fakeRouteView) Status(context.Context) (peer.Status, error) {
	if !f.leading {
		return peer.Status{}, nil
	}
	st := peer.Status{Progress: map[uint64]peer.Progress{}}
	for _, id := range f.voters {
		st.Progress[id] = peer.Progress{RecentActive: f.heard[id]}
	}
	return st, nil
}

func (f *fakeRouteView) MemberInfo(_ context.Context, id uint64) (peer.MemberInfo, error) {
	if f.unknown[id] {
		return peer.MemberInfo{}, errors.New("connection refused")
	}
	return memberAt(id), nil
}

func memberAt(id uint64) peer.MemberInfo {
	return peer.MemberInfo{GRPC: fmt.Sprintf("10.0.0.%d:8081", id), Remoting: fmt.Sprintf("10.0.0.%d:9876", id)}
}

func ids(ms []relayMember) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}

// A route names the followers the leader heard from recently, and never
// fewer than a majority of the voters: with a follower down or not heard
// from, the others known come next, then the leader. A client keeps a
// route (30 s for the official ones) through leaders dying and members
// restarting; a route of one member (the follower heard from, or the
// leader alone) leaves it nowhere to go once that member dies, while the
// two others serve on. Every majority shares a member with every other,
// so a majority named always holds one that is up while the group can
// elect a leader.
func TestRoutesNameAMajority(t *testing.T) {
	const self = 1
	for _, tc := range []struct {
		name string
		view fakeRouteView
		want []uint64
	}{
		{"both followers heard from", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true, 2: true, 3: true}},
			[]uint64{2, 3}},
		// A follower restarting: not heard from, its addresses not known.
		{"one follower heard from, the other unknown", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true, 2: true},
			unknown: map[uint64]bool{3: true}},
			[]uint64{1, 2}},
		// Check-quorum has just cleared what the leader heard, or a
		// follower has just died: both known followers are named.
		{"one follower heard from, the other known", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true, 2: true}},
			[]uint64{2, 3}},
		{"no follower heard from", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true}},
			[]uint64{2, 3}},
		{"no follower heard from, one unknown", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true},
			unknown: map[uint64]bool{2: true}},
			[]uint64{1, 3}},
		{"no follower known", fakeRouteView{voters: []uint64{1, 2, 3}, leading: true, heard: map[uint64]bool{1: true},
			unknown: map[uint64]bool{2: true, 3: true}},
			[]uint64{1}},
		{"five voters, one follower heard from", fakeRouteView{voters: []uint64{1, 2, 3, 4, 5}, leading: true, heard: map[uint64]bool{1: true, 4: true},
			unknown: map[uint64]bool{2: true}},
			[]uint64{3, 4, 5}},
		{"five voters, three followers heard from", fakeRouteView{voters: []uint64{1, 2, 3, 4, 5}, leading: true, heard: map[uint64]bool{1: true, 2: true, 4: true, 5: true}},
			[]uint64{2, 4, 5}},
		{"not leading: every voter known", fakeRouteView{voters: []uint64{1, 2, 3}, unknown: map[uint64]bool{3: true}},
			[]uint64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pickRelayMembers(context.Background(), &tc.view, self, memberAt(self))
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("route names members %v, want %v", ids(got), tc.want)
			}
			for _, m := range got {
				if m.info != memberAt(m.id) {
					t.Fatalf("member %d named with addresses %+v, want %+v", m.id, m.info, memberAt(m.id))
				}
			}
		})
	}
}
