package remoting

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/testutil"
)

// SEND_REPLY_MESSAGE (324) and its V2 (325) reach the requester named by
// REPLY_TO_CLIENT as PUSH_REPLY_MESSAGE_TO_CLIENT (326), with the reply's
// body and properties; the responder learns whether the requester took
// it. The reply topic has a route without being created.
func TestSendReplyPushesToRequester(t *testing.T) {
	e := newEnv(t)
	requester, responder := e.dial(), e.dial()
	pushed := make(chan *codec.Command, 4)
	var answer atomic.Int32 // what the requester answers a push
	answer.Store(codeSuccess)
	requester.Handle(reqPushReplyMessageToClient, func(cmd *codec.Command) {
		pushed <- cmd
		_ = requester.Write(&codec.Command{Code: answer.Load(), Remark: "not now", Opaque: cmd.Opaque, Flag: codec.FlagResponse})
	})
	e.must(e.call(requester, reqHeartBeat, nil, heartbeatBody("192.0.2.9@1", []string{"PG"}, nil)), codeSuccess)

	r := e.must(e.call(responder, reqGetRouteInfoByTopic, map[string]string{"topic": "DefaultCluster_REPLY_TOPIC"}, nil), codeSuccess)
	var route topicRouteData
	if err := json.Unmarshal(r.Body, &route); err != nil || len(route.QueueDatas) != 1 || route.QueueDatas[0].WriteQueueNums != 1 {
		t.Fatalf("reply topic route %s (%v)", r.Body, err)
	}

	props := "CORRELATION_ID\x01c-1\x02REPLY_TO_CLIENT\x01192.0.2.9@1\x02TTL\x013\x02MSG_TYPE\x01reply\x02"
	v1 := map[string]string{"producerGroup": "RG", "topic": "DefaultCluster_REPLY_TOPIC", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
		"properties": props, "reconsumeTimes": "0", "unitMode": "false"}
	r = e.must(e.call(responder, reqSendReplyMessage, v1, []byte("pong")), codeSuccess)
	if r.Ext["msgId"] == "" || r.Ext["queueId"] != "0" {
		t.Fatalf("reply answer %v", r.Ext)
	}
	cmd := <-pushed
	if cmd.Code != reqPushReplyMessageToClient || cmd.IsOneway() || string(cmd.Body) != "pong" ||
		cmd.Ext["topic"] != "DefaultCluster_REPLY_TOPIC" || cmd.Ext["bornTimestamp"] != "1700000000000" ||
		cmd.Ext["producerGroup"] != "RG" || cmd.Ext["bornHost"] == "" || cmd.Ext["storeTimestamp"] == "" {
		t.Fatalf("pushed %d %v %q", cmd.Code, cmd.Ext, cmd.Body)
	}
	if p := cmd.Ext["properties"]; !strings.HasPrefix(p, props) || !strings.Contains(p, "PUSH_REPLY_TIME\x01") {
		t.Fatalf("pushed properties %q", p)
	}

	// V2 header (one-letter names).
	v2 := map[string]string{"a": "RG", "b": "DefaultCluster_REPLY_TOPIC", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": "1", "h": "0", "i": props, "j": "0", "k": "false"}
	e.must(e.call(responder, reqSendReplyMessageV2, v2, []byte("pong2")), codeSuccess)
	if cmd := <-pushed; string(cmd.Body) != "pong2" || cmd.Ext["topic"] != "DefaultCluster_REPLY_TOPIC" {
		t.Fatalf("pushed %v %q", cmd.Ext, cmd.Body)
	}

	// The requester refuses it: the responder is told.
	answer.Store(codeSystemError)
	if r := e.call(responder, reqSendReplyMessage, v1, []byte("x")); r.Code != codeSystemError || !strings.Contains(r.Remark, "not now") {
		t.Fatalf("refused push: %d %s", r.Code, r.Remark)
	}
	<-pushed

	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range v1 {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, c := range []struct {
		ext  map[string]string
		code int32
		why  string
	}{
		{with("properties", strings.ReplaceAll(props, "192.0.2.9@1", "192.0.2.8@1")), codeSystemError, "not connected"},
		{with("properties", "REPLY_TO_CLIENT\x01192.0.2.9@1\x02"), codeMessageIllegal, "CORRELATION_ID"},
		{with("topic", "orders"), codeMessageIllegal, "DefaultCluster_REPLY_TOPIC"},
		{with("topic", ""), codeInvalidParameter, "topic"},
	} {
		if r := e.call(responder, reqSendReplyMessage, c.ext, nil); r.Code != c.code || !strings.Contains(r.Remark, c.why) {
			t.Errorf("%v: %d %q, want %d mentioning %q", c.ext, r.Code, r.Remark, c.code, c.why)
		}
	}

	// A requester known only from its request (the Go client may send its
	// first request before its first heartbeat) is reached on the
	// connection it sent the request on; once that closes, it is not.
	e.createTopic(responder, "Q", 1, "")
	early := e.dial()
	got := make(chan *codec.Command, 1)
	early.Handle(reqPushReplyMessageToClient, func(cmd *codec.Command) {
		got <- cmd
		_ = early.Write(&codec.Command{Code: codeSuccess, Opaque: cmd.Opaque, Flag: codec.FlagResponse})
	})
	e.must(e.send(early, "Q", 0, "ping", "CORRELATION_ID\x01c-9\x02REPLY_TO_CLIENT\x01192.0.2.6@1\x02TTL\x013\x02"), codeSuccess)
	earlyReply := with("properties", strings.ReplaceAll(props, "192.0.2.9@1", "192.0.2.6@1"))
	e.must(e.call(responder, reqSendReplyMessage, earlyReply, []byte("pong")), codeSuccess)
	if cmd := <-got; string(cmd.Body) != "pong" {
		t.Fatalf("pushed %q", cmd.Body)
	}
	_ = early.Close()
	<-early.Done()
	testutil.Eventually(t, "the server to forget the closed requester", func() bool { return e.s.reg.clientConn("192.0.2.6@1") == nil })
	if r := e.call(responder, reqSendReplyMessage, earlyReply, nil); r.Code != codeSystemError {
		t.Fatalf("reply to a closed requester: %d %s", r.Code, r.Remark)
	}

	// A requester that goes away while the push waits: told, not hung.
	gone := e.dial()
	gone.Handle(reqPushReplyMessageToClient, func(*codec.Command) { _ = gone.Close() })
	e.must(e.call(gone, reqHeartBeat, nil, heartbeatBody("192.0.2.7@1", []string{"PG"}, nil)), codeSuccess)
	if r := e.call(responder, reqSendReplyMessage, with("properties", strings.ReplaceAll(props, "192.0.2.9@1", "192.0.2.7@1")), nil); r.Code != codeSystemError {
		t.Fatalf("push to a closed requester: %d %s", r.Code, r.Remark)
	}
}
