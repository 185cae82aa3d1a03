package pop

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

var errDiskFull = errors.New("no space left on device")

// faultStore is the real store with control over journal appends: a
// gated append waits until released and then fails or goes through, and
// failEvery makes every n-th journal append fail.
type faultStore struct {
	*storage.Store
	mu        sync.Mutex
	gates     []*journalGate
	failEvery int
	appends   int
}

// journalGate holds one journal append: entered is closed when it
// arrives (after, when it has been written), and it goes on when release
// is closed, failing with err if set.
type journalGate struct {
	entered, release chan struct{}
	after            bool
	err              error
}

// gateNext makes the next journal append wait at a gate before it is
// written (and fail with err, if set); gateAfterNext, after it is written.
func (fs *faultStore) gateNext(err error) *journalGate { return fs.gate(&journalGate{err: err}) }

func (fs *faultStore) gateAfterNext() *journalGate { return fs.gate(&journalGate{after: true}) }

func (fs *faultStore) gate(g *journalGate) *journalGate {
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	fs.mu.Lock()
	fs.gates = append(fs.gates, g)
	fs.mu.Unlock()
	return g
}

func (fs *faultStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	if !slices.ContainsFunc(msgs, func(m *message.Message) bool { return m.Topic == JournalTopic }) {
		return fs.Store.Append(ctx, msgs...)
	}
	fs.mu.Lock()
	var g *journalGate
	if len(fs.gates) > 0 {
		g, fs.gates = fs.gates[0], fs.gates[1:]
	}
	fs.appends++
	fail := fs.failEvery > 0 && fs.appends%fs.failEvery == 0
	fs.mu.Unlock()
	if g != nil && g.after {
		res, err := fs.Store.Append(ctx, msgs...)
		close(g.entered)
		<-g.release
		return res, err
	}
	if g != nil {
		close(g.entered)
		<-g.release
		if g.err != nil {
			return storage.AppendResult{}, g.err
		}
	}
	if fail {
		// Let the other goroutines run meanwhile, as a slow failing
		// device would.
		for i := 0; i < 20; i++ {
			runtime.Gosched()
		}
		return storage.AppendResult{}, errDiskFull
	}
	return fs.Store.Append(ctx, msgs...)
}

type dlqTopics struct{}

func (dlqTopics) EnsureDLQ(_ context.Context, group string) (model.Topic, error) {
	return model.Topic{Name: "%DLQ%" + group, Queues: 1}, nil
}

type popEnv struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	store *faultStore
	svc   *Service
	group model.Group
	topic model.Topic
}

func newPopEnv(t *testing.T, fifo bool) *popEnv {
	t.Helper()
	clk := clock.NewFake(time.UnixMilli(1_800_000_000_000))
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := &popEnv{t: t, ctx: context.Background(), clk: clk, store: &faultStore{Store: st},
		group: model.Group{Name: "g", FIFO: fifo}, topic: model.Topic{Name: "t", Queues: 1}}
	e.open()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.svc.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := st.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *popEnv) open() {
	e.t.Helper()
	svc, err := Open(e.ctx, Config{Clock: e.clk, SnapshotInterval: time.Hour, RenewInterval: time.Hour}, e.store, e.store.Meta(), dlqTopics{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

// crash stops the service without its final snapshot and opens a new one
// on the same store: its state comes from the last snapshot and the
// journal.
func (e *popEnv) crash() {
	e.t.Helper()
	if err := e.svc.Abort(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// send appends n messages to queue 0 ("m-0".. in offset order), all of
// message group mg if it is set.
func (e *popEnv) send(n int, mg string) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		m := record.ToRecord(&model.Message{Topic: "t", ID: fmt.Sprintf("m-%d", i), MessageGroup: mg, Body: []byte("x")}, "t", 0)
		if _, err := e.store.Store.Append(e.ctx, m); err != nil {
			e.t.Fatal(err)
		}
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		e.t.Fatal(err)
	}
}

func (e *popEnv) receive(max int) ([]*model.Delivered, error) {
	return e.svc.Receive(e.ctx, ReceiveRequest{Group: e.group, Topic: e.topic, Max: max, Invisible: time.Minute, QueueID: -1})
}

func (e *popEnv) mustReceive(max int) []*model.Delivered {
	e.t.Helper()
	out, err := e.receive(max)
	if err != nil {
		e.t.Fatalf("receive: %v", err)
	}
	return out
}

func (e *popEnv) ack(ds ...*model.Delivered) {
	e.t.Helper()
	hs := make([]string, len(ds))
	for i, d := range ds {
		hs[i] = d.ReceiptHandle
	}
	for i, err := range e.svc.Ack(e.ctx, "g", "t", hs) {
		if err != nil {
			e.t.Fatalf("ack of offset %d: %v", ds[i].QueueOffset, err)
		}
	}
}

func (e *popEnv) expectNothing() {
	e.t.Helper()
	if out, err := e.receive(32); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		e.t.Fatalf("want no message, got offsets %v (%v)", offsets(out), err)
	}
}

func offsets(ds []*model.Delivered) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.QueueOffset
	}
	slices.Sort(out)
	return out
}

