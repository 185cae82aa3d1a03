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
