package remoting

import (
	"fmt"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

// END_TRANSACTION names the half message by its commit-log offset (taken
// from the offset msgId of the send answer): commit publishes, rollback
// discards, 0 ("unknown yet") changes nothing; trap 32: the check-back
// goes to a connection of the half message's producer group only, and
// carries the half message under its real topic.
func TestTransactionsEndAndCheckBack(t *testing.T) {
	e := newEnv(t)
	prod, other := e.dial(), e.dial()
	e.createTopic(prod, "T", 1, "")
	checks := make(chan *codec.Command, 4)
	prod.Handle(reqCheckTransactionState, func(cmd *codec.Command) { checks <- cmd })
	other.Handle(reqCheckTransactionState, func(cmd *codec.Command) { t.Errorf("check sent to another producer group: %+v", cmd.Ext) })
	e.must(e.call(other, reqHeartBeat, nil, heartbeatBody("other@1", []string{"OTHER"}, nil)), codeSuccess)
	e.must(e.call(prod, reqHeartBeat, nil, heartbeatBody("tx@1", []string{"TPG"}, nil)), codeSuccess)

	half := func(body string) (phys, qoff int64, id string) {
		r := e.must(e.send(prod, "T", 0, body, props("TRAN_MSG", "true", "PGROUP", "TPG", "UNIQ_KEY", "U-"+body)), codeSuccess)
		_, phys, err := wire.ParseOffsetMsgID(r.Ext["msgId"])
		if err != nil || r.Ext["transactionId"] == "" {
			t.Fatalf("half answer %+v %v", r.Ext, err)
		}
		fmt.Sscan(r.Ext["queueOffset"], &qoff)
		return phys, qoff, "U-" + body
	}
	end := func(phys, qoff int64, id string, kind int) *codec.Command {
		return e.call(prod, reqEndTransaction, map[string]string{"producerGroup": "TPG", "tranStateTableOffset": fmt.Sprint(qoff),
			"commitLogOffset": fmt.Sprint(phys), "commitOrRollback": fmt.Sprint(kind), "msgId": id}, nil)
	}
	p1, q1, id1 := half("commit")
	p2, q2, id2 := half("rollback")
	p3, q3, id3 := half("ask")
	e.must(e.pull(prod, "CG", "T", 0, 0), codePullNotFound)
	e.must(end(p1, q1, id1, txCommit), codeSuccess)
	e.must(end(p2, q2, id2, txRollback), codeSuccess)
	e.must(end(p1, q1, id1, txCommit), codeSuccess) // repeats are fine
	e.must(end(p2, q2, id2, txCommit), codeIllegalOperation)
	e.must(end(p1+1, q1, id1, txCommit), codeQueryNotFound)
	e.must(e.call(prod, reqEndTransaction, map[string]string{"producerGroup": "WRONG", "tranStateTableOffset": fmt.Sprint(q3),
		"commitLogOffset": fmt.Sprint(p3), "commitOrRollback": "8", "msgId": id3}, nil), codeNoPermission)
	// "Unknown yet" (0) changes nothing (and, like upstream, gets no answer).
	if err := prod.Oneway(&codec.Command{Code: reqEndTransaction, Ext: map[string]string{"commitLogOffset": fmt.Sprint(p3), "commitOrRollback": "0"}}); err != nil {
		t.Fatal(err)
	}
	rs := records(t, e.must(e.pull(prod, "CG", "T", 0, 0), codeSuccess).Body)
	if len(rs) != 1 || string(rs[0].Body) != "commit" || propsOf(rs[0])["UNIQ_KEY"] != id1 {
		t.Fatalf("published %+v", rs)
	}
	// The third stays open: after its first check time the checker asks
	// TPG's connection.
	e.clk.Advance(7 * time.Second)
	var chk *codec.Command
	select {
	case chk = <-checks:
	case <-time.After(10 * time.Second):
		t.Fatal("no CHECK_TRANSACTION_STATE")
	}
	if !chk.IsOneway() || chk.Ext["commitLogOffset"] != fmt.Sprint(p3) || chk.Ext["tranStateTableOffset"] != fmt.Sprint(q3) ||
		chk.Ext["msgId"] != id3 || chk.Ext["transactionId"] == "" || chk.Ext["topic"] != "T" {
		t.Fatalf("check %+v", chk.Ext)
	}
	body := records(t, chk.Body)
	if len(body) != 1 || body[0].Topic != "T" || propsOf(body[0])["PGROUP"] != "TPG" || body[0].SysFlag&wire.SysTxPrepared == 0 {
		t.Fatalf("check body %+v", body)
	}
	// The producer answers from the check (Go: fromTransactionCheck).
	e.must(e.call(prod, reqEndTransaction, map[string]string{"producerGroup": "TPG", "tranStateTableOffset": chk.Ext["tranStateTableOffset"],
		"commitLogOffset": chk.Ext["commitLogOffset"], "commitOrRollback": "8", "fromTransactionCheck": "true", "msgId": id3,
		"transactionId": chk.Ext["transactionId"]}, nil), codeSuccess)
	rs = records(t, e.must(e.pull(prod, "CG", "T", 0, 1), codeSuccess).Body)
	if string(rs[0].Body) != "ask" {
		t.Fatalf("checked message %q", rs[0].Body)
	}
}

// A producer group with no live connection is not asked (the check is not
// counted); the producer that sent the half is asked even before its
// first heartbeat.
func TestCheckBackWithoutHeartbeatGoesToTheSendingConnection(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	checks := make(chan *codec.Command, 1)
	c.Handle(reqCheckTransactionState, func(cmd *codec.Command) { checks <- cmd })
	e.must(e.send(c, "T", 0, "x", props("TRAN_MSG", "true", "PGROUP", "NEWPG")), codeSuccess)
	e.clk.Advance(7 * time.Second)
	select {
	case chk := <-checks:
		if chk.Ext["topic"] != "T" {
			t.Fatalf("%+v", chk.Ext)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sending connection was not asked")
	}
}
