package remoting

import (
	"fmt"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

func (e *env) sendBack(c *client.Conn, phys int64, group string, level, maxRe int) {
	e.t.Helper()
	e.must(e.call(c, reqConsumerSendMsgBack, map[string]string{"offset": fmt.Sprint(phys), "group": group, "delayLevel": fmt.Sprint(level),
		"originMsgId": "ORIG", "originTopic": "T", "unitMode": "false", "maxReconsumeTimes": fmt.Sprint(maxRe)}, nil), codeSuccess)
}

func (e *env) retryRecords(c *client.Conn, group string, from int64) []wire.Record {
	e.t.Helper()
	r := e.pull(c, group, "%RETRY%"+group, 0, from)
	if r.Code != codeSuccess {
		return nil
	}
	return records(e.t, r.Body)
}

// Traps 17 and 18: a send-back succeeds and redelivers through
// %RETRY%<group> after level 3 + reconsume times (10 s, then 30 s) with
// RETRY_TOPIC, ORIGIN_MESSAGE_ID and reconsume times set; the record's
// PHYSICALOFFSET stays resolvable for the next send-back; after
// maxReconsumeTimes the message goes to %DLQ%<group>.
func TestSendBackRetriesThenDeadLetters(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	e.must(e.send(c, "T", 0, "poison", props("UNIQ_KEY", "U1", "KEYS", "k")), codeSuccess)
	orig := records(t, e.must(e.pull(c, "CG", "T", 0, 0), codeSuccess).Body)[0]

	e.sendBack(c, orig.PhysOffset, "CG", 0, 2)
	e.clk.Advance(9 * time.Second)
	if rs := e.retryRecords(c, "CG", 0); len(rs) != 0 {
		t.Fatal("redelivered before level 3 (10 s)")
	}
	e.clk.Advance(time.Second)
	eventually(t, "the first redelivery", func() bool { return len(e.retryRecords(c, "CG", 0)) == 1 })
	r1 := e.retryRecords(c, "CG", 0)[0]
	p := propsOf(r1)
	if r1.Topic != "%RETRY%CG" || r1.ReconsumeTimes != 1 || p["RETRY_TOPIC"] != "T" || p["ORIGIN_MESSAGE_ID"] != "ORIG" || p["UNIQ_KEY"] != "U1" || string(r1.Body) != "poison" {
		t.Fatalf("retry record %+v %q", r1, p)
	}

	e.sendBack(c, r1.PhysOffset, "CG", 0, 2)
	e.clk.Advance(29 * time.Second)
	if rs := e.retryRecords(c, "CG", 1); len(rs) != 0 {
		t.Fatal("second redelivery before level 4 (30 s)")
	}
	e.clk.Advance(time.Second)
	eventually(t, "the second redelivery", func() bool { return len(e.retryRecords(c, "CG", 1)) == 1 })
	r2 := e.retryRecords(c, "CG", 1)[0]
	if r2.ReconsumeTimes != 2 || propsOf(r2)["RETRY_TOPIC"] != "T" {
		t.Fatalf("second retry %+v", r2)
	}

	e.sendBack(c, r2.PhysOffset, "CG", 0, 2) // reconsume 2 ≥ max 2: dead letter
	d := e.must(e.pull(c, "X", "%DLQ%CG", 0, 0), codeSuccess)
	dl := records(t, d.Body)[0]
	if dl.Topic != "%DLQ%CG" || propsOf(dl)["RETRY_TOPIC"] != "T" || propsOf(dl)["UNIQ_KEY"] != "U1" || dl.ReconsumeTimes != 3 {
		t.Fatalf("dead letter %+v %q", dl, dl.Properties)
	}
	// gRPC consumers of the DLQ see where it came from.
	got, err := e.b.Pull(e.ctx, "CG", "%DLQ%CG", 0, 0, 1, modelFilterAll, 0)
	if err != nil || got.Messages[0].DLQOriginTopic != "T" || got.Messages[0].DLQOriginID != "U1" {
		t.Fatalf("gRPC view of the dead letter: %+v %v", got.Messages, err)
	}

	// delayLevel -1: straight to the DLQ; an unknown offset is refused.
	e.sendBack(c, orig.PhysOffset, "CG2", -1, 16)
	e.must(e.pull(c, "X", "%DLQ%CG2", 0, 0), codeSuccess)
	e.must(e.call(c, reqConsumerSendMsgBack, map[string]string{"offset": fmt.Sprint(orig.PhysOffset + 3), "group": "CG", "delayLevel": "0"}, nil), codeQueryNotFound)
}