// receiveAsync runs a receive in the background.
func (e *popEnv) receiveAsync(max int) <-chan receiveResult {
	ch := make(chan receiveResult, 1)
	go func() {
		out, err := e.receive(max)
		ch <- receiveResult{out, err}
	}()
	return ch
}

type receiveResult struct {
	out []*model.Delivered
	err error
}

// failedReceiveWhileAnotherSucceeds: receive A reads offsets 0-2 and its
// record is held at the gate; receive B meanwhile reads 3-5 and records
// them; then A's record fails. It returns B's deliveries.
func failedReceiveWhileAnotherSucceeds(e *popEnv) []*model.Delivered {
	e.t.Helper()
	e.send(10, "")
	gate := e.store.gateNext(errDiskFull)
	first := e.receiveAsync(3)
	<-gate.entered
	second := e.mustReceive(3)
	if got := offsets(second); !slices.Equal(got, []int64{3, 4, 5}) {
		e.t.Fatalf("concurrent receive got offsets %v, want 3-5", got)
	}
	close(gate.release)
	r := <-first
	if r.err == nil || len(r.out) != 0 {
		e.t.Fatalf("receive whose record failed: %v offsets %v", r.err, offsets(r.out))
	}
	return second
}

// A receive whose record fails gives back what it read without moving
// the queue's position back over what a concurrent receive handed out:
// nothing in flight is delivered again, and the failed receive's messages
// come as first deliveries.
func TestFailedReceiveKeepsConcurrentDeliveries(t *testing.T) {
	e := newPopEnv(t, false)
	second := failedReceiveWhileAnotherSucceeds(e)
	third := e.mustReceive(32)
	if got := offsets(third); !slices.Equal(got, []int64{0, 1, 2, 6, 7, 8, 9}) {
		t.Fatalf("after the failed receive got offsets %v, want 0-2 and 6-9 (3-5 are in flight)", got)
	}
	for _, d := range third {
		if d.Attempt != 1 {
			t.Fatalf("offset %d delivered as attempt %d, want 1 (its earlier delivery failed)", d.QueueOffset, d.Attempt)
		}
	}
	e.ack(second...)
	e.ack(third...)
	e.expectNothing()
}

// The messages a failed receive gives back survive a crash even though a
// concurrent receive recorded a position past them.
func TestFailedReceiveSurvivesCrash(t *testing.T) {
	e := newPopEnv(t, false)
	second := failedReceiveWhileAnotherSucceeds(e)
	e.crash()
	got := e.mustReceive(32)
	if o := offsets(got); !slices.Equal(o, []int64{0, 1, 2, 6, 7, 8, 9}) {
		t.Fatalf("after the crash got offsets %v, want 0-2 and 6-9", o)
	}
	e.ack(second...)
	e.ack(got...)
	e.expectNothing()
}

