package bench

import (
	"testing"

	"google.golang.org/protobuf/proto"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func TestMedianRound(t *testing.T) {
	rd := func(ratio float64) Round { return Round{Ratio: ratio, Echo: &Figures{}} }
	for _, c := range []struct {
		rounds []Round
		want   Round
	}{
		{[]Round{rd(0.9)}, rd(0.9)},
		{[]Round{rd(0.9), rd(0.7), rd(0.8)}, rd(0.8)},
		{[]Round{rd(0.9), rd(0.7), rd(0.8), rd(1.0)}, rd(0.8)},
	} {
		got := medianRound(c.rounds)
		if got.Ratio != c.want.Ratio {
			t.Errorf("medianRound(%v) = %+v, want %+v", c.rounds, got, c.want)
		}
	}
}

func TestCPURatio(t *testing.T) {
	m := Figures{CPUusPerCall: 30, CPUusPerMsg: 3}
	if got := cpuRatio(m, &Figures{CPUusPerCall: 20, CPUusPerMsg: 1}); got != 1.5 {
		t.Errorf("per call: %v, want 1.5", got)
	}
	if got := cpuRatio(Figures{CPUusPerMsg: 3}, &Figures{CPUusPerMsg: 2}); got != 1.5 {
		t.Errorf("per message when no calls are counted: %v, want 1.5", got)
	}
	if got := cpuRatio(m, nil); got != 0 {
		t.Errorf("no base: %v", got)
	}
}

// The plain echo's encoded responses are the shapes the bench checks: a
// send of N messages gets N entries, an ack of N handles N entries, a
// receive a status, 32 messages and a delivery timestamp.
func TestPlainEchoFrames(t *testing.T) {
	p := newPlainEcho(1024, 4, 2)
	var send v2.SendMessageResponse
	if err := proto.Unmarshal(p.send.b, &send); err != nil || len(send.Entries) != 4 || send.Status.GetCode() != v2.Code_OK {
		t.Fatalf("send: %v %v", &send, err)
	}
	var ack v2.AckMessageResponse
	if err := proto.Unmarshal(p.ack.b, &ack); err != nil || len(ack.Entries) != 2 {
		t.Fatalf("ack: %v %v", &ack, err)
	}
	if len(p.receive) != 34 {
		t.Fatalf("%d receive frames", len(p.receive))
	}
	var m v2.ReceiveMessageResponse
	if err := proto.Unmarshal(p.receive[1].b, &m); err != nil || len(m.GetMessage().GetBody()) != 1024 {
		t.Fatalf("receive: %v", err)
	}
}
