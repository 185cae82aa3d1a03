package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/metadata"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterTransactionAcrossFailover: a transaction begun on one
// leader is committed through another after the first dies: the
// transaction id one leader signed is valid on every member (the keys
// that sign client-held tokens are the group's), and the committed
// message is delivered.
func TestClusterTransactionAcrossFailover(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t)
	l := g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("txfail"), e2eutil.Uniq("g")
	if out, err := e2eutil.CLIResult(t, l.grpc, "topic", "create", topic, "--type", "TRANSACTION"); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	a := g.acker()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", a.id, "x-mq-language", "GO", "x-mq-protocol", "v2")
	li := l.id - 1
	id := fmt.Sprintf("01AABBCCDDEEFF%04X%016X", 7, rawSeq.Add(1))
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	resp, err := a.conns[li].SendMessage(sctx, &pb.SendMessageRequest{Messages: []*pb.Message{{Topic: &pb.Resource{Name: topic},
		Body: []byte("committed after a failover"), SystemProperties: &pb.SystemProperties{MessageId: id, MessageType: pb.MessageType_TRANSACTION}}}})
	cancel()
	if err != nil || resp.GetStatus().GetCode() != pb.Code_OK || len(resp.GetEntries()) != 1 {
		t.Fatalf("half message: %v, %v", resp, err)
	}
	txID := resp.GetEntries()[0].GetTransactionId()

	l.proc.Kill9()
	nl := g.leader(30 * time.Second)
	if nl == l {
		t.Fatalf("member %d, killed, still leads", l.id)
	}
	var st *pb.Status
	for deadline := time.Now().Add(20 * time.Second); ; {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		er, err := a.conns[nl.id-1].EndTransaction(ectx, &pb.EndTransactionRequest{Topic: &pb.Resource{Name: topic}, MessageId: id,
			TransactionId: txID, Resolution: pb.TransactionResolution_COMMIT, Source: pb.TransactionSource_SOURCE_CLIENT})
		cancel()
		if err == nil {
			st = er.GetStatus()
			if st.GetCode() == pb.Code_OK || st.GetCode() == pb.Code_INVALID_TRANSACTION_ID || time.Now().After(deadline) {
				break
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("end transaction through member %d: %v", nl.id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.GetCode() != pb.Code_OK {
		t.Fatalf("commit through the new leader, member %d: %v %s", nl.id, st.GetCode(), st.GetMessage())
	}
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string][]string{}
	drain(t, c, a, cg, topic, 30*time.Second, got, func() bool { return len(got[id]) > 0 })
	if len(got[id]) == 0 {
		t.Fatalf("the committed message %s was not delivered", id)
	}
}
