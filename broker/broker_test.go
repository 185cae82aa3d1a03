package broker

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

type env struct {
	t     *testing.T
	fs    *vfs.MemFS
	clk   *clock.Fake
	store *storage.Store
	b     *Broker
	ctx   context.Context
	// tune, when set, changes the store's options at each open.
	tune func(*storage.Options)
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with the store's options changed by tune.
func newEnvWith(t *testing.T, tune func(*storage.Options)) *env {
	e := &env{t: t, fs: vfs.NewMem(), clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), ctx: context.Background(), tune: tune}
	e.open()
	t.Cleanup(func() {
		if e.b != nil {
			e.close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	o := storage.Options{FS: e.fs, SegmentSize: 8 << 20, Now: e.clk.Now}
	if e.tune != nil {
		e.tune(&o)
	}
	st, err := storage.Open("/data", o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.openStore(st, Config{Clock: e.clk, DefaultQueues: 4, PopSnapshotInterval: time.Hour})
}

func (e *env) openStore(st *storage.Store, cfg Config) {
	e.t.Helper()
	b, err := Open(e.ctx, cfg, st)
	if err != nil {
		e.t.Fatal(err)
	}
	e.store, e.b = st, b
}

// openCfg opens the store and a broker with cfg.
func (e *env) openCfg(cfg Config) {
	e.t.Helper()
	st, err := storage.Open("/data", storage.Options{FS: e.fs, SegmentSize: 8 << 20, Now: e.clk.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	e.openStore(st, cfg)
}

func (e *env) close() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.b.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.b, e.store = nil, nil
}

func (e *env) restart() { e.close(); e.open() }

// crash stops the broker without its final snapshot (as kill -9 would),
// closes the store and reopens both: state comes from snapshot + journal.
func (e *env) crash() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.b.s().hub.Close()
	if err := e.b.s().pop.Abort(ctx); err != nil {
		e.t.Fatal(err)
	}
	if err := e.b.s().lite.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Close(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func (e *env) topic(name string, typ model.TopicType) {
	e.t.Helper()
	if _, err := e.b.CreateTopic(e.ctx, model.Topic{Name: name, Type: typ}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) group(name string, attempts int32, fifo bool) {
	e.t.Helper()
	if _, err := e.b.CreateGroup(e.ctx, model.Group{Name: name, MaxDeliveryAttempts: attempts, FIFO: fifo}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) send(topic string, n int, tag string) []string {
	e.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%s-%d-%d", topic, tag, i, e.clk.Now().UnixNano())
		res, err := e.b.Send(e.ctx, topic, []*model.Message{{Topic: topic, ID: id, Tag: tag, Body: []byte("body-" + id)}}, model.Producer{})
		if err != nil || res[0].Err != nil {
			e.t.Fatalf("send: %v %v", err, res)
		}
		ids = append(ids, id)
	}
	// Make the messages readable before the test looks for them.
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func (e *env) receive(group, topic string, max int, inv time.Duration) ([]*model.Delivered, error) {
	return e.b.Receive(e.ctx, ReceiveRequest{Group: group, Topic: topic, Max: max, Invisible: inv, QueueID: -1})
}

func ids(ds []*model.Delivered) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestSendReceiveAck(t *testing.T) {
	e := newEnv(t)
	e.topic("orders", model.TopicNormal)
	e.group("g", 0, false)
	sent := e.send("orders", 10, "A")
	got, err := e.receive("g", "orders", 32, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), sorted(sent)) {
		t.Fatalf("received %v, sent %v", ids(got), sent)
	}
	for _, d := range got {
		if d.Attempt != 1 || d.ReceiptHandle == "" || string(d.Body) != "body-"+d.ID || d.Tag != "A" || d.Topic != "orders" {
			t.Fatalf("bad delivery %+v", d)
		}
	}
	if _, err := e.receive("g", "orders", 32, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("second receive: %v (in-flight messages must be invisible)", err)
	}
	var handles []string
	for _, d := range got {
		handles = append(handles, d.ReceiptHandle)
	}
	for i, err := range e.b.Ack(e.ctx, "g", "orders", handles) {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	// A second ack of the same delivery is refused.
	if errs := e.b.Ack(e.ctx, "g", "orders", handles[:1]); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("duplicate ack: %v", errs[0])
	}
	// Acked messages never come back, even after their deadline.
	e.clk.Advance(time.Minute)
	if _, err := e.receive("g", "orders", 32, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("after ack: %v", err)
	}
	// Another group gets everything independently.
	e.group("other", 0, false)
	if got2, err := e.receive("other", "orders", 32, 30*time.Second); err != nil || len(got2) != 10 {
		t.Fatalf("other group: %d %v", len(got2), err)
	}
}

func TestRedeliveryAfterDeadlineWithAttempt(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	first, err := e.receive("g", "t", 1, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(19 * time.Second)
	if _, err := e.receive("g", "t", 1, 20*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("redelivered before the deadline: %v", err)
	}
	e.clk.Advance(time.Second)
	again, err := e.receive("g", "t", 1, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].ID != first[0].ID || again[0].Attempt != 2 {
		t.Fatalf("redelivery %+v", again[0])
	}
	// The first handle is dead now: late ack is refused.
	if errs := e.b.Ack(e.ctx, "g", "t", []string{first[0].ReceiptHandle}); !strings.Contains(fmt.Sprint(errs[0]), "redelivered since") {
		t.Fatalf("stale ack: %v", errs[0])
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{again[0].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

func TestExpiredHandleRefused(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	d, _ := e.receive("g", "t", 1, 10*time.Second)
	e.clk.Advance(10 * time.Second)
	errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle})
	if mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle || !strings.Contains(errs[0].Error(), "expired") {
		t.Fatalf("expired ack: %v", errs[0])
	}
}

func TestChangeInvisible(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	d, _ := e.receive("g", "t", 1, 10*time.Second)
	old := d[0].ReceiptHandle
	nh, err := e.b.ChangeInvisible(e.ctx, "g", "t", old, time.Minute)
	if err != nil || nh == old {
		t.Fatalf("change: %q %v", nh, err)
	}
	e.clk.Advance(30 * time.Second) // past the original 10 s
	if _, err := e.receive("g", "t", 1, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("visible before the extended deadline: %v", err)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{old}); !strings.Contains(fmt.Sprint(errs[0]), "superseded") {
		t.Fatalf("old handle: %v", errs[0])
	}
	if _, err := e.b.ChangeInvisible(e.ctx, "g", "t", old, time.Minute); mqerr.KindOf(err) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("change with old handle: %v", err)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{nh}); errs[0] != nil {
		t.Fatalf("ack with new handle: %v", errs[0])
	}
}

func TestNackRedeliversWithAttempt(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	d, _ := e.receive("g", "t", 1, 10*time.Second)
	if _, err := e.b.ChangeInvisible(e.ctx, "g", "t", d[0].ReceiptHandle, 0); err != nil {
		t.Fatal(err)
	}
	again, err := e.receive("g", "t", 1, 10*time.Second)
	if err != nil || again[0].Attempt != 2 {
		t.Fatalf("after nack: %v %+v", err, again)
	}
}

func TestTagFilter(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	a := e.send("t", 3, "A")
	e.send("t", 3, "B")
	c := e.send("t", 2, "C")
	f, _ := model.ParseTagFilter("A || C")
	got, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "t", Max: 32, Invisible: 10 * time.Second, Filter: f, QueueID: -1})
	if err != nil {
		t.Fatal(err)
	}
	if want := sorted(append(a, c...)); !slices.Equal(ids(got), want) {
		t.Fatalf("got %v want %v", ids(got), want)
	}
}

func TestMaxAttemptsThenDLQ(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 2, false)
	sent := e.send("t", 1, "X")
	for attempt := int32(1); attempt <= 2; attempt++ {
		d, err := e.receive("g", "t", 1, 10*time.Second)
		if err != nil || d[0].Attempt != attempt {
			t.Fatalf("attempt %d: %v %+v", attempt, err, d)
		}
		e.clk.Advance(10 * time.Second)
	}
	if _, err := e.receive("g", "t", 1, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("delivered past max attempts: %v", err)
	}
	_, written := e.store.LogRange()
	_ = e.store.WaitDispatched(e.ctx, written)
	e.group("reader", 0, false)
	dl, err := e.receive("reader", metadata.DLQTopic("g"), 5, 10*time.Second)
	if err != nil || len(dl) != 1 || dl[0].ID != sent[0] || dl[0].DLQOriginTopic != "t" || dl[0].Tag != "X" {
		t.Fatalf("DLQ read: %v %+v", err, dl)
	}
}

func TestForwardToDLQ(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	d, _ := e.receive("g", "t", 1, 10*time.Second)
	if err := e.b.ForwardToDLQ(e.ctx, "g", "t", d[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle}); errs[0] == nil {
		t.Fatal("ack after forward succeeded")
	}
	e.clk.Advance(time.Minute)
	if _, err := e.receive("g", "t", 1, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("forwarded message redelivered: %v", err)
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	sent := e.send("t", 6, "")
	d, err := e.receive("g", "t", 6, 30*time.Second)
	if err != nil || len(d) != 6 {
		t.Fatal(err, len(d))
	}
	// ack three, change one, leave two in flight
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle, d[1].ReceiptHandle, d[2].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs)
	}
	nh, err := e.b.ChangeInvisible(e.ctx, "g", "t", d[3].ReceiptHandle, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	// handles stay valid across the restart
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[4].ReceiptHandle}); errs[0] != nil {
		t.Fatalf("ack after restart: %v", errs[0])
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle}); errs[0] == nil {
		t.Fatal("an acked message is in flight again after restart")
	}
	if _, err := e.receive("g", "t", 6, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("in-flight messages visible right after restart: %v", err)
	}
	e.clk.Advance(30 * time.Second)
	back, err := e.receive("g", "t", 6, 30*time.Second)
	if err != nil || len(back) != 1 || back[0].ID != d[5].ID || back[0].Attempt != 2 {
		t.Fatalf("after first deadline: %v %+v", err, back)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{back[0].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	e.clk.Advance(90 * time.Second)
	back2, err := e.receive("g", "t", 6, 30*time.Second)
	if err != nil || len(back2) != 1 || back2[0].ID != d[3].ID {
		t.Fatalf("after changed deadline: %v %+v", err, back2)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{nh}); errs[0] == nil {
		t.Fatal("superseded-by-redelivery handle acked")
	}
	_ = sent
}

func TestSnapshotThenJournalReplay(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 4, "")
	d, _ := e.receive("g", "t", 2, 30*time.Second)
	if err := e.b.s().pop.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// More changes after the snapshot, journal only.
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	d2, _ := e.receive("g", "t", 2, 30*time.Second)
	e.crash()
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[1].ReceiptHandle, d2[0].ReceiptHandle, d2[1].ReceiptHandle}); errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("acks after replay: %v", errs)
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle}); errs[0] == nil {
		t.Fatal("ack recorded after the snapshot was lost")
	}
	e.clk.Advance(time.Hour)
	if _, err := e.receive("g", "t", 6, 30*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("all acked, yet: %v", err)
	}
}

