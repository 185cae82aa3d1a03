package remoting

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

var offsetID = regexp.MustCompile(`^[0-9A-F]{32}$`)

// Trap 25: the send answer carries a 32-hex offset msgId, queueId,
// queueOffset, transactionId, MSG_REGION and TRACE_ON; trap 21: pulled
// records have the V1 layout with their real offsets, and the offset id
// names the record's commit-log position (VIEW_MESSAGE_BY_ID finds it).
func TestSendAnswerAndRecordLayout(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 2, "")
	r := e.must(e.send(c, "T", 1, "hello", props("TAGS", "tagA", "KEYS", "k1 k2", "UNIQ_KEY", "C00002023F18000000009696c0300001", "WAIT", "true", "custom", "v")), codeSuccess)
	for _, k := range []string{"msgId", "queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON"} {
		if r.Ext[k] == "" {
			t.Fatalf("send answer lacks %s: %+v", k, r.Ext)
		}
	}
	if !offsetID.MatchString(r.Ext["msgId"]) || r.Ext["queueId"] != "1" || r.Ext["queueOffset"] != "0" || r.Ext["transactionId"] != "C00002023F18000000009696c0300001" {
		t.Fatalf("send answer %+v", r.Ext)
	}
	p := e.must(e.pull(c, "CG", "T", 1, 0), codeSuccess)
	rs := records(t, p.Body)
	if len(rs) != 1 {
		t.Fatalf("%d records", len(rs))
	}
	rec := rs[0]
	pp := propsOf(rec)
	if rec.Topic != "T" || rec.QueueID != 1 || string(rec.Body) != "hello" || pp["TAGS"] != "tagA" || pp["KEYS"] != "k1 k2" ||
		pp["UNIQ_KEY"] != "C00002023F18000000009696c0300001" || pp["custom"] != "v" || pp["CLUSTER"] != "DefaultCluster" {
		t.Fatalf("record %+v props %q", rec, pp)
	}
	for k := range pp {
		if strings.HasPrefix(k, "__MQG") {
			t.Fatalf("internal property %s on the wire", k)
		}
	}
	if got := wire.OffsetMsgID(rec.StoreHost, rec.PhysOffset); got != r.Ext["msgId"] {
		t.Fatalf("offset id of the record %s, send said %s", got, r.Ext["msgId"])
	}
	v := e.must(e.call(c, reqViewMessageByID, map[string]string{"offset": fmt.Sprint(rec.PhysOffset)}, nil), codeSuccess)
	if vr := records(t, v.Body); len(vr) != 1 || string(vr[0].Body) != "hello" {
		t.Fatalf("view %+v", vr)
	}
	e.must(e.call(c, reqViewMessageByID, map[string]string{"offset": fmt.Sprint(rec.PhysOffset + 1)}, nil), codeQueryNotFound)
}

// Trap 22: a zlib body (sysFlag 1) is stored inflated and delivered plain
// with the compressed bit clear; LZ4/ZSTD and corrupt data are refused.
func TestCompressedBodies(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	plain := bytes.Repeat([]byte("compressible "), 400)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(plain)
	w.Close()
	send := func(sysFlag int, body []byte) *codec.Command {
		return e.call(c, reqSendMessage, map[string]string{"producerGroup": "PG", "topic": "T", "queueId": "0", "sysFlag": fmt.Sprint(sysFlag),
			"bornTimestamp": "1", "flag": "0", "properties": ""}, body)
	}
	e.must(send(1, z.Bytes()), codeSuccess)
	e.must(send(1|2<<8, z.Bytes()), codeMessageIllegal)
	e.must(send(1, []byte("not zlib")), codeMessageIllegal)
	rs := records(t, e.must(e.pull(c, "CG", "T", 0, 0), codeSuccess).Body)
	if len(rs) != 1 || !bytes.Equal(rs[0].Body, plain) || rs[0].SysFlag&wire.SysCompressed != 0 {
		t.Fatalf("record sysflag %d body %d bytes", rs[0].SysFlag, len(rs[0].Body))
	}
}

