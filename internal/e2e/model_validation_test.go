package e2e

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// Bad input of the message model, each answered with a clear code while
// nothing already accepted changes:
//   - a message without a message group on a FIFO topic (the official
//     producer refuses it locally from the route's accepted types; raw,
//     the server answers MESSAGE_PROPERTY_CONFLICT_WITH_TYPE);
//   - a delivery time beyond the maximum delay (official producer:
//     ILLEGAL_DELIVERY_TIME);
//   - EndTransaction for an unknown transaction id (INVALID_TRANSACTION_ID),
//     after which a pending transaction still commits normally.
func TestMessageModelBadInput(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	fifo, delay, txTopic, group := uniq("fifo"), uniq("delay"), uniq("tx"), uniq("g")
	cli(t, p, "topic", "create", fifo, "--type", "FIFO", "--queues", "1")
	cli(t, p, "topic", "create", delay, "--type", "DELAY", "--queues", "1")
	cli(t, p, "topic", "create", txTopic, "--type", "TRANSACTION", "--queues", "1")
	cli(t, p, "group", "create", group)
	r := dialRaw(t, p)
	sendCtx := func() context.Context { return testutil.Context(t, 15*time.Second) }

	// FIFO topic, no message group.
	fp := newProducer(t, p, fifo)
	if _, err := fp.Send(sendCtx(), &rmq.Message{Topic: fifo, Body: []byte("no group")}); err == nil {
		t.Fatal("official producer sent a message without a group to a FIFO topic")
	}
	noGroup := msg(fifo, msgID(), "no group")
	wantCode(t, "raw NORMAL message to a FIFO topic", r.sendRaw(noGroup).Status, pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	declared := msg(fifo, msgID(), "declared FIFO, no group")
	declared.SystemProperties.MessageType = pb.MessageType_FIFO
	wantCode(t, "raw FIFO-typed message without a group", r.sendRaw(declared).Status, pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	ok := &rmq.Message{Topic: fifo, Body: []byte("with group")}
	ok.SetMessageGroup("g1")
	send(t, fp, ok)
	// Queues are filled in log order: once the good message is readable,
	// anything stored before it would be too.
	if end := r.awaitEnd(fifo, 0, 1); end != 1 {
		t.Fatalf("FIFO topic holds %d messages after refused sends and one good send", end)
	}

	// Beyond the maximum delay.
	dp := newProducer(t, p, delay)
	far := &rmq.Message{Topic: delay, Body: []byte("too far")}
	far.SetDelayTimestamp(time.Now().Add(24*time.Hour + time.Minute))
	if _, err := dp.Send(sendCtx(), far); rpcCode(err) != int32(pb.Code_ILLEGAL_DELIVERY_TIME) {
		t.Fatalf("delay beyond the maximum: %v, want ILLEGAL_DELIVERY_TIME", err)
	}
	soon := &rmq.Message{Topic: delay, Body: []byte("soon")}
	soon.SetDelayTimestamp(time.Now().Add(500 * time.Millisecond))
	soonID := send(t, dp, soon).MessageID

	// EndTransaction for unknown ids (asking for a rollback, so a request
	// that hit the pending transaction by mistake would make its commit
	// below fail); the pending transaction is untouched and commits.
	tp := newTxProducer(t, p, func(*rmq.MessageView) rmq.TransactionResolution { return rmq.UNKNOWN }, txTopic)
	tx, pending := sendTx(t, tp, txTopic, "pending")
	for name, id := range map[string]string{
		"made-up id":       "t1.bm90LWEtdHJhbnNhY3Rpb24",
		"plain message id": pending.MessageID,
		"tampered id":      flip(pending.TransactionId, len(pending.TransactionId)-3),
	} {
		wantCode(t, "EndTransaction with a "+name, r.endTx(txTopic, pending.MessageID, id, pb.TransactionResolution_ROLLBACK), pb.Code_INVALID_TRANSACTION_ID)
	}
	wantCode(t, "EndTransaction with a blank id", r.endTx(txTopic, pending.MessageID, "", pb.TransactionResolution_ROLLBACK), pb.Code_INVALID_TRANSACTION_ID)
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit of the pending transaction: %v", err)
	}

	// What was accepted arrives; nothing else does.
	for topic, want := range map[string]string{delay: soonID, txTopic: pending.MessageID} {
		c := newConsumer(t, p, group, 5*time.Second, all(topic))
		got := collect(t, c, 1, 30*time.Second, 30*time.Second, nil)
		if len(got) != 1 || got[0].GetMessageId() != want {
			t.Fatalf("%s delivered %v, want only %s", topic, ids(got), want)
		}
		wantCode(t, "ack", r.ack(group, topic, got[0].GetReceiptHandle()), pb.Code_OK)
		if end := r.awaitEnd(topic, 0, 1); end != 1 {
			t.Fatalf("%s holds %d messages, want 1", topic, end)
		}
	}
}