// A snapshot taken while a receive's record is held (then fails) neither
// loses nor delays the messages that receive read.
func TestSnapshotDuringFailedReceive(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(3, "")
	gate := e.store.gateNext(errDiskFull)
	first := e.receiveAsync(3)
	<-gate.entered
	if err := e.svc.Snapshot(); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	if r := <-first; r.err == nil {
		t.Fatal("receive succeeded while its record failed")
	}
	e.crash()
	got := e.mustReceive(32)
	if o := offsets(got); !slices.Equal(o, []int64{0, 1, 2}) {
		t.Fatalf("after the crash got offsets %v, want 0-2", o)
	}
	for _, d := range got {
		if d.Attempt != 1 {
			t.Fatalf("offset %d delivered as attempt %d, want 1", d.QueueOffset, d.Attempt)
		}
	}
}

// A snapshot taken after a receive's record reached the log but before
// the receive published its deliveries still has them after a crash.
func TestSnapshotDuringSucceedingReceive(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(3, "")
	gate := e.store.gateAfterNext()
	first := e.receiveAsync(3)
	<-gate.entered
	if err := e.svc.Snapshot(); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	r := <-first
	if r.err != nil || len(r.out) != 3 {
		t.Fatalf("receive: %v %v", r.err, offsets(r.out))
	}
	e.crash()
	e.expectNothing() // all three are in flight
	e.ack(r.out...)
	e.expectNothing()
}

// While an ack of a FIFO message group's delivery is being recorded, the
// group's next message stays held; when the record fails, the ack returns
// the error and the handle still works.
func TestFailedAckKeepsHandleAndFIFOGroup(t *testing.T) {
	e := newPopEnv(t, true)
	e.send(2, "order-1")
	first := e.mustReceive(32)
	if len(first) != 1 || first[0].QueueOffset != 0 {
		t.Fatalf("first receive: %v", offsets(first))
	}
	gate := e.store.gateNext(errDiskFull)
	acked := make(chan error, 1)
	go func() { acked <- e.svc.Ack(e.ctx, "g", "t", []string{first[0].ReceiptHandle})[0] }()
	<-gate.entered
	e.expectNothing() // the group's first message is still in flight
	close(gate.release)
	if err := <-acked; err == nil {
		t.Fatal("ack succeeded while its record failed")
	}
	e.expectNothing()
	e.ack(first...) // the handle is still valid
	next := e.mustReceive(32)
	if len(next) != 1 || next[0].QueueOffset != 1 || next[0].Attempt != 1 {
		t.Fatalf("after the ack: %v", offsets(next))
	}
	e.ack(next...)
	e.expectNothing()
}

// While a ChangeInvisibleDuration is being recorded the delivery keeps
// its deadline (a "visible now" change does not let it be redelivered);
// when the record fails, the change returns the error and the old handle
// still works.
func TestFailedChangeInvisibleKeepsDelivery(t *testing.T) {
	e := newPopEnv(t, false)
	e.send(1, "")
	first := e.mustReceive(1)
	gate := e.store.gateNext(errDiskFull)
	changed := make(chan error, 1)
	go func() {
		_, err := e.svc.ChangeInvisible(e.ctx, "g", "t", first[0].ReceiptHandle, 0)
		changed <- err
	}()
	<-gate.entered
	e.expectNothing()
	close(gate.release)
	if err := <-changed; err == nil {
		t.Fatal("change succeeded while its record failed")
	}
	e.expectNothing()
	e.ack(first...)
	e.expectNothing()
}