// Trap 24: batch messages without UNIQ_KEY get minted ids (distinct, the
// 32-character form), stored so both protocols see one id; a batch to a
// retry topic is refused.
func TestBatchSendMintsIDs(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	body, _ := wire.AppendBatch(nil, []wire.BatchMessage{{Body: []byte("b1")}, {Body: []byte("b2"), Properties: props("TAGS", "x")}})
	r := e.must(e.call(c, reqSendBatchMessage, map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": "1", "h": "0", "i": "", "m": "true"}, body), codeSuccess)
	if ids := strings.Split(r.Ext["msgId"], ","); len(ids) != 2 || !offsetID.MatchString(ids[0]) || ids[0] == ids[1] {
		t.Fatalf("batch msgId %q", r.Ext["msgId"])
	}
	rs := records(t, e.must(e.pull(c, "CG", "T", 0, 0), codeSuccess).Body)
	a, b := propsOf(rs[0])["UNIQ_KEY"], propsOf(rs[1])["UNIQ_KEY"]
	if !offsetID.MatchString(a) || a == b || propsOf(rs[1])["TAGS"] != "x" {
		t.Fatalf("minted ids %q %q", a, b)
	}
	if d, err := e.b.Pull(e.ctx, "CG", "T", 0, 0, 10, model.Filter{}, 0); err != nil || d.Messages[0].ID != a {
		t.Fatalf("gRPC's view of the id: %v %v", d.Messages, err)
	}
	e.must(e.call(c, reqSendBatchMessage, map[string]string{"b": "%RETRY%CG", "e": "0"}, body), codeMessageIllegal)
	e.must(e.call(c, reqSendBatchMessage, map[string]string{"b": "T", "e": "0"}, body[:len(body)-1]), codeMessageIllegal)
}

// Trap 26: Go's SHARDING_KEY is an ordinary property — its "FIFO" is the
// queue it chose; trap 23: property strings stay under 32 KiB.
func TestShardingKeyAndPropertyLimits(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 4, "")
	r := e.must(e.send(c, "T", 2, "x", props("SHARDING_KEY", "order-1")), codeSuccess)
	if r.Ext["queueId"] != "2" {
		t.Fatalf("queue %s", r.Ext["queueId"])
	}
	rs := records(t, e.must(e.pull(c, "CG", "T", 2, 0), codeSuccess).Body)
	if propsOf(rs[0])["SHARDING_KEY"] != "order-1" {
		t.Fatalf("%q", rs[0].Properties)
	}
	e.must(e.send(c, "T", 0, "x", props("big", strings.Repeat("v", 33000))), codeMessageIllegal)
	e.must(e.send(c, "T", 9, "x", ""), codeInvalidParameter)
	e.must(e.send(c, "TBW102", 0, "x", ""), codeNoPermission)
	e.must(e.send(c, "T", 0, "", ""), codeMessageIllegal)
}

// Delay levels and timer properties: held, then delivered to the queue
// the producer chose, DELAY removed.
func TestDelayedSends(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 2, "")
	e.must(e.send(c, "T", 1, "lvl2", props("DELAY", "2")), codeSuccess)
	e.must(e.send(c, "T", 1, "ms", props("TIMER_DELAY_MS", "3000")), codeSuccess)
	e.must(e.pull(c, "CG", "T", 1, 0), codePullNotFound)
	e.clk.Advance(5 * time.Second)
	eventually(t, "the delayed messages", func() bool { _, hi := e.cl.QueueRange("T", 1); return hi == 2 })
	rs := records(t, e.must(e.pull(c, "CG", "T", 1, 0), codeSuccess).Body)
	if string(rs[0].Body) != "ms" || string(rs[1].Body) != "lvl2" || propsOf(rs[1])["DELAY"] != "" {
		t.Fatalf("delivered %q %q props %q", rs[0].Body, rs[1].Body, rs[1].Properties)
	}
	e.must(e.send(c, "T", 0, "far", props("TIMER_DELIVER_MS", fmt.Sprint(e.clk.Now().Add(48*time.Hour).UnixMilli()))), codeMessageIllegal)
}
