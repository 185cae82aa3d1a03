package pop

import (
	"slices"
	"testing"
	"time"
)

// deleteTopic deletes topic t from the store and then drops it from the
// service, as the metadata service does (between the two, between lets a
// test act while the deletion record is in the log and the service still
// holds the deleted topic's subscriptions).
func (e *popEnv) deleteTopic(between func()) {
	e.t.Helper()
	if err := e.store.Store.DeleteTopic(e.ctx, "t"); err != nil {
		e.t.Fatal(err)
	}
	if between != nil {
		between()
	}
	e.svc.DropTopic("t")
}

func (e *popEnv) snapshot() {
	e.t.Helper()
	if err := e.svc.Snapshot(); err != nil {
		e.t.Fatal(err)
	}
}

// TestRecreatedTopicAfterCrash: a group receives (and acks, or leaves in
// flight) the messages of a topic, the topic is deleted and made again,
// two messages are sent to it, and the service crashes. Whatever
// snapshot was written on the way, the new topic's messages come as to a
// new topic: offsets 0 and 1, first attempts, and nothing of the old one.
func TestRecreatedTopicAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		ack  bool
		// snapshots taken: before the deletion, between the deletion
		// record and the service dropping the topic, after the new
		// messages are sent.
		before, between, after bool
	}{
		{name: "acked, no snapshot", ack: true},
		{name: "acked, snapshot before deletion", ack: true, before: true},
		{name: "acked, snapshot while deleting", ack: true, between: true},
		{name: "acked, snapshot after recreation", ack: true, after: true},
		{name: "in flight, no snapshot"},
		{name: "in flight, snapshot before deletion", before: true},
		{name: "in flight, snapshot while deleting", between: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPopEnv(t, false)
			e.send(3, "")
			old := e.mustReceive(32)
			if o := offsets(old); !slices.Equal(o, []int64{0, 1, 2}) {
				t.Fatalf("first receive got offsets %v, want 0-2", o)
			}
			if tc.ack {
				e.ack(old...)
			}
			if tc.before {
				e.snapshot()
			}
			var between func()
			if tc.between {
				between = e.snapshot
			}
			e.deleteTopic(between)
			e.send(2, "")
			if tc.after {
				e.snapshot()
			}
			e.crash()
			got := e.mustReceive(32)
			if o := offsets(got); !slices.Equal(o, []int64{0, 1}) {
				t.Fatalf("after the crash got offsets %v, want 0-1 of the new topic", o)
			}
			for _, d := range got {
				if d.Attempt != 1 {
					t.Fatalf("offset %d delivered as attempt %d, want 1", d.QueueOffset, d.Attempt)
				}
			}
			e.ack(got...)
			e.expectNothing()
			// The redelivery deadline of the old deliveries passes:
			// nothing of the deleted topic comes back.
			e.clk.Advance(2 * time.Minute)
			e.expectNothing()
		})
	}
}

// TestRecreatedTopicKeepsItsOwnState: what a group did with the new
// topic after its deletion survives a crash (only what came before the
// deletion is dropped), with or without a snapshot in between.
func TestRecreatedTopicKeepsItsOwnState(t *testing.T) {
	for _, snap := range []bool{false, true} {
		e := newPopEnv(t, false)
		e.send(3, "")
		e.ack(e.mustReceive(32)...)
		e.deleteTopic(nil)
		e.send(3, "")
		got := e.mustReceive(2)
		if o := offsets(got); !slices.Equal(o, []int64{0, 1}) {
			t.Fatalf("snapshot %v: new topic delivered %v, want 0-1", snap, o)
		}
		e.ack(got[0])
		if snap {
			e.snapshot()
		}
		e.crash()
		// Offset 1 is in flight, offset 2 never read.
		fresh := e.mustReceive(32)
		if o := offsets(fresh); !slices.Equal(o, []int64{2}) {
			t.Fatalf("snapshot %v: after the crash got offsets %v, want 2", snap, o)
		}
		e.ack(fresh...)
		e.clk.Advance(2 * time.Minute)
		re := e.mustReceive(32)
		if o := offsets(re); !slices.Equal(o, []int64{1}) || re[0].Attempt != 2 {
			t.Fatalf("snapshot %v: redelivered %v, want offset 1 as attempt 2", snap, o)
		}
	}
}