func TestForgedHandleRejected(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	d, _ := e.receive("g", "t", 1, 10*time.Second)
	h := []byte(d[0].ReceiptHandle)
	h[10] ^= 1
	if errs := e.b.Ack(e.ctx, "g", "t", []string{string(h)}); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("forged: %v", errs[0])
	}
	e.group("g2", 0, false)
	if errs := e.b.Ack(e.ctx, "g2", "t", []string{d[0].ReceiptHandle}); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("other group: %v", errs[0])
	}
}

func TestLongPollWokenByArrival(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	done := make(chan []*model.Delivered, 1)
	go func() {
		d, _ := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "t", Max: 1, Invisible: 10 * time.Second, Wait: time.Hour, QueueID: -1})
		done <- d
	}()
	e.send("t", 1, "")
	if d := <-done; len(d) != 1 {
		t.Fatalf("long poll returned %v", d)
	}
}

func TestLongPollWokenByExpiry(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.send("t", 1, "")
	if _, err := e.receive("g", "t", 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan []*model.Delivered, 1)
	go func() {
		d, _ := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "t", Max: 1, Invisible: 10 * time.Second, Wait: time.Hour, QueueID: -1})
		done <- d
	}()
	e.clk.Advance(10 * time.Second)
	if d := <-done; len(d) != 1 || d[0].Attempt != 2 {
		t.Fatalf("long poll returned %+v", d)
	}
}

