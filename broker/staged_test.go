package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/broker/txn"
)

func (e *env) sendOne(m *model.Message) model.SendResult {
	e.t.Helper()
	res, err := e.b.Send(e.ctx, m.Topic, []*model.Message{m}, model.Producer{ClientID: "p1"})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("send: %v %+v", err, res)
	}
	return res[0]
}

func (e *env) waitReceive(group, topic string) []*model.Delivered {
	e.t.Helper()
	d, err := e.b.Receive(e.ctx, ReceiveRequest{Group: group, Topic: topic, Max: 8, Invisible: 10 * time.Second, Wait: time.Hour, QueueID: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func TestDelayVisibleAtDueTimeAndAcrossRestart(t *testing.T) {
	e := newEnv(t)
	e.topic("d", model.TopicDelay)
	e.group("g", 0, false)
	due := e.clk.Now().Add(5 * time.Second)
	r := e.sendOne(&model.Message{Topic: "d", ID: "m1", Body: []byte("x"), DeliveryTime: due})
	if r.RecallHandle == "" {
		t.Fatal("no recall handle")
	}
	if _, err := e.receive("g", "d", 8, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("visible before due: %v", err)
	}
	e.restart() // pending delayed messages survive
	e.clk.Advance(4 * time.Second)
	if _, err := e.receive("g", "d", 8, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("visible 1 s before due: %v", err)
	}
	got := make(chan []*model.Delivered, 1)
	go func() { got <- e.waitReceive("g", "d") }()
	e.clk.Advance(time.Second)
	d := <-got
	if len(d) != 1 || d[0].ID != "m1" || d[0].Type != model.MessageDelay || !d[0].DeliveryTime.Equal(due.Truncate(time.Millisecond)) {
		t.Fatalf("delivered %+v", d)
	}
	// Recalling a delivered message is a clear error.
	if _, err := e.b.Recall(e.ctx, "d", r.RecallHandle); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("recall after delivery: %v", err)
	}
}

func TestDelayRecallAndLimits(t *testing.T) {
	e := newEnv(t)
	e.topic("d", model.TopicDelay)
	e.group("g", 0, false)
	r := e.sendOne(&model.Message{Topic: "d", ID: "m1", Body: []byte("x"), DeliveryTime: e.clk.Now().Add(time.Minute)})
	id, err := e.b.Recall(e.ctx, "d", r.RecallHandle)
	if err != nil || id != "m1" {
		t.Fatalf("recall: %q %v", id, err)
	}
	if _, err := e.b.Recall(e.ctx, "d", r.RecallHandle); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("second recall: %v", err)
	}
	if _, err := e.b.Recall(e.ctx, "d", "d1.garbage"); mqerr.KindOf(err) != mqerr.KindBadRequest {
		t.Fatalf("garbled recall: %v", err)
	}
	e.clk.Advance(2 * time.Minute)
	if _, err := e.receive("g", "d", 8, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("recalled message delivered: %v", err)
	}
	_, err = e.b.Send(e.ctx, "d", []*model.Message{{Topic: "d", ID: "far", Body: []byte("x"), DeliveryTime: e.clk.Now().Add(25 * time.Hour)}}, model.Producer{})
	if mqerr.KindOf(err) != mqerr.KindIllegalDeliveryTime {
		t.Fatalf("beyond max delay: %v", err)
	}
}

type checker struct {
	mu    sync.Mutex
	calls []string
	fn    func(txid string)
}

func (c *checker) CheckTransaction(ctx context.Context, topic string, m *model.Delivered, txid string) bool {
	c.mu.Lock()
	c.calls = append(c.calls, m.ID)
	c.mu.Unlock()
	go c.fn(txid)
	return true
}

func TestTransactionCommitRollbackAndCheck(t *testing.T) {
	e := newEnv(t)
	e.topic("tx", model.TopicTransaction)
	e.group("g", 0, false)
	c := e.sendOne(&model.Message{Topic: "tx", ID: "commit-me", Body: []byte("x"), Transactional: true})
	rb := e.sendOne(&model.Message{Topic: "tx", ID: "roll-me", Body: []byte("x"), Transactional: true})
	if c.TransactionID == "" {
		t.Fatal("no transaction id")
	}
	if _, err := e.receive("g", "tx", 8, 10*time.Second); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("half message visible: %v", err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "commit-me", c.TransactionID, txn.Unspecified); err != nil {
		t.Fatalf("unspecified: %v", err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "commit-me", c.TransactionID, txn.Commit); err != nil {
		t.Fatal(err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "commit-me", c.TransactionID, txn.Commit); err != nil {
		t.Fatalf("repeated commit: %v", err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "commit-me", c.TransactionID, txn.Rollback); mqerr.KindOf(err) != mqerr.KindInvalidTransactionID {
		t.Fatalf("rollback after commit: %v", err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "roll-me", rb.TransactionID, txn.Rollback); err != nil {
		t.Fatal(err)
	}
	if err := e.b.EndTransaction(e.ctx, "tx", "x", "t1.unknown", txn.Commit); mqerr.KindOf(err) != mqerr.KindInvalidTransactionID {
		t.Fatalf("unknown id: %v", err)
	}
	d := e.waitReceive("g", "tx")
	if len(d) != 1 || d[0].ID != "commit-me" || d[0].Type != model.MessageTransaction {
		t.Fatalf("after commit: %+v", d)
	}

	// An orphan is resolved through the check-back port, across a restart.
	orphan := e.sendOne(&model.Message{Topic: "tx", ID: "orphan", Body: []byte("x"), Transactional: true})
	e.restart()
	ck := &checker{}
	ck.fn = func(txid string) {
		if txid != orphan.TransactionID {
			t.Errorf("check for %q", txid)
		}
		_ = e.b.EndTransaction(context.Background(), "tx", "orphan", txid, txn.Commit)
	}
	e.b.SetCheckBackSender(ck)
	got := make(chan []*model.Delivered, 1)
	go func() { got <- e.waitReceive("g", "tx") }()
	e.clk.Advance(6 * time.Second)
	if d := <-got; len(d) != 1 || d[0].ID != "orphan" {
		t.Fatalf("orphan: %+v", d)
	}
}

func TestPullAndOffsets(t *testing.T) {
	e := newEnv(t)
	e.topic("p", model.TopicNormal)
	e.group("g", 0, false)
	t0 := e.clk.Now()
	for i := 0; i < 3; i++ {
		e.sendOne(&model.Message{Topic: "p", ID: "a", Body: []byte("x")})
	}
	e.clk.Advance(time.Minute)
	t1 := e.clk.Now()
	e.send("p", 4, "late")
	var total int
	for q := int32(0); q < 4; q++ {
		end, _ := e.b.QueryOffset(e.ctx, "p", q, offset.End, time.Time{})
		total += int(end)
		if end == 0 {
			continue
		}
		res, err := e.b.Pull(e.ctx, "g", "p", q, 0, 32, model.Filter{}, 0)
		if err != nil || int64(len(res.Messages)) != end || res.Next != end {
			t.Fatalf("pull q%d: %v %d next=%d end=%d", q, err, len(res.Messages), res.Next, end)
		}
		if off, err := e.b.QueryOffset(e.ctx, "p", q, offset.Timestamp, t1); err != nil || (off != 0 && res.Messages[off-1].StoreTime.After(t1)) {
			t.Fatalf("by time: %d %v", off, err)
		}
		if off, _ := e.b.QueryOffset(e.ctx, "p", q, offset.Timestamp, t0); off != 0 {
			t.Fatalf("by start time: %d", off)
		}
	}
	if total != 7 {
		t.Fatalf("end offsets sum to %d", total)
	}
	if _, err := e.b.GetOffset(e.ctx, "g", "p", 0); mqerr.KindOf(err) != mqerr.KindOffsetNotFound {
		t.Fatalf("no offset yet: %v", err)
	}
	end0, _ := e.b.QueryOffset(e.ctx, "p", 0, offset.End, time.Time{})
	if err := e.b.UpdateOffset(e.ctx, "g", "p", 0, end0); err != nil {
		t.Fatal(err)
	}
	if err := e.b.UpdateOffset(e.ctx, "g", "p", 0, end0+5); mqerr.KindOf(err) != mqerr.KindIllegalOffset {
		t.Fatalf("beyond end: %v", err)
	}
	e.restart()
	if off, err := e.b.GetOffset(e.ctx, "g", "p", 0); err != nil || off != end0 {
		t.Fatalf("offset after restart: %d %v", off, err)
	}
	if _, err := e.b.Pull(e.ctx, "g", "p", 0, end0+1, 1, model.Filter{}, 0); mqerr.KindOf(err) != mqerr.KindIllegalOffset {
		t.Fatalf("pull beyond end: %v", err)
	}
	if _, err := e.b.Pull(e.ctx, "g", "p", 0, end0, 1, model.Filter{}, 0); mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		t.Fatalf("pull at end: %v", err)
	}
}
