package e2e

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// firstCheck is when mqgate first asks a producer about an unfinished
// transaction (upstream's 6 s).
const firstCheck = 6 * time.Second

type check struct {
	id, topic, body string
}

// checkerByBody resolves by message body: "commit…" and "orphan…" are
// committed, anything else rolled back; every call is logged.
func checkerByBody(log *events[check]) func(*rmq.MessageView) rmq.TransactionResolution {
	return func(mv *rmq.MessageView) rmq.TransactionResolution {
		log.add(check{mv.GetMessageId(), mv.GetTopic(), string(mv.GetBody())})
		switch b := string(mv.GetBody()); {
		case len(b) >= 6 && (b[:6] == "commit" || b[:6] == "orphan"):
			return rmq.COMMIT
		}
		return rmq.ROLLBACK
	}
}

func sendTx(t *testing.T, pr rmq.Producer, topic, body string) (rmq.Transaction, *rmq.SendReceipt) {
	t.Helper()
	tx := pr.BeginTransaction()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rs, err := pr.SendWithTransaction(ctx, &rmq.Message{Topic: topic, Body: []byte(body)}, tx)
	if err != nil {
		t.Fatalf("transactional send %q: %v", body, err)
	}
	if rs[0].TransactionId == "" {
		t.Fatalf("no transaction id for %q", body)
	}
	return tx, rs[0]
}

// Official producer: a committed transaction becomes visible, a rolled
// back one never does, and an orphan (neither) is resolved through the
// producer's transaction checker, which mqgate calls over Telemetry.
func TestTransactionCommitRollbackOrphan(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("tx"), uniq("g")
	cli(t, p, "topic", "create", topic, "--type", "TRANSACTION", "--queues", "2")
	cli(t, p, "group", "create", group)
	checks := newEvents[check]()
	pr := newTxProducer(t, p, checkerByBody(checks), topic)
	r := dialRaw(t, p)
	c := newConsumer(t, p, group, 5*time.Second, all(topic))
	got := newEvents[arrival]()
	ctx, cancel := context.WithCancel(context.Background())
	wg := receiveLoop(ctx, t, c, r, group, topic, got)
	defer func() { cancel(); wg.Wait() }()

	txC, commit := sendTx(t, pr, topic, "commit-me")
	if _, ok := got.await(time.Second, func(l []arrival) bool { return len(l) > 0 }); ok {
		t.Fatal("a half message was delivered before its commit")
	}
	if err := txC.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	l, ok := got.await(10*time.Second, func(l []arrival) bool { return len(l) >= 1 })
	if !ok || l[0].id != commit.MessageID {
		t.Fatalf("after commit: %v", l)
	}
	txR, rollback := sendTx(t, pr, topic, "rollback-me")
	if err := txR.RollBack(); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	_, orphan := sendTx(t, pr, topic, "orphan-resolved-by-checker") // neither commit nor rollback
	sentAt := time.Now()

	l, ok = got.await(firstCheck+30*time.Second, func(l []arrival) bool { return len(l) >= 2 })
	if !ok {
		t.Fatalf("the orphan was not resolved: arrivals %v, checks %v", l, checks.snapshot())
	}
	if l[1].id != orphan.MessageID {
		t.Fatalf("second arrival %s, want the orphan %s (the rolled back %s must never come)", l[1].id, orphan.MessageID, rollback.MessageID)
	}
	if waited := l[1].at.Sub(sentAt); waited < firstCheck-slack {
		t.Fatalf("orphan resolved %s after its send, before the first check (%s)", waited, firstCheck)
	}
	cs := checks.snapshot()
	if len(cs) != 1 || cs[0].id != orphan.MessageID || cs[0].topic != topic || cs[0].body != "orphan-resolved-by-checker" {
		t.Fatalf("checker calls %+v, want one for the orphan", cs)
	}
	// Still nothing for the rolled back message.
	if l, _ := got.await(time.Second, func(l []arrival) bool { return len(l) > 2 }); len(l) != 2 {
		t.Fatalf("arrivals %v", l)
	}
}

// Half messages survive kill -9: after the restart a commit and a
// rollback (raw EndTransaction with the ids from before the crash) apply,
// and an orphan is resolved through the checker of a producer connected
// to the new process.
func TestTransactionsAcrossKill9Restart(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group := uniq("tx"), uniq("g")
	cli(t, p, "topic", "create", topic, "--type", "TRANSACTION", "--queues", "2")
	cli(t, p, "group", "create", group)
	before := newEvents[check]()
	pr := newTxProducer(t, p, checkerByBody(before), topic)
	_, commit := sendTx(t, pr, topic, "commit-after-restart")
	_, rollback := sendTx(t, pr, topic, "rollback-after-restart")
	_, orphan := sendTx(t, pr, topic, "orphan-after-restart")
	r := dialRaw(t, p)
	st, _ := r.receiveRaw(r.id, recvReq(group, topic, 32, time.Minute), 3*time.Second)
	wantCode(t, "receive before the crash", st, pb.Code_MESSAGE_NOT_FOUND)

	p.Kill9()
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	checks := newEvents[check]()
	newTxProducer(t, p2, checkerByBody(checks), topic)
	r2 := dialRaw(t, p2)
	wantCode(t, "commit after the restart", r2.endTx(topic, commit.MessageID, commit.TransactionId, pb.TransactionResolution_COMMIT), pb.Code_OK)
	wantCode(t, "rollback after the restart", r2.endTx(topic, rollback.MessageID, rollback.TransactionId, pb.TransactionResolution_ROLLBACK), pb.Code_OK)
	wantCode(t, "repeated commit", r2.endTx(topic, commit.MessageID, commit.TransactionId, pb.TransactionResolution_COMMIT), pb.Code_OK)
	wantCode(t, "commit after rollback", r2.endTx(topic, rollback.MessageID, rollback.TransactionId, pb.TransactionResolution_COMMIT), pb.Code_INVALID_TRANSACTION_ID)

	c := newConsumer(t, p2, group, 5*time.Second, all(topic))
	got := newEvents[arrival]()
	ctx, cancel := context.WithCancel(context.Background())
	wg := receiveLoop(ctx, t, c, r2, group, topic, got)
	defer func() { cancel(); wg.Wait() }()
	l, ok := got.await(firstCheck+45*time.Second, func(l []arrival) bool { return len(l) >= 2 })
	if !ok {
		t.Fatalf("after the restart: arrivals %v, checks %v", l, checks.snapshot())
	}
	ids := map[string]bool{l[0].id: true, l[1].id: true}
	if !ids[commit.MessageID] || !ids[orphan.MessageID] {
		t.Fatalf("arrivals %v, want the committed %s and the orphan %s (never the rolled back %s)", l, commit.MessageID, orphan.MessageID, rollback.MessageID)
	}
	asked := false
	for _, c := range checks.snapshot() {
		if c.id == orphan.MessageID {
			asked = true
		}
	}
	if !asked {
		t.Fatalf("the orphan was resolved without asking the new producer's checker: %v", checks.snapshot())
	}
	if l, _ := got.await(time.Second, func(l []arrival) bool { return len(l) > 2 }); len(l) != 2 {
		t.Fatalf("arrivals %v", l)
	}
}
