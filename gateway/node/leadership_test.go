package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/gateway/peer"
)

// fakeLeadership stands for the raft member, the replica and the broker
// that reconcile drives.
type fakeLeadership struct {
	term, leader uint64
	uncertain    uint64
	applied      uint64
	active       bool
	activations  int
	barriers     int
	// duringActivate runs inside Activate (to change leadership under it).
	duringActivate func()
	// formats are the members' MemberInfo.Format, by id (the members);
	// format is the group's, raised by RaiseFormat.
	formats map[uint64]int
	format  int
	keys    int // EnsureKeys calls
	// offsets are the other members' clocks against this one's, by id.
	offsets  map[uint64]time.Duration
	handoffs int
	marked   uint64 // the term of the last MarkLeading
}

func (f *fakeLeadership) LeaderTerm() uint64             { return f.term }
func (f *fakeLeadership) Leader() uint64                 { return f.leader }
func (f *fakeLeadership) LeaderHeard() time.Time         { return time.Now() }
func (f *fakeLeadership) ElectionTimeout() time.Duration { return time.Second }
func (f *fakeLeadership) MemberInfo(_ context.Context, id uint64) (peer.MemberInfo, error) {
	return peer.MemberInfo{GRPC: "leader:8081", Format: f.formats[id]}, nil
}
func (f *fakeLeadership) ClockOffset(_ context.Context, id uint64) (time.Duration, time.Duration, error) {
	return f.offsets[id], time.Millisecond, nil
}
func (f *fakeLeadership) Handoff(context.Context) error { f.handoffs++; return nil }
func (f *fakeLeadership) ReleaseUnseen(context.Context, func(string) bool) []string {
	return nil
}
func (f *fakeLeadership) Members() peer.Membership {
	var m peer.Membership
	for id := range f.formats {
		m.Voters = append(m.Voters, id)
	}
	return m
}
func (f *fakeLeadership) Format() int { return max(f.format, 1) }
func (f *fakeLeadership) RaiseFormat(context.Context) error {
	f.format = raftstore.FormatVersion
	return nil
}
func (f *fakeLeadership) EnsureKeys(context.Context, time.Time) error { f.keys++; return nil }
func (f *fakeLeadership) RotateKeys(context.Context, time.Time, time.Duration) (bool, error) {
	return false, nil
}
func (f *fakeLeadership) ReloadKeys() error                       { return nil }
func (f *fakeLeadership) ForgetMemberInfo(uint64)                 {}
func (f *fakeLeadership) MarkLeading(term uint64)                 { f.marked = term }
func (f *fakeLeadership) Barrier(context.Context) error           { f.barriers++; return nil }
func (f *fakeLeadership) Bootstrap(context.Context, string) error { return nil }
func (f *fakeLeadership) Uncertain() uint64                       { return f.uncertain }
func (f *fakeLeadership) UncertainChanges() <-chan struct{}       { return nil }
func (f *fakeLeadership) Changes() <-chan struct{}                { return nil }
func (f *fakeLeadership) Done() <-chan struct{}                   { return nil }
func (f *fakeLeadership) Err() error                              { return nil }
func (f *fakeLeadership) Applied() uint64                         { return f.applied }
func (f *fakeLeadership) Active() bool                            { return f.active }
func (f *fakeLeadership) Deactivate(context.Context) error        { f.active = false; return nil }
func (f *fakeLeadership) Activate(context.Context) error {
	f.activations++
	f.active = true
	if f.duringActivate != nil {
		f.duringActivate()
		f.duringActivate = nil
	}
	return nil
}

