package remoting

import (
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// A reset reaches the connected consumers of the group that subscribe to
// the topic as RESET_CONSUMER_CLIENT_OFFSET (oneway): the header names
// topic, group and time, the body is the fastjson offset table upstream's
// brokers send (keys are MessageQueue objects). A member of the group
// subscribed elsewhere, and another group on the topic, are not told.
func TestResetOffsetTellsClassicConsumers(t *testing.T) {
	e := newEnv(t)
	a, other, og := e.dial(), e.dial(), e.dial()
	e.createTopic(a, "T", 2, "")
	for i, q := range []int{0, 0, 0, 1} {
		e.must(e.send(a, "T", q, fmt.Sprint("m", i), ""), codeSuccess)
	}
	got := make(chan *codec.Command, 4)
	for _, c := range []interface {
		Handle(int32, func(*codec.Command))
	}{a, other, og} {
		c.Handle(reqResetConsumerClientOffset, func(cmd *codec.Command) { got <- cmd })
	}
	e.must(e.call(a, reqHeartBeat, nil, heartbeatBody("192.0.2.2@1", nil, map[string][]string{"CG": {"T", "%RETRY%CG"}})), codeSuccess)
	e.must(e.call(other, reqHeartBeat, nil, heartbeatBody("192.0.2.3@1", nil, map[string][]string{"CG": {"U"}})), codeSuccess)
	e.must(e.call(og, reqHeartBeat, nil, heartbeatBody("192.0.2.4@1", nil, map[string][]string{"OG": {"T"}})), codeSuccess)
	if cs := e.s.reg.consumerConns("CG", "T"); len(cs) != 1 {
		t.Fatalf("%d connections subscribe to T in CG, want 1", len(cs))
	}

	if _, err := e.b.ResetOffset(e.ctx, broker.ResetOffsetRequest{Group: "CG", Topic: "T", To: broker.ResetToLatest}); err != nil {
		t.Fatal(err)
	}
	cmd := <-got
	if !cmd.IsOneway() || cmd.Code != reqResetConsumerClientOffset {
		t.Fatalf("code %d oneway %v", cmd.Code, cmd.IsOneway())
	}
	if cmd.Ext["topic"] != "T" || cmd.Ext["group"] != "CG" || cmd.Ext["isForce"] != "true" ||
		cmd.Ext["timestamp"] != fmt.Sprint(e.clk.Now().UnixMilli()) {
		t.Fatalf("header %v", cmd.Ext)
	}
	want := `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:3,{"brokerName":"broker-a","queueId":1,"topic":"T"}:1}}`
	if string(cmd.Body) != want {
		t.Fatalf("body\n%s\nwant\n%s", cmd.Body, want)
	}

	// To a time: the header carries it.
	at := e.clk.Now().Add(-1)
	if _, err := e.b.ResetOffset(e.ctx, broker.ResetOffsetRequest{Group: "CG", Topic: "T", To: broker.ResetToTime, Time: at}); err != nil {
		t.Fatal(err)
	}
	if cmd := <-got; cmd.Ext["timestamp"] != fmt.Sprint(at.UnixMilli()) {
		t.Fatalf("header %v", cmd.Ext)
	}
}

// INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime) moves the
// group's offsets here, answers the offset table, and tells connected
// consumers. isForce=false only moves queues back; queueId and offset
// reset one queue to an exact offset; bad headers are refused.
func TestInvokeBrokerToResetOffset(t *testing.T) {
	e := newEnv(t)
	admin, cons := e.dial(), e.dial()
	e.createTopic(admin, "T", 2, "")
	for i, q := range []int{0, 0, 0, 1} {
		e.must(e.send(admin, "T", q, fmt.Sprint("m", i), ""), codeSuccess)
	}
	got := make(chan *codec.Command, 8)
	cons.Handle(reqResetConsumerClientOffset, func(cmd *codec.Command) { got <- cmd })
	e.must(e.call(cons, reqHeartBeat, nil, heartbeatBody("192.0.2.2@1", nil, map[string][]string{"CG": {"T"}})), codeSuccess)
	table := func(q0, q1 int64) string {
		return fmt.Sprintf(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:%d,{"brokerName":"broker-a","queueId":1,"topic":"T"}:%d}}`, q0, q1)
	}
	reset := func(ext map[string]string, want string) {
		t.Helper()
		ext["topic"], ext["group"] = "T", "CG"
		if _, ok := ext["timestamp"]; !ok {
			ext["timestamp"] = "0"
		}
		r := e.must(e.call(admin, reqInvokeBrokerToResetOffset, ext, nil), codeSuccess)
		if string(r.Body) != want {
			t.Fatalf("%v: body\n%s\nwant\n%s", ext, r.Body, want)
		}
	}
	committed := func(q0, q1 int64) {
		t.Helper()
		for q, want := range []int64{q0, q1} {
			if off, err := e.b.GetOffset(e.ctx, "CG", "T", int32(q)); err != nil || off != want {
				t.Fatalf("queue %d: committed %d (%v), want %d", q, off, err, want)
			}
		}
	}
	told := func(want string) {
		t.Helper()
		if cmd := <-got; string(cmd.Body) != want || cmd.Ext["group"] != "CG" {
			t.Fatalf("consumer told %v %s, want %s", cmd.Ext, cmd.Body, want)
		}
	}

	reset(map[string]string{"timestamp": "-1", "isForce": "true"}, table(3, 1))
	committed(3, 1)
	told(table(3, 1))
	// Not forced, to the start: both queues are past it, so both move.
	reset(map[string]string{"timestamp": "0", "isForce": "false"}, table(0, 0))
	committed(0, 0)
	told(table(0, 0))
	// Not forced, to the end: that would skip messages, so nothing moves
	// and nobody is told (the next notice is the one after).
	reset(map[string]string{"timestamp": "-1", "isForce": "false"}, table(0, 0))
	committed(0, 0)
	one := `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:2}}`
	reset(map[string]string{"queueId": "0", "offset": "2", "isForce": "true"}, one)
	committed(2, 0)
	told(one)

	for _, c := range []struct {
		ext  map[string]string
		code int32
	}{
		{map[string]string{"topic": "T", "timestamp": "0"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG", "timestamp": "-5"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG", "timestamp": "0", "offset": "1"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG", "timestamp": "0", "queueId": "0", "offset": "-2"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG", "timestamp": "0", "queueId": "0", "offset": "9", "isForce": "true"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "CG", "timestamp": "0", "queueId": "5", "isForce": "true"}, codeInvalidParameter},
		{map[string]string{"topic": "T", "group": "NOPE", "timestamp": "0", "isForce": "true"}, codeSubscriptionGroupNotExist},
		{map[string]string{"topic": "NOPE", "group": "CG", "timestamp": "0", "isForce": "true"}, codeTopicNotExist},
	} {
		if r := e.call(admin, reqInvokeBrokerToResetOffset, c.ext, nil); r.Code != c.code {
			t.Errorf("%v: code %d (%s), want %d", c.ext, r.Code, r.Remark, c.code)
		}
	}
	committed(2, 0)
}
