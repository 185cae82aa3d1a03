package raftstore

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// gateRaft is a raft log whose Propose waits at a gate the test opens:
// a raft loop busy elsewhere (writing its log). Proposals it took are
// read from proposed, in order, and applied by the test.
type gateRaft struct {
	entered  chan struct{} // a Propose has begun
	open     chan struct{} // closed: Proposes go through
	proposed chan []byte
}

// openGated opens a replica attached to a gateRaft, closed when t ends.
func openGated(t *testing.T) (*Replica, *gateRaft) {
	t.Helper()
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	g := newGateRaft()
	r.Attach(g)
	return r, g
}

func newGateRaft() *gateRaft {
	return &gateRaft{entered: make(chan struct{}, 16), open: make(chan struct{}), proposed: make(chan []byte, 16)}
}

func (g *gateRaft) Propose(ctx context.Context, _ uint64, build func() []byte) error {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	if data := build(); data != nil {
		g.proposed <- data
	}
	return nil
}

func (*gateRaft) ReadIndex(context.Context) error { return nil }

// queued is how many appends wait in r's queue for the proposer.
func queued(r *Replica) int {
	r.gmu.Lock()
	defer r.gmu.Unlock()
	return len(r.gqueue)
}

type appended struct {
	res storage.AppendResult
	err error
}

// appendAsync runs r.Append(msgs) on a goroutine of its own.
func appendAsync(r *Replica, wg *sync.WaitGroup, msgs ...*message.Message) *appended {
	a := &appended{}
	wg.Go(func() { a.res, a.err = r.Append(context.Background(), msgs...) })
	return a
}

// Appends that come while raft's loop is busy are proposed together, as
// one entry built when the loop takes the proposal; each gets the
// receipts of its own messages.
func TestAppendsWhileRaftIsBusyShareAnEntry(t *testing.T) {
	r, g := openGated(t)
	msgs := testMsgs(6)
	var wg sync.WaitGroup
	first := appendAsync(r, &wg, msgs[0])
	<-g.entered // proposed; the loop has not taken it yet
	second := appendAsync(r, &wg, msgs[1:3]...)
	testutil.Eventually(t, "two appends queued", func() bool { return queued(r) == 2 })
	third := appendAsync(r, &wg, msgs[3:6]...)
	testutil.Eventually(t, "three appends queued", func() bool { return queued(r) == 3 })
	close(g.open)
	if err := r.Apply(1, <-g.proposed); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case data := <-g.proposed:
		t.Fatalf("a second entry was proposed (%d bytes): the appends that waited did not share one", len(data))
	default:
	}
	var ends []int64
	for i, a := range []*appended{first, second, third} {
		if a.err != nil {
			t.Fatalf("append %d: %v", i, a.err)
		}
		ends = append(ends, a.res.End)
	}
	if len(first.res.Entries) != 1 || len(second.res.Entries) != 2 || len(third.res.Entries) != 3 {
		t.Fatalf("receipts: %d, %d, %d; want 1, 2, 3", len(first.res.Entries), len(second.res.Entries), len(third.res.Entries))
	}
	// Each append's messages are contiguous, in the order the appends
	// came, and each one's End is the log end after its own last record.
	prevEnd := int64(0)
	for i, a := range []*appended{first, second, third} {
		for j, e := range a.res.Entries {
			if e.PhysOffset != prevEnd {
				t.Fatalf("append %d, message %d at %d, want %d", i, j, e.PhysOffset, prevEnd)
			}
			prevEnd = e.PhysOffset + int64(e.Size)
		}
		if a.res.End != prevEnd || a.res.Status != storage.StatusOK || a.res.Durability != storage.DurabilityLocal {
			t.Fatalf("append %d: end %d (want %d), status %v, durability %v", i, a.res.End, prevEnd, a.res.Status, a.res.Durability)
		}
	}
	if n := queueLen(r); n != 6 {
		t.Fatalf("%d messages stored, want 6", n)
	}
}

// The store refuses a batch whole when one of its messages is refused:
// the appends whose shared entry was refused are proposed again alone,
// so each gets the answer it would have had alone.
func TestAppendRefusedWithOthersIsProposedAlone(t *testing.T) {
	r, g := openGated(t)
	msgs := testMsgs(2)
	big := &message.Message{Topic: "t", Body: make([]byte, 9<<10)} // over MaxBodySize, within MaxRecordSize
	var wg sync.WaitGroup
	first := appendAsync(r, &wg, msgs[0])
	<-g.entered
	good := appendAsync(r, &wg, msgs[1])
	bad := appendAsync(r, &wg, big)
	testutil.Eventually(t, "three appends queued", func() bool { return queued(r) == 3 })
	close(g.open)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		// The shared entry (refused), then each of its appends alone, in
		// whichever order they come.
		for idx := uint64(1); idx <= 4; idx++ {
			if err := r.Apply(idx, <-g.proposed); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	<-applied
	if first.err != nil || good.err != nil {
		t.Fatalf("appends of valid messages: %v, %v", first.err, good.err)
	}
	if !errors.Is(bad.err, storage.ErrTooLarge) {
		t.Fatalf("append of a message over the body limit: %v, want ErrTooLarge", bad.err)
	}
	if n := queueLen(r); n != 2 {
		t.Fatalf("%d messages stored, want 2", n)
	}
	if r.Failed() != nil || r.Undecodable() != 0 {
		t.Fatalf("replica failed (%v) or skipped undecodable entries (%d)", r.Failed(), r.Undecodable())
	}
}

// An append still queued when its caller gives up is withdrawn: raft
// never sees it, and the caller learns it was not proposed.
func TestQueuedAppendWithdrawnWithItsContext(t *testing.T) {
	r, g := openGated(t)
	msgs := testMsgs(2)
	var wg sync.WaitGroup
	first := appendAsync(r, &wg, msgs[0])
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := r.Append(ctx, msgs[1])
		gaveUp <- err
	}()
	testutil.Eventually(t, "two appends queued", func() bool { return queued(r) == 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued append whose context ended: %v, want context.Canceled", err)
	}
	close(g.open)
	if err := r.Apply(1, <-g.proposed); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if first.err != nil {
		t.Fatal(first.err)
	}
	select {
	case <-g.proposed:
		t.Fatal("the withdrawn append was proposed")
	default:
	}
	if n := queueLen(r); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
}