// TestLongPollWakesOneReceivePerClass: an arrival wakes one parked
// receive of each group (plus the one its taker hands the wake on to),
// not every receive parked on the topic; a wake that makes several
// messages visible at once goes from receive to receive until each has
// one.
func TestLongPollWakesOneReceivePerClass(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	e.group("g2", 0, false)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	type result struct {
		group string
		d     []*model.Delivered
		err   error
	}
	done := make(chan result, 16)
	park := func(group string, n int) {
		for i := 0; i < n; i++ {
			go func() {
				// g's deliveries stay invisible through the test.
				inv := time.Hour
				if group == "g2" {
					inv = 10 * time.Second
				}
				d, err := e.b.Receive(ctx, ReceiveRequest{Group: group, Topic: "t", Max: 1, Invisible: inv, Wait: time.Hour, QueueID: -1})
				done <- result{group, d, err}
			}()
		}
	}
	waitParked := func(n int64) {
		t.Helper()
		for e.b.s().hub.Parked() != n {
			runtime.Gosched()
		}
	}
	park("g", 8)
	park("g2", 1)
	waitParked(9)
	before := e.b.s().hub.Woken()
	e.send("t", 1, "")
	got := map[string]int{}
	for i := 0; i < 2; i++ {
		r := <-done
		if r.err != nil || len(r.d) != 1 {
			t.Fatalf("%s: %v %v", r.group, r.d, r.err)
		}
		got[r.group]++
	}
	if got["g"] != 1 || got["g2"] != 1 {
		t.Fatalf("one message for each group, got %v", got)
	}
	waitParked(7)
	// g's taker hands the wake on to one more of g, which finds nothing;
	// g2's has nobody to hand it to. Every parked receive woken would be 9.
	if n := e.b.s().hub.Woken() - before; n > 3 {
		t.Fatalf("one arrival woke %d parked receives, want at most 3", n)
	}

	// One send of four messages (one arrival: a batch lands in one
	// queue): the wake goes from receive to receive until four of g's
	// seven parked receives have one each. g2 takes them too, in one
	// receive that does not wait.
	var batch []*model.Message
	for i := 0; i < 4; i++ {
		batch = append(batch, &model.Message{Topic: "t", ID: fmt.Sprintf("batch-%d", i), Body: []byte("x")})
	}
	if res, err := e.b.Send(e.ctx, "t", batch, model.Producer{}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	for i := 0; i < 4; i++ {
		select {
		case r := <-done:
			if r.err != nil || len(r.d) != 1 || r.group != "g" {
				t.Fatalf("%s: %v %v", r.group, r.d, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after 10 s only %d of the batch's 4 messages reached a parked receive", i)
		}
	}
	if d, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g2", Topic: "t", Max: 4, Invisible: 10 * time.Second, QueueID: -1}); err != nil || len(d) != 4 {
		t.Fatal(d, err)
	}
	waitParked(3)
	park("g2", 4)
	waitParked(7)
	// g2's four come back at once (one wake): the wake goes from receive
	// to receive until each of the four has one.
	e.clk.Advance(10 * time.Second)
	for i := 0; i < 4; i++ {
		r := <-done
		if r.err != nil || len(r.d) != 1 || r.group != "g2" || r.d[0].Attempt != 2 {
			t.Fatalf("%s: %+v %v", r.group, r.d, r.err)
		}
	}
	waitParked(3)
	cancel()
	for i := 0; i < 3; i++ {
		if r := <-done; mqerr.KindOf(r.err) != mqerr.KindMessageNotFound {
			t.Fatalf("cancelled poll: %v %v", r.d, r.err)
		}
	}
}

func TestFIFOGroupGate(t *testing.T) {
	e := newEnv(t)
	e.topic("f", model.TopicFIFO)
	e.group("g", 0, true)
	send := func(group string, i int) {
		res, err := e.b.Send(e.ctx, "f", []*model.Message{{Topic: "f", ID: fmt.Sprintf("%s-%d", group, i), MessageGroup: group, Body: []byte("x")}}, model.Producer{})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	for i := 0; i < 3; i++ {
		send("a", i)
		send("b", i)
	}
	_, written := e.store.LogRange()
	_ = e.store.WaitDispatched(e.ctx, written)
	got, err := e.receive("g", "f", 32, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{"a-0", "b-0"}) {
		t.Fatalf("first batch %v: one message per message group", ids(got))
	}
	var a0, b0 *model.Delivered
	for _, d := range got {
		if d.ID == "a-0" {
			a0 = d
		} else {
			b0 = d
		}
	}
	// b is stuck (not acked); a moves on.
	if errs := e.b.Ack(e.ctx, "g", "f", []string{a0.ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got, err = e.receive("g", "f", 32, 10*time.Second)
	if err != nil || !slices.Equal(ids(got), []string{"a-1"}) {
		t.Fatalf("after acking a-0: %v %v", ids(got), err)
	}
	// b-0 expires and is redelivered before b-1.
	e.clk.Advance(10 * time.Second)
	got, err = e.receive("g", "f", 32, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids(got), "b-0") || slices.Contains(ids(got), "b-1") {
		t.Fatalf("after b-0 expired: %v", ids(got))
	}
	_ = b0
	// Restart keeps the gate.
	e.restart()
	e.clk.Advance(time.Second)
	if got, err := e.receive("g", "f", 32, 10*time.Second); err == nil && (slices.Contains(ids(got), "b-1") || slices.Contains(ids(got), "a-2")) {
		t.Fatalf("gate lost across restart: %v", ids(got))
	}
}

// A receive whose journal record cannot be written (disk full) delivers
// nothing and changes nothing: the same messages come afterwards as first
// deliveries, and FIFO messages held back in that call are not held twice.
func TestReceiveUndoneWhenJournalFails(t *testing.T) {
	e := newEnv(t)
	e.topic("f", model.TopicFIFO)
	e.group("g", 0, true)
	for i := 0; i < 3; i++ {
		res, err := e.b.Send(e.ctx, "f", []*model.Message{{Topic: "f", ID: fmt.Sprintf("a-%d", i), MessageGroup: "a", Body: []byte("x")}}, model.Producer{})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	_, written := e.store.LogRange()
	_ = e.store.WaitDispatched(e.ctx, written)
	e.fs.SetCapacity(1) // every write fails with ENOSPC
	if _, err := e.receive("g", "f", 32, 10*time.Second); err == nil {
		t.Fatal("receive succeeded while its state could not be recorded")
	}
	e.fs.SetCapacity(0)
	got, err := e.receive("g", "f", 32, 10*time.Second)
	if err != nil || len(got) != 1 || got[0].ID != "a-0" || got[0].Attempt != 1 {
		t.Fatalf("after space returned: %v %+v", err, got)
	}
	if errs := e.b.Ack(e.ctx, "g", "f", []string{got[0].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for _, want := range []string{"a-1", "a-2"} {
		got, err := e.receive("g", "f", 32, 10*time.Second)
		if err != nil || len(got) != 1 || got[0].ID != want {
			t.Fatalf("want %s: %v %+v", want, err, got)
		}
		if errs := e.b.Ack(e.ctx, "g", "f", []string{got[0].ReceiptHandle}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	if _, err := e.receive("g", "f", 32, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("a message came twice: %v", err)
	}
}

// SQL92 filters select on properties (user ones and TAGS) for POP
// receives and offset pulls alike; the group skips what does not match.
func TestSQLFilter(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 0, false)
	var want []string
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("sql-%d", i)
		m := &model.Message{Topic: "t", ID: id, Tag: []string{"A", "B"}[i%2], Body: []byte(id),
			Properties: map[string]string{"a": fmt.Sprint(i)}}
		if res, err := e.b.Send(e.ctx, "t", []*model.Message{m}, model.Producer{}); err != nil || res[0].Err != nil {
			t.Fatalf("send: %v %v", err, res)
		}
		if i > 2 && m.Tag == "A" {
			want = append(want, id)
		}
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}
	f, err := SQLFilter("a > 2 AND TAGS = 'A'")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "t", Max: 32, Invisible: 10 * time.Second, Filter: f, QueueID: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), sorted(want)) {
		t.Fatalf("receive got %v want %v", ids(got), sorted(want))
	}
	if _, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "t", Max: 32, Invisible: 10 * time.Second, Filter: f, QueueID: -1}); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("second receive: %v, want nothing left", err)
	}
	var pulled []string
	for q := int32(0); q < 4; q++ {
		r, err := e.b.Pull(e.ctx, "g", "t", q, 0, 32, f, 0)
		if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound { // a queue with nothing matching
			t.Fatal(err)
		}
		for _, d := range r.Messages {
			pulled = append(pulled, d.ID)
		}
	}
	if !slices.Equal(sorted(pulled), sorted(want)) {
		t.Fatalf("pull got %v want %v", sorted(pulled), sorted(want))
	}
	if _, err := SQLFilter("a >"); mqerr.KindOf(err) != mqerr.KindIllegalFilter || !strings.Contains(err.Error(), "SQL92") {
		t.Fatalf("malformed: %v", err)
	}
}
