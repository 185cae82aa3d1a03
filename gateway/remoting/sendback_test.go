package remoting

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
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

	// delayLevel -1: straight to the DLQ; an offset where no message
	// starts is refused as upstream refuses it.
	e.must(e.pull(c, "CG2", "T", 0, 0), codeSuccess)
	e.sendBack(c, orig.PhysOffset, "CG2", -1, 16)
	e.must(e.pull(c, "X", "%DLQ%CG2", 0, 0), codeSuccess)
	r := e.must(e.call(c, reqConsumerSendMsgBack, map[string]string{"offset": fmt.Sprint(orig.PhysOffset + 3), "group": "CG", "delayLevel": "0"}, nil), codeSystemError)
	if want := fmt.Sprint("look message by offset failed, ", orig.PhysOffset+3); r.Remark != want {
		t.Fatalf("remark %q, want %q", r.Remark, want)
	}
}

// A send-back copies a message into the group's retry or dead-letter
// topic, which the group's consumers read: it is accepted only for a
// message of a topic the group consumes (a connected member subscribes
// to it, the group pulled it on the connection, committed an offset in
// it, or it is the group's own retry or dead-letter topic), and only at
// an offset where a message starts. Anything else copies nothing.
func TestSendBackOnlyForTopicsTheGroupConsumes(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	e.createTopic(c, "P", 1, "")
	physOf := func(r *codec.Command) int64 {
		_, phys, err := wire.ParseOffsetMsgID(r.Ext["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		return phys
	}
	tPhys := physOf(e.must(e.send(c, "T", 0, "t", props("UNIQ_KEY", "UT")), codeSuccess))
	pPhys := physOf(e.must(e.send(c, "P", 0, "private", props("UNIQ_KEY", "UP")), codeSuccess))
	half := physOf(e.must(e.send(c, "T", 0, "half", props("TRAN_MSG", "true", "PGROUP", "TPG", "UNIQ_KEY", "UH")), codeSuccess))
	// CG's consumer subscribes to T on its own connection.
	member := e.dial()
	e.must(e.call(member, reqHeartBeat, nil, heartbeatBody("cg-1", nil, map[string][]string{"CG": {"T", "%RETRY%CG"}})), codeSuccess)

	back := func(c *client.Conn, phys int64, group string) *codec.Command {
		return e.call(c, reqConsumerSendMsgBack, map[string]string{"offset": fmt.Sprint(phys), "group": group, "delayLevel": "-1",
			"originMsgId": "O", "maxReconsumeTimes": "16"}, nil)
	}
	dlq := func(group string) int64 { return e.stored("%DLQ%"+group, 0) }

	// P is no topic of CG's: refused, nothing copied.
	if r := back(c, pPhys, "CG"); r.Code != codeNoPermission || !strings.Contains(r.Remark, `does not consume topic "P"`) {
		t.Fatalf("send-back of a P message as CG: %d %q, want NO_PERMISSION", r.Code, r.Remark)
	}
	// A half message (a system record), a position inside a message and
	// one past the log: no message there.
	for _, off := range []int64{half, pPhys + 3, pPhys + 1<<20} {
		if r := back(c, off, "CG"); r.Code != codeSystemError || !strings.Contains(r.Remark, "look message by offset failed") {
			t.Fatalf("send-back of offset %d: %d %q, want SYSTEM_ERROR", off, r.Code, r.Remark)
		}
	}
	if n := dlq("CG"); n != 0 {
		t.Fatalf("%%DLQ%%CG holds %d messages after refused send-backs", n)
	}
	// T is: the subscription of a connected member counts on any
	// connection.
	e.must(back(c, tPhys, "CG"), codeSuccess)
	if n := dlq("CG"); n != 1 {
		t.Fatalf("%%DLQ%%CG holds %d messages, want 1", n)
	}
	// The group's own dead-letter topic is its own.
	dl := records(t, e.must(e.pull(member, "CG", "%DLQ%CG", 0, 0), codeSuccess).Body)[0]
	e.must(back(e.dial(), dl.PhysOffset, "CG"), codeSuccess)

	// A committed offset says the group consumes the topic.
	other := e.dial()
	if r := back(other, pPhys, "CP"); r.Code != codeNoPermission {
		t.Fatalf("send-back as CP before it consumed P: %d %q", r.Code, r.Remark)
	}
	e.must(e.call(other, reqUpdateConsumerOffset, map[string]string{"consumerGroup": "CP", "topic": "P", "queueId": "0", "commitOffset": "1"}, nil), codeSuccess)
	e.must(back(e.dial(), pPhys, "CP"), codeSuccess)

	// A pull counts on the connection it was made on.
	puller := e.dial()
	e.must(e.pull(puller, "CQ", "P", 0, 0), codeSuccess)
	if r := back(e.dial(), pPhys, "CQ"); r.Code != codeNoPermission {
		t.Fatalf("send-back as CQ on another connection: %d %q", r.Code, r.Remark)
	}
	e.must(back(puller, pPhys, "CQ"), codeSuccess)

	// A member that leaves takes its subscription along.
	member.Close()
	eventually(t, "CG's member gone", func() bool { return len(e.s.reg.consumerIDs("CG")) == 0 })
	if r := back(e.dial(), tPhys, "CG"); r.Code != codeNoPermission {
		t.Fatalf("send-back as CG with no member left: %d %q", r.Code, r.Remark)
	}
}
