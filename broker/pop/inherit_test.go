package pop

import (
	"context"
	"testing"
	"time"
)

// A service opened with an inherited grace (a new leader, whose clock
// may run ahead of the one that recorded the deadlines) keeps every
// delivery in flight invisible for the grace past its recorded deadline.
func TestInheritedGrace(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(1, "")
	e.mustReceive(1) // invisible for a minute
	if err := e.svc.Abort(e.ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := Open(e.ctx, Config{Clock: e.clk, SnapshotInterval: time.Hour, RenewInterval: time.Hour, InheritedGrace: 2 * time.Second},
		e.store, e.store.Meta(), dlqTopics{})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.clk.Advance(time.Minute + time.Second) // past the deadline, within the grace
	e.expectNothing()
	e.clk.Advance(1500 * time.Millisecond)
	if got := e.mustReceive(1); len(got) != 1 {
		t.Fatalf("after the grace: %d messages", len(got))
	}
}

// The clients whose deliveries are renewed automatically are listed
// once each; releasing one makes its deliveries visible again soon.
func TestRenewedClients(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(3, "")
	for i, c := range []string{"push-1", "push-1", "push-2"} {
		if _, err := e.svc.Receive(e.ctx, ReceiveRequest{Group: e.group, Topic: e.topic, Max: 1, Invisible: time.Minute, QueueID: -1,
			AutoRenew: true, ClientID: c}); err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
	}
	got := e.svc.RenewedClients()
	if len(got) != 2 {
		t.Fatalf("renewed clients %v, want push-1 and push-2 once each", got)
	}
	e.svc.ReleaseClient(context.Background(), "push-2")
	if got := e.svc.RenewedClients(); len(got) != 1 || got[0] != "push-1" {
		t.Fatalf("after releasing push-2: %v", got)
	}
	e.clk.Advance(2 * time.Second)
	if out := e.mustReceive(3); len(out) != 1 {
		t.Fatalf("after the release: %d visible again, want push-2's one", len(out))
	}
}

// A snapshot is written only while SnapshotOK says so: a member that
// stopped leading does not claim, in a snapshot, store positions its
// memory never saw.
func TestSnapshotOK(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(2, "")
	ok := false
	e.svc.cfg.SnapshotOK = func() bool { return ok }
	if err := e.svc.snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := e.store.Meta().LoadBlob(snapshotBlob); found {
		t.Fatal("a snapshot was written while SnapshotOK said no")
	}
	ok = true
	if err := e.svc.snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := e.store.Meta().LoadBlob(snapshotBlob); !found {
		t.Fatal("no snapshot while SnapshotOK said yes")
	}
}
