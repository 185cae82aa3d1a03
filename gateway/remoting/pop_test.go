package remoting

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

func (e *env) pop(c *client.Conn, group, topic string, max int) *codec.Command {
	e.t.Helper()
	return e.call(c, reqPopMessage, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": fmt.Sprint(max),
		"invisibleTime": "60000", "pollTime": "0", "bornTime": fmt.Sprint(e.clk.Now().UnixMilli()), "initMode": "0"}, nil)
}

// Trap 33: POP answers (also "no message") carry popTime, invisibleTime,
// reviveQid and restNum; each message has an 8-field POP_CK; ack,
// change-invisible-time and batch ack run on the broker's POP state — the
// same one gRPC receives use.
func TestPopFamily(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	fields := func(r *codec.Command, names ...string) {
		t.Helper()
		for _, n := range names {
			if _, ok := r.Ext[n]; !ok {
				t.Fatalf("answer %d lacks %s: %+v", r.Code, n, r.Ext)
			}
		}
	}
	r := e.pop(c, "PG", "T", 4)
	if r.Code != codePollingTimeout {
		t.Fatalf("empty pop %d", r.Code)
	}
	fields(r, "popTime", "invisibleTime", "reviveQid", "restNum")
	for i := range 3 {
		e.must(e.send(c, "T", 0, fmt.Sprint("m", i), props("UNIQ_KEY", fmt.Sprint("U", i))), codeSuccess)
	}
	r = e.must(e.pop(c, "PG", "T", 3), codeSuccess)
	fields(r, "popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo")
	rs := records(t, r.Body)
	if len(rs) != 3 {
		t.Fatalf("%d popped", len(rs))
	}
	ck := make([]string, 3)
	for i, rec := range rs {
		ck[i] = propsOf(rec)["POP_CK"]
		if f := strings.Fields(ck[i]); len(f) != 8 || f[6] != "0" || f[7] != fmt.Sprint(rec.QueueOffset) || f[5] != "broker-a" {
			t.Fatalf("POP_CK %q", ck[i])
		}
	}
	// Nothing else is visible (gRPC's receive sees the same in-flight state).
	if _, err := e.b.Receive(e.ctx, broker.ReceiveRequest{Group: "PG", Topic: "T", Max: 8, Invisible: time.Minute}); err == nil {
		t.Fatal("gRPC receive got messages popped over remoting")
	}
	ack := func(i int, extra string) *codec.Command {
		return e.call(c, reqAckMessage, map[string]string{"consumerGroup": "PG", "topic": "T", "queueId": "0", "offset": fmt.Sprint(rs[i].QueueOffset), "extraInfo": extra}, nil)
	}
	e.must(ack(0, ck[0]), codeSuccess)
	e.must(ack(0, ck[0]), codeNoMessage)
	e.must(ack(1, "garbage"), codeInvalidParameter)

	// Change invisibility of message 1: the answer always has its fields,
	// and the client's rebuilt handle (new popTime) acks it.
	ch := e.call(c, reqChangeInvisibleTime, map[string]string{"consumerGroup": "PG", "topic": "T", "queueId": "0", "offset": fmt.Sprint(rs[1].QueueOffset),
		"extraInfo": ck[1], "invisibleTime": "30000"}, nil)
	e.must(ch, codeSuccess)
	fields(ch, "popTime", "invisibleTime", "reviveQid")
	rebuilt := fmt.Sprintf("%d %s 30000 %s 0 broker-a 0 %d", rs[1].QueueOffset, ch.Ext["popTime"], ch.Ext["reviveQid"], rs[1].QueueOffset)
	bad := e.call(c, reqChangeInvisibleTime, map[string]string{"consumerGroup": "PG", "topic": "T", "queueId": "0", "offset": "99",
		"extraInfo": ck[1], "invisibleTime": "30000"}, nil)
	if bad.Code != codeNoMessage {
		t.Fatalf("change of an unknown delivery: %d", bad.Code)
	}
	fields(bad, "popTime", "invisibleTime", "reviveQid")
	e.must(ack(1, rebuilt), codeSuccess)

	// Batch ack of message 2 by bit set.
	var popTime string
	fmt.Sscan(strings.Fields(ck[2])[1], &popTime)
	bits := base64.StdEncoding.EncodeToString([]byte{1 << 2})
	body := fmt.Sprintf(`{"brokerName":"broker-a","acks":[{"c":"PG","t":"T","r":"0","so":0,"q":0,"rq":0,"pt":%s,"it":60000,"b":%q}]}`, popTime, bits)
	e.must(e.call(c, reqBatchAckMessage, nil, []byte(body)), codeSuccess)
	e.must(e.call(c, reqBatchAckMessage, nil, []byte(`{"acks":[]}`)), codeNoMessage)
	// All acknowledged: after the invisibility nothing comes back.
	e.clk.Advance(2 * time.Minute)
	if r := e.pop(c, "PG", "T", 3); r.Code != codePollingTimeout {
		t.Fatalf("acknowledged messages redelivered: %d", r.Code)
	}
	e.must(e.call(c, reqPopMessage, map[string]string{"consumerGroup": "PG", "topic": "T", "queueId": "-1", "maxMsgNums": "33", "invisibleTime": "60000"}, nil), codeInvalidParameter)
}

// POP with an SQL92 expression pops only what matches (the group skips
// the rest); a malformed one is SUBSCRIPTION_PARSE_FAILED.
func TestPopSQL92(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	for i := range 4 {
		e.must(e.send(c, "T", 0, fmt.Sprint("m", i), props("a", fmt.Sprint(i))), codeSuccess)
	}
	pop := func(exp string) *codec.Command {
		return e.call(c, reqPopMessage, map[string]string{"consumerGroup": "PG", "topic": "T", "queueId": "-1", "maxMsgNums": "8",
			"invisibleTime": "60000", "pollTime": "0", "bornTime": fmt.Sprint(e.clk.Now().UnixMilli()), "initMode": "0",
			"expType": "SQL92", "exp": exp}, nil)
	}
	rs := records(t, e.must(pop("a >= 2"), codeSuccess).Body)
	if len(rs) != 2 || string(rs[0].Body) != "m2" || string(rs[1].Body) != "m3" {
		t.Fatalf("popped %+v, want m2 and m3", rs)
	}
	if r := pop("a >= 0"); r.Code != codePollingTimeout {
		t.Fatalf("the skipped messages came back: %d", r.Code)
	}
	if r := pop("a >="); r.Code != codeSubscriptionParseFailed || !strings.Contains(r.Remark, "SQL92") {
		t.Fatalf("malformed: %d %s", r.Code, r.Remark)
	}
}
