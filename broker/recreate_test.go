package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

// TestRecreatedTopicDeliversAfterCrash: a group receives and acks the
// messages of a topic, the topic is deleted and created again, two
// messages are sent, and the broker crashes before a POP snapshot is
// written after the deletion (with or without one before it). The
// restarted broker (its store reopened, so the deletion is known from the
// store's index, not from what it dispatched since) delivers the two new
// messages as first attempts, and nothing of the deleted topic.
func TestRecreatedTopicDeliversAfterCrash(t *testing.T) {
	for _, snap := range []bool{false, true} {
		e := newEnv(t)
		e.topic("t", model.TopicNormal)
		e.group("g", 0, false)
		e.send("t", 3, "old")
		old, err := e.receive("g", "t", 32, 30*time.Second)
		if err != nil || len(old) != 3 {
			t.Fatalf("snapshot %v: first receive: %v, %d messages", snap, err, len(old))
		}
		hs := make([]string, len(old))
		for i, d := range old {
			hs[i] = d.ReceiptHandle
		}
		for _, err := range e.b.Ack(e.ctx, "g", "t", hs) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if snap {
			if err := e.b.s().pop.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.b.DeleteTopic(e.ctx, "t"); err != nil {
			t.Fatal(err)
		}
		e.topic("t", model.TopicNormal)
		sent := e.send("t", 2, "new")
		e.crash()
		got, err := e.receive("g", "t", 32, 30*time.Second)
		if err != nil {
			t.Fatalf("snapshot %v: receive after the crash: %v", snap, err)
		}
		if !slices.Equal(ids(got), sorted(sent)) {
			t.Fatalf("snapshot %v: after the crash got %v, want %v", snap, ids(got), sorted(sent))
		}
		for _, d := range got {
			if d.Attempt != 1 {
				t.Fatalf("snapshot %v: %s delivered as attempt %d", snap, d.ID, d.Attempt)
			}
		}
		hs = hs[:0]
		for _, d := range got {
			hs = append(hs, d.ReceiptHandle)
		}
		for _, err := range e.b.Ack(e.ctx, "g", "t", hs) {
			if err != nil {
				t.Fatal(err)
			}
		}
		e.clk.Advance(time.Minute)
		if again, err := e.receive("g", "t", 32, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
			t.Fatalf("snapshot %v: past the deadlines got %v (%v), want nothing", snap, ids(again), err)
		}
		e.close()
	}
}