// Concurrent receives, acks and deadline changes with every third journal
// append failing: no message is handed out while it is in flight, every
// message is eventually acknowledged, and nothing is left in flight.
func TestConcurrentOperationsWithFailingJournal(t *testing.T) {
	const n = 300
	e := newPopEnv(t, false)
	e.send(n, "")
	e.store.failEvery = 3

	var (
		mu       sync.Mutex
		inFlight = map[int64]bool{}
		done     = map[int64]bool{}
	)
	workers := 4
	// A lost message would keep the workers looking for it for ever.
	const maxCalls = 200_000
	var calls atomic.Int64
	var stop atomic.Bool // set with the first error
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				mu.Lock()
				finished, acked, held := len(done) == n, len(done), len(inFlight)
				mu.Unlock()
				if finished || stop.Load() {
					return
				}
				if calls.Add(1) > maxCalls {
					stop.Store(true)
					errc <- fmt.Errorf("gave up after %d receives: %d of %d messages acknowledged, %d in flight", maxCalls, acked, n, held)
					return
				}
				out, err := e.receive(1 + round%5)
				if err != nil {
					continue
				}
				mu.Lock()
				for _, d := range out {
					if inFlight[d.QueueOffset] || done[d.QueueOffset] {
						mu.Unlock()
						stop.Store(true)
						errc <- fmt.Errorf("offset %d handed out while in flight or after its ack", d.QueueOffset)
						return
					}
					inFlight[d.QueueOffset] = true
				}
				mu.Unlock()
				for i, d := range out {
					h := d.ReceiptHandle
					if i%2 == 0 {
						nh, err := e.svc.ChangeInvisible(e.ctx, "g", "t", h, 2*time.Minute)
						if err == nil {
							h = nh
						}
					}
					for {
						err := e.svc.Ack(e.ctx, "g", "t", []string{h})[0]
						if err == nil {
							break
						}
						if !errors.Is(err, errDiskFull) {
							stop.Store(true)
							errc <- fmt.Errorf("ack of offset %d: %v", d.QueueOffset, err)
							return
						}
					}
					mu.Lock()
					delete(inFlight, d.QueueOffset)
					done[d.QueueOffset] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	e.store.failEvery = 0
	e.expectNothing()
	for _, st := range e.svc.Stats() {
		if st.InFlight != 0 || st.Held != 0 {
			t.Fatalf("left in flight: %+v", st)
		}
	}
}

// FIFO: a failed receive's message comes back first in its message
// group, ahead of the group's messages a concurrent receive held back
// behind it, and nothing that receive delivered comes twice.
func TestFailedFIFOReceiveKeepsGroupOrder(t *testing.T) {
	e := newPopEnv(t, true)
	for i, mg := range []string{"a", "a", "b", "a"} { // offsets 0-3
		m := record.ToRecord(&model.Message{Topic: "t", ID: fmt.Sprintf("%s-%d", mg, i), MessageGroup: mg, Body: []byte("x")}, "t", 0)
		if _, err := e.store.Store.Append(e.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}
	gate := e.store.gateNext(errDiskFull)
	first := e.receiveAsync(1) // offset 0, group a
	<-gate.entered
	second := e.mustReceive(32) // holds 1 and 3 behind 0, delivers 2 (group b)
	if got := offsets(second); !slices.Equal(got, []int64{2}) {
		t.Fatalf("concurrent receive got offsets %v, want 2", got)
	}
	close(gate.release)
	if r := <-first; r.err == nil {
		t.Fatal("receive succeeded while its record failed")
	}
	for _, want := range []int64{0, 1, 3} {
		got := e.mustReceive(32)
		if len(got) != 1 || got[0].QueueOffset != want || got[0].Attempt != 1 {
			t.Fatalf("want offset %d as attempt 1, got offsets %v", want, offsets(got))
		}
		e.ack(got...)
	}
	e.ack(second...)
	e.expectNothing()
}

// A receive that does not wait finds a message whose append was answered
// before it, though the queues are written after the log: it looks once,
// and no long poll would wake it when the queue is written.
func TestReceiveWithoutWaitSeesAnsweredAppends(t *testing.T) {
	e := newPopEnv(t, false)
	for i := range 200 {
		m := record.ToRecord(&model.Message{Topic: "t", ID: fmt.Sprintf("m-%d", i), Body: []byte("x")}, "t", 0)
		if _, err := e.store.Store.Append(e.ctx, m); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.Receive(e.ctx, ReceiveRequest{Group: e.group, Topic: e.topic, Max: 1, Invisible: time.Minute, QueueID: -1})
		if err != nil || len(got) != 1 {
			t.Fatalf("receive %d right after its append: %d messages, %v", i, len(got), err)
		}
	}
}
