package broker

import (
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

// deadLetter sends n messages to t and lets g (one delivery attempt) fail
// them all into its dead-letter topic.
func (e *env) deadLetter(topic, group string, n int) []string {
	e.t.Helper()
	sent := e.send(topic, n, "X")
	d, err := e.receive(group, topic, n, 10*time.Second)
	if err != nil || len(d) != n {
		e.t.Fatalf("receive: %v %d", err, len(d))
	}
	e.clk.Advance(10 * time.Second)
	if _, err := e.receive(group, topic, n, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		e.t.Fatalf("delivered past max attempts: %v", err)
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		e.t.Fatal(err)
	}
	return sent
}

func TestDeadLettersAndRedrive(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("g", 1, false)

	page, err := e.b.DeadLetters(e.ctx, "g", 0)
	if err != nil || page.Pending != 0 || len(page.Messages) != 0 || page.Topic != "%DLQ%g" {
		t.Fatalf("before any dead letter: %v %+v", err, page)
	}
	sent := e.deadLetter("t", "g", 3)

	page, err = e.b.DeadLetters(e.ctx, "g", 2)
	if err != nil || page.Pending != 3 || len(page.Messages) != 2 {
		t.Fatalf("dead letters: %v %+v", err, page)
	}
	if m := page.Messages[0]; m.DLQOriginTopic != "t" || m.Tag != "X" || string(m.Body) != "body-"+m.ID {
		t.Fatalf("dead letter: %+v", m)
	}

	res, err := e.b.RedriveDeadLetters(e.ctx, "g", 2)
	if err != nil || len(res.Redriven) != 2 || res.Pending != 1 || res.Redriven[0].Topic != "t" {
		t.Fatalf("redrive: %v %+v", err, res)
	}
	_, written := e.store.LogRange()
	_ = e.store.WaitDispatched(e.ctx, written)
	page, err = e.b.DeadLetters(e.ctx, "g", 0)
	if err != nil || page.Pending != 1 || len(page.Messages) != 1 {
		t.Fatalf("after redrive: %v %+v", err, page)
	}

	// The group receives the redriven messages again, as first deliveries.
	d, err := e.receive("g", "t", 10, 10*time.Second)
	if err != nil || len(d) != 2 {
		t.Fatalf("receive redriven: %v %d", err, len(d))
	}
	got := map[string]bool{}
	for _, m := range d {
		if m.Attempt != 1 || m.Tag != "X" || string(m.Body) != "body-"+m.ID {
			t.Fatalf("redriven delivery: %+v", m)
		}
		got[m.ID] = true
	}
	for _, id := range sent[:2] {
		if !got[id] {
			t.Fatalf("redriven %v, want %v", got, sent[:2])
		}
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{d[0].ReceiptHandle, d[1].ReceiptHandle}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}

	// The last one; the redrive position survives a restart.
	e.restart()
	res, err = e.b.RedriveDeadLetters(e.ctx, "g", 0)
	if err != nil || len(res.Redriven) != 1 || res.Pending != 0 {
		t.Fatalf("second redrive: %v %+v", err, res)
	}
	res, err = e.b.RedriveDeadLetters(e.ctx, "g", 0)
	if err != nil || len(res.Redriven) != 0 || res.Pending != 0 {
		t.Fatalf("nothing left: %v %+v", err, res)
	}
}

func TestDeadLettersUnknownGroup(t *testing.T) {
	e := newEnv(t)
	if _, err := e.b.DeadLetters(e.ctx, "nope", 0); mqerr.KindOf(err) != mqerr.KindGroupNotFound {
		t.Fatalf("unknown group: %v", err)
	}
	if _, err := e.b.RedriveDeadLetters(e.ctx, "bad name!", 0); err == nil {
		t.Fatal("bad group name accepted")
	}
}

// A redrive stops at the first dead letter it cannot send, having
// committed those sent before it: nothing is lost or sent twice.
func TestRedriveStopsAtAFailedSend(t *testing.T) {
	e := newEnv(t)
	e.topic("a", model.TopicNormal)
	e.topic("b", model.TopicNormal)
	e.group("g", 1, false)
	e.deadLetter("a", "g", 1)
	e.deadLetter("b", "g", 1)
	if err := e.b.DeleteTopic(e.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	res, err := e.b.RedriveDeadLetters(e.ctx, "g", 0)
	if mqerr.KindOf(err) != mqerr.KindTopicNotFound || len(res.Redriven) != 1 || res.Redriven[0].Topic != "a" || res.Pending != 1 {
		t.Fatalf("redrive: %v %+v", err, res)
	}
	page, err := e.b.DeadLetters(e.ctx, "g", 0)
	if err != nil || page.Pending != 1 || len(page.Messages) != 1 || page.Messages[0].DLQOriginTopic != "b" {
		t.Fatalf("left: %v %+v", err, page)
	}
	// Once the topic is back, the rest goes.
	e.topic("b", model.TopicNormal)
	if res, err := e.b.RedriveDeadLetters(e.ctx, "g", 0); err != nil || len(res.Redriven) != 1 || res.Pending != 0 {
		t.Fatalf("second redrive: %v %+v", err, res)
	}
}
