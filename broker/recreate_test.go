package broker

import (
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
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

// TestTopicDeletionThatFailsLeavesTheTopicWhole: a topic deletion whose
// queue drop cannot be written (a disk error), followed by a crash,
// leaves the topic as it was: still there with its messages. (Removed
// from the metadata first and its queues kept, it would be gone, and a
// topic created again under its name would deliver its messages.)
// Deleted again once the disk works, it is gone, and created again it
// starts empty.
func TestTopicDeletionThatFailsLeavesTheTopicWhole(t *testing.T) {
	var failWrites atomic.Bool
	e := newEnvWith(t, func(o *storage.Options) {
		o.FlushMode = storage.FlushSync
		o.FS = vfs.NewErrorFS(o.FS, func(op vfs.Op, path string) error {
			if failWrites.Load() && op == vfs.OpWrite && strings.Contains(path, "commitlog") {
				return syscall.EIO
			}
			return nil
		})
	})
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	old := e.send("t", 3, "old")

	failWrites.Store(true)
	if err := e.b.DeleteTopic(e.ctx, "t"); err == nil {
		t.Fatal("a deletion whose queue drop cannot be written answered OK")
	}
	failWrites.Store(false)
	e.crash()
	if _, err := e.b.GetTopic(e.ctx, "t"); err != nil {
		t.Fatalf("after a failed deletion and a crash the topic is gone: %v", err)
	}
	got, err := e.receive("g", "t", 32, 30*time.Second)
	if err != nil || !slices.Equal(ids(got), sorted(old)) {
		t.Fatalf("after a failed deletion and a crash: %v (%v), want %v", ids(got), err, sorted(old))
	}

	if err := e.b.DeleteTopic(e.ctx, "t"); err != nil {
		t.Fatal(err)
	}
	e.topic("t", model.TopicNormal)
	if again, err := e.receive("g", "t", 32, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("the topic created again delivers %v (%v), want nothing", ids(again), err)
	}
}
