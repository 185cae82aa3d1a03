package broker

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/storage/message"
)

// A send-back waiting for its delay survives a restart and is delivered
// to %RETRY%<group> when due, with its properties intact.
func TestClassicSendBackSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.topic("T", model.TopicNormal)
	c := e.b.Classic()
	r := classicRecord("x", "UNIQ_KEY", "U1", "KEYS", "k")
	sent, err := c.SendRecords(e.ctx, ClassicSend{Topic: "T", QueueID: 0, Records: []*message.Message{r}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendBack(e.ctx, SendBack{Phys: sent.Entries[0].PhysOffset, Group: "CG", MaxReconsumeTimes: -1})
	if err != nil || res.Topic != "%RETRY%CG" || res.ReconsumeTimes != 1 || res.Due.Sub(e.clk.Now()) != 10*time.Second {
		t.Fatalf("%+v %v", res, err)
	}
	e.restart()
	c = e.b.Classic()
	e.clk.Advance(11 * time.Second)
	awaitQueued(t, c, "%RETRY%CG", 0, "the staged retry was lost across the restart")
	m, err := c.RecordAt("%RETRY%CG", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.UniqKey() != "U1" || string(m.Body) != "x" {
		t.Fatalf("%+v", m)
	}
	if v, _ := m.Get("RETRY_TOPIC"); v != "T" {
		t.Fatalf("RETRY_TOPIC %q", v)
	}
	for _, k := range []string{"REAL_TOPIC", "REAL_QID", "__MQG_DUE_MS"} {
		if _, ok := m.Get(k); ok {
			t.Fatalf("bookkeeping property %s left on the delivered record", k)
		}
	}
}

// Classic delayed records wait in the broker's one delay service (so they
// survive restarts like gRPC ones); its due-time bookkeeping property is
// reserved, so a gRPC producer cannot steer a delayed message with it.
func TestClassicDelaysShareTheDelayService(t *testing.T) {
	e := newEnv(t)
	e.topic("T", model.TopicNormal)
	c := e.b.Classic()
	r := classicRecord("x", "UNIQ_KEY", "U1", "DELAY", "1")
	if _, err := c.SendRecords(e.ctx, ClassicSend{Topic: "T", QueueID: 2, Records: []*message.Message{r}}); err != nil {
		t.Fatal(err)
	}
	if n := e.b.s().delay.Pending(); n != 1 {
		t.Fatalf("delay service holds %d records, want the classic one", n)
	}
	e.restart()
	c = e.b.Classic()
	e.clk.Advance(time.Second)
	awaitQueued(t, c, "T", 2, "the delayed classic record was not delivered to its queue after the restart")
	e.topic("D", model.TopicDelay)
	m := &model.Message{Topic: "D", ID: "m1", Body: []byte("x"), DeliveryTime: e.clk.Now().Add(time.Hour),
		Properties: map[string]string{"__MQG_DUE_MS": "1"}}
	res, err := e.b.Send(e.ctx, "D", []*model.Message{m}, model.Producer{ClientID: "p1"})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if mqerr.KindOf(err) != mqerr.KindIllegalPropertyKey {
		t.Fatalf("a producer set the due-time property: %v", err)
	}
}

type fakeSender struct {
	claims bool
	reach  bool
	asked  int
}

func (f *fakeSender) CheckTransaction(context.Context, string, *model.Delivered, string) bool {
	f.asked++
	return f.reach
}

func (f *fakeSender) ClaimsTransaction(string, string) bool { return f.claims }

// The fan-out asks in order until a producer is reached, except that a
// sender claiming the message is the only one asked.
func TestCheckBackFanOut(t *testing.T) {
	grpc, classic := &fakeSender{reach: true}, &fakeSender{}
	if !(CheckBackFanOut{grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || grpc.asked != 1 || classic.asked != 0 {
		t.Fatalf("unclaimed: grpc %d classic %d", grpc.asked, classic.asked)
	}
	grpc.asked, classic.claims = 0, true
	if (CheckBackFanOut{grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || grpc.asked != 0 || classic.asked != 1 {
		t.Fatalf("claimed by classic: grpc %d classic %d", grpc.asked, classic.asked)
	}
	grpc.reach, classic.claims, classic.reach = false, false, true
	if !(CheckBackFanOut{nil, grpc, classic}).CheckTransaction(context.Background(), "T", nil, "x") || classic.asked != 2 {
		t.Fatalf("fall-through: classic %d", classic.asked)
	}
}

// awaitQueued waits (polling: the delay publisher runs on its own
// goroutine) until queue q of topic holds one record, failing with what.
func awaitQueued(t *testing.T, c *Classic, topic string, q int32, what string) {
	t.Helper()
	if !poll(func() bool { _, hi := c.QueueRange(topic, q); return hi == 1 }) {
		t.Fatal(what)
	}
}

// poll: for state other goroutines change without a signal to await.
var poll = testutil.Poll

// classicRecord is a record with a body and properties given as key,
// value pairs.
func classicRecord(body string, kv ...string) *message.Message {
	r := &message.Message{Body: []byte(body)}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Set(kv[i], kv[i+1])
	}
	return r
}

// TestParkedPullsWokenByTheirQueueOnly: a pull parked on one queue is
// woken by arrivals to that queue, not by every arrival to its topic.
func TestParkedPullsWokenByTheirQueueOnly(t *testing.T) {
	e := newEnv(t)
	e.topic("T", model.TopicNormal) // 4 queues
	c := e.b.Classic()
	tp, err := e.b.Topic(e.ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	type result struct {
		q   int32
		res ClassicPull
		err error
	}
	done := make(chan result, 4)
	for q := int32(0); q < 4; q++ {
		go func() {
			res, err := c.Pull(ctx, ClassicPullRequest{Group: "g", Topic: tp, QueueID: q, Offset: 0, Max: 32, Wait: time.Hour})
			done <- result{q, res, err}
		}()
	}
	for e.b.s().hub.Parked() != 4 {
		runtime.Gosched()
	}
	before := e.b.s().hub.Woken()
	if _, err := c.SendRecords(e.ctx, ClassicSend{Topic: "T", QueueID: 2, Records: []*message.Message{classicRecord("x", "UNIQ_KEY", "U1")}}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.q != 2 || len(r.res.Records) != 1 {
		t.Fatalf("queue %d: %+v %v", r.q, r.res, r.err)
	}
	if n := e.b.s().hub.Woken() - before; n != 1 {
		t.Fatalf("an arrival to queue 2 woke %d parked pulls, want 1", n)
	}
	cancel()
	for i := 0; i < 3; i++ {
		if r := <-done; r.err != nil || r.res.Status != PullNoNew {
			t.Fatalf("queue %d after cancel: %+v %v", r.q, r.res, r.err)
		}
	}
}

// GroupConsumes: a group's own retry and dead-letter topics, a topic it
// committed an offset in, a topic it receives from by POP; nothing else.
func TestClassicGroupConsumes(t *testing.T) {
	e := newEnv(t)
	e.topic("T", model.TopicNormal)
	e.topic("P", model.TopicNormal)
	e.topic("Q", model.TopicNormal)
	e.group("G", 16, false)
	c := e.b.Classic()
	for _, tc := range []struct {
		topic string
		want  bool
	}{{"%RETRY%G", true}, {"%DLQ%G", true}, {"%RETRY%H", false}, {"%DLQ%H", false}, {"T", false}, {"P", false}, {"Q", false}} {
		if got := c.GroupConsumes("G", tc.topic); got != tc.want {
			t.Errorf("before consuming: G consumes %s = %v, want %v", tc.topic, got, tc.want)
		}
	}
	c.CommitOffset("G", "T", 0, 1)
	e.send("P", 1, "")
	if _, err := e.receive("G", "P", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic string
		want  bool
	}{{"T", true}, {"P", true}, {"Q", false}} {
		if got := c.GroupConsumes("G", tc.topic); got != tc.want {
			t.Errorf("G consumes %s = %v, want %v", tc.topic, got, tc.want)
		}
	}
	if c.GroupConsumes("H", "T") {
		t.Error("another group's offsets count for H")
	}
}