// The broker's services belong to one span of leadership and one count
// of uncertain outcomes: a member that leads again in a later term
// (whatever reconcile saw in between) builds them again after a
// barrier, as it does after an outcome it could not learn; leadership
// that changes while they are built leaves them closed.
func TestReconcileActivationBoundToTerm(t *testing.T) {
	n := &Node{log: quietLogger()}
	f := &fakeLeadership{term: 5, leader: 1}
	l := leadership{raft: f, rep: f, broker: f}
	var act activation
	ctx := context.Background()
	step := func(what string, wantOK bool, wantActive bool, wantActivations int) {
		t.Helper()
		if ok := n.reconcile(ctx, l, &act); ok != wantOK || f.active != wantActive || f.activations != wantActivations {
			t.Fatalf("%s: reconcile %v, active %v after %d activations; want %v, %v, %d", what, ok, f.active, f.activations, wantOK, wantActive, wantActivations)
		}
	}
	step("leading in term 5", true, true, 1)
	step("nothing changed", true, true, 1)
	if f.barriers != 1 {
		t.Fatalf("%d barriers, want 1", f.barriers)
	}
	// Deposed in term 6 and leading again in term 7, between two looks.
	f.term = 7
	step("leading again in term 7", true, true, 2)
	if act.term != 7 || f.barriers != 2 || f.marked != 7 {
		t.Fatalf("activation of term %d after %d barriers, replica marked for term %d; want term 7 after 2, marked 7", act.term, f.barriers, f.marked)
	}
	f.uncertain++
	step("an uncertain outcome", true, true, 3)
	// Leadership moves while the services are built: they are closed.
	f.duringActivate = func() { f.term = 9 }
	f.term = 8
	step("term 8, lost while activating", false, false, 4)
	step("term 9", true, true, 5)
	if act.term != 9 || f.marked != 9 {
		t.Fatalf("activation of term %d, replica marked for term %d; want 9", act.term, f.marked)
	}
	// Following: the services close.
	f.term, f.leader = 0, 2
	step("following member 2", true, false, 5)
}

// activate fails without leaving the services open when the barrier
// fails.
func TestActivateBarrierFails(t *testing.T) {
	n := &Node{log: quietLogger()}
	f := &failingBarrier{fakeLeadership{term: 3, leader: 1}}
	l := leadership{raft: f, rep: f, broker: f}
	if err := n.activate(context.Background(), l, activation{term: 3}); err == nil || f.active {
		t.Fatalf("activate with a failing barrier: %v, active %v", err, f.active)
	}
}

type failingBarrier struct{ fakeLeadership }

func (f *failingBarrier) Barrier(context.Context) error { return errors.New("no quorum") }

// The leader raises the group's entry format only when every member
// reads it: one member of an older version (no format in its info)
// keeps the group where it is.
func TestRaiseFormatWhenEveryMemberReadsIt(t *testing.T) {
	n := &Node{log: quietLogger()}
	f := &fakeLeadership{term: 2, leader: 1, formats: map[uint64]int{1: raftstore.FormatVersion, 2: raftstore.FormatVersion, 3: 0}}
	l := leadership{raft: f, rep: f, broker: f}
	n.raiseFormat(context.Background(), l)
	if f.Format() != 1 {
		t.Fatalf("format %d with a member of an older version, want 1", f.Format())
	}
	f.formats[3] = raftstore.FormatVersion
	n.raiseFormat(context.Background(), l)
	if f.Format() != raftstore.FormatVersion {
		t.Fatalf("format %d with every member reading %d", f.Format(), raftstore.FormatVersion)
	}
}

// A leader whose clock differs from the others' by more than the
// allowed skew does not serve and hands its leadership over; one other
// member off does not stop it.
func TestActivateChecksTheClock(t *testing.T) {
	n := &Node{log: quietLogger(), cfg: Config{NodeID: 1}}
	f := &fakeLeadership{term: 4, leader: 1, formats: map[uint64]int{1: 2, 2: 2, 3: 2},
		offsets: map[uint64]time.Duration{2: 3 * time.Second, 3: 2500 * time.Millisecond}}
	l := leadership{raft: f, rep: f, broker: f}
	var act activation
	if n.reconcile(context.Background(), l, &act) || f.active || f.handoffs != 1 {
		t.Fatalf("a leader 2.5-3 s off both others: active %v, %d handoffs", f.active, f.handoffs)
	}
	f.offsets[3] = 20 * time.Millisecond
	if !n.reconcile(context.Background(), l, &act) || !f.active {
		t.Fatalf("a leader off one other member only: active %v", f.active)
	}
}
