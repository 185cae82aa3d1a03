package remoting

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

const testUsers = `
users:
  - accessKey: app
    secretKey: app-secret
    publish: ["orders*"]
    subscribe: ["orders*"]
    groups: ["g-*"]
  - accessKey: ops
    secretKey: ops-secret
    admin: true
`

func withAuth(t *testing.T) envOpt {
	us, err := auth.Parse([]byte(testUsers))
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(us)
	return func(c *Config, _ *broker.Config) { c.Auth = a }
}

// dialSigned dials a connection whose requests carry the ACL fields.
func (e *env) dialSigned(ak, sk string, ser byte) *client.Conn {
	e.t.Helper()
	c := e.dialAs(ser)
	c.SetCredentials(ak, sk)
	return c
}

// signExt is what rocketmq-client-go v2.1.2's ACLInterceptor sends,
// written out independently of client.SetCredentials.
func signExt(ext map[string]string, body []byte, ak, sk string) map[string]string {
	out := map[string]string{"AccessKey": ak}
	for k, v := range ext {
		out[k] = v
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	content := ""
	sort.Strings(keys)
	for _, k := range keys {
		content += out[k]
	}
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write([]byte(content))
	mac.Write(body)
	out["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return out
}

func sendExt(topic string) map[string]string {
	return map[string]string{"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": ""}
}

// stored counts a queue's messages once everything appended is in the
// queues.
func (e *env) stored(topic string, queue int32) int64 {
	e.t.Helper()
	e.settle()
	lo, hi := e.cl.QueueRange(topic, queue)
	return hi - lo
}

func mustRefuse(t *testing.T, resp *codec.Command, remark string) {
	t.Helper()
	if resp.Code != codeNoPermission || !strings.Contains(resp.Remark, remark) {
		t.Fatalf("answer %d %q, want NO_PERMISSION (16) mentioning %q", resp.Code, resp.Remark, remark)
	}
}

// With auth on, a request without AccessKey and Signature is answered
// NO_PERMISSION and not executed: Broker and NameServer codes alike, and
// codes mqgate does not serve.
func TestAuthUnsignedRequestsRefused(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	c := e.dial()
	mustRefuse(t, e.call(c, reqSendMessage, sendExt("orders"), []byte("x")), "authentication required")
	mustRefuse(t, e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil), "authentication required")
	mustRefuse(t, e.call(c, reqHeartBeat, nil, heartbeatBody("c1", nil, map[string][]string{"g-1": {"orders"}})), "authentication required")
	mustRefuse(t, e.call(c, reqUpdateAndCreateTopic, map[string]string{"topic": "made"}, nil), "authentication required")
	mustRefuse(t, e.call(c, 9999, nil, nil), "authentication required")
	// A oneway request gets no answer and is not executed either.
	if err := c.Oneway(&codec.Command{Code: reqSendMessage, Ext: sendExt("orders"), Body: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the oneway send refused", func() bool {
		n := 0
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "auth: call refused") && strings.Contains(l, `call="request code 10"`) {
				n++
			}
		}
		return n == 2
	})
	if n := e.stored("orders", 0); n != 0 {
		t.Fatalf("%d messages stored by unsigned sends", n)
	}
	if _, err := e.b.GetTopic(e.ctx, "made"); err == nil {
		t.Fatal("an unsigned CreateTopic created the topic")
	}
	if ids := e.s.reg.consumerIDs("g-1"); len(ids) != 0 {
		t.Fatalf("an unsigned heartbeat registered %v", ids)
	}
}

// A wrong secret, an unknown access key, a field changed after signing,
// a changed body and a garbled signature are all refused.
func TestAuthBadSignaturesRefused(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	e.createTopic(ops, "orders-b", 1, "")
	c := e.dial()
	body := []byte("payload")
	tampered := signExt(sendExt("orders"), body, "app", "app-secret")
	tampered["topic"] = "orders-b"
	garbled := signExt(sendExt("orders"), body, "app", "app-secret")
	garbled["Signature"] = "%%%"
	for name, tc := range map[string]struct {
		ext  map[string]string
		body []byte
	}{
		"wrong secret":        {signExt(sendExt("orders"), body, "app", "ops-secret"), body},
		"unknown access key":  {signExt(sendExt("orders"), body, "nobody", "app-secret"), body},
		"field changed":       {tampered, body},
		"body changed":        {signExt(sendExt("orders"), body, "app", "app-secret"), []byte("payloaD")},
		"signature not b64":   {garbled, body},
		"access key, no sig":  {map[string]string{"AccessKey": "app", "topic": "orders"}, body},
		"signature, no key":   {map[string]string{"Signature": "AAAA", "topic": "orders"}, body},
		"signed without body": {signExt(sendExt("orders"), nil, "app", "app-secret"), body},
	} {
		resp := e.call(c, reqSendMessage, tc.ext, tc.body)
		want := "wrong signature"
		if tc.ext["Signature"] == "" || tc.ext["AccessKey"] == "" {
			want = "carries no AccessKey and Signature"
		}
		if resp.Code != codeNoPermission || !strings.Contains(resp.Remark, want) {
			t.Errorf("%s: answer %d %q, want NO_PERMISSION mentioning %q", name, resp.Code, resp.Remark, want)
		}
	}
	if n, m := e.stored("orders", 0), e.stored("orders-b", 0); n+m != 0 {
		t.Fatalf("%d+%d messages stored by badly signed sends", n, m)
	}
}

// Good signatures over both header serializations: the signature covers
// the fields exactly as the client sent them.
func TestAuthGoodSignatureAccepted(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	for i, ser := range []byte{codec.JSON, codec.RocketMQ} {
		c := e.dialSigned("app", "app-secret", ser)
		e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil), codeSuccess)
		// Values JSON escapes, and an empty one, are signed as sent.
		e.must(e.send(c, "orders", 0, fmt.Sprint("body-", i), props("KEYS", "a<b>&\"c\"", "empty", "")), codeSuccess)
		p := e.must(e.pull(c, "g-app", "orders", 0, int64(i)), codeSuccess)
		if rs := records(t, p.Body); len(rs) != 1 || string(rs[0].Body) != fmt.Sprint("body-", i) {
			t.Fatalf("pulled %+v", rs)
		}
	}
	// The independent signer agrees with the client's.
	c := e.dial()
	e.must(e.call(c, reqGetMaxOffset, signExt(map[string]string{"topic": "orders", "queueId": "0"}, nil, "app", "app-secret"), nil), codeSuccess)
}

// The request's context carries the authenticated user.
func TestAuthUserInRequestContext(t *testing.T) {
	e := newEnv(t, withAuth(t))
	req := &codec.Command{Code: reqGetMaxOffset, Version: 317, Body: []byte("b")}
	req.Ext = signExt(map[string]string{"topic": "orders", "queueId": "0"}, req.Body, "app", "app-secret")
	ctx, refused := e.s.authenticate(context.Background(), &conn{}, req)
	if refused != nil {
		t.Fatalf("refused: %d %s", refused.Code, refused.Remark)
	}
	if u := auth.FromContext(ctx); u == nil || u.AccessKey != "app" {
		t.Fatalf("user in context: %+v", u)
	}
}

// Java clients up to 4.9.3 add _UNIQUE_KEY_QUERY after signing; upstream
// leaves it out of the content for them, and so does mqgate (only them).
func TestAuthUniqueKeyQueryQuirk(t *testing.T) {
	e := newEnv(t, withAuth(t))
	c := e.dial()
	for _, tc := range []struct {
		version int32
		code    int32
	}{{399, codeQueryNotFound}, {400, codeNoPermission}} {
		ext := signExt(map[string]string{"topic": "orders", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}, nil, "app", "app-secret")
		ext[uniqueKeyQuery] = "false"
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		resp, err := c.Invoke(ctx, &codec.Command{Code: reqQueryMessage, Version: tc.version, Ext: ext})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != tc.code {
			t.Errorf("version %d: answer %d %q, want %d", tc.version, resp.Code, resp.Remark, tc.code)
		}
	}
}

// Authorization: each request code's table row, as a user allowed
// orders* (publish, subscribe) and the groups g-*, and as an admin.
func TestAuthAuthorizationTable(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	e.createTopic(ops, "payments", 1, "")
	e.must(e.send(ops, "orders", 0, "o", ""), codeSuccess)
	e.must(e.send(ops, "payments", 0, "p", ""), codeSuccess)
	physOf := func(topic string) string {
		rs := records(t, e.must(e.pull(ops, "g-x", topic, 0, 0), codeSuccess).Body)
		return fmt.Sprint(rs[0].PhysOffset)
	}
	ordersPhys, paymentsPhys := physOf("orders"), physOf("payments")
	app := e.dialSigned("app", "app-secret", codec.JSON)

	v2 := func(topic string, extra ...string) map[string]string {
		m := map[string]string{"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "i": ""}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	offsetExt := func(topic, group string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "0"}
	}
	popExt := func(topic, group string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
			"pollTime": "0", "offset": "0", "extraInfo": "0 1 2 0 0 broker-a 0 0"}
	}
	lockBody := func(group, topic string) []byte {
		return []byte(fmt.Sprintf(`{"consumerGroup":%q,"clientId":"c1","mqSet":[{"topic":%q,"brokerName":"broker-a","queueId":0}]}`, group, topic))
	}
	batchAck := func(group, topic string) []byte {
		return []byte(fmt.Sprintf(`{"acks":[{"consumerGroup":%q,"topic":%q,"startOffset":0,"queueId":0,"popTime":1,"bitSet":"AQ=="}]}`, group, topic))
	}
	cases := []struct {
		name    string
		code    int32
		ext     map[string]string
		body    []byte
		allowed bool // for app; ops may do everything
	}{
		{"route orders", reqGetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil, true},
		{"route payments", reqGetRouteInfoByTopic, map[string]string{"topic": "payments"}, nil, false},
		{"route TBW102", reqGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil, true},
		{"route reply topic", reqGetRouteInfoByTopic, map[string]string{"topic": "DefaultCluster_REPLY_TOPIC"}, nil, true},
		{"send reply", reqSendReplyMessage, map[string]string{"topic": "DefaultCluster_REPLY_TOPIC"}, nil, true},
		{"send reply v2", reqSendReplyMessageV2, map[string]string{"b": "DefaultCluster_REPLY_TOPIC"}, nil, true},
		{"route own retry topic", reqGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%g-1"}, nil, true},
		{"route other retry topic", reqGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%billing"}, nil, false},
		{"send orders", reqSendMessage, sendExt("orders"), []byte("x"), true},
		{"send payments", reqSendMessage, sendExt("payments"), []byte("x"), false},
		{"send v2 orders", reqSendMessageV2, v2("orders"), []byte("x"), true},
		{"send v2 payments", reqSendMessageV2, v2("payments"), []byte("x"), false},
		{"send v2: the short name wins", reqSendMessageV2, v2("payments", "topic", "orders"), []byte("x"), false},
		{"send batch payments", reqSendBatchMessage, v2("payments"), nil, false},
		{"send to own retry topic", reqSendMessage, sendExt("%RETRY%g-1"), []byte("x"), true},
		{"send to other retry topic", reqSendMessage, sendExt("%RETRY%billing"), []byte("x"), false},
		{"end transaction payments", reqEndTransaction, map[string]string{"topic": "payments", "commitLogOffset": "0", "commitOrRollback": "8", "transactionId": "t"}, nil, false},
		{"end transaction orders", reqEndTransaction, map[string]string{"topic": "orders", "commitLogOffset": "0", "commitOrRollback": "8", "transactionId": "t"}, nil, true},
		{"pull orders as g-1", reqPullMessage, pullExt("g-1", "orders", 0, 0, 0, 0), nil, true},
		{"pull orders as billing", reqPullMessage, pullExt("billing", "orders", 0, 0, 0, 0), nil, false},
		{"pull payments as g-1", reqPullMessage, pullExt("g-1", "payments", 0, 0, 0, 0), nil, false},
		{"lite pull payments", reqLitePullMessage, pullExt("g-1", "payments", 0, 0, 0, 0), nil, false},
		{"query offset billing", reqQueryConsumerOffset, offsetExt("orders", "billing"), nil, false},
		{"update offset payments", reqUpdateConsumerOffset, offsetExt("payments", "g-1"), nil, false},
		{"update offset orders", reqUpdateConsumerOffset, offsetExt("orders", "g-1"), nil, true},
		{"max offset payments", reqGetMaxOffset, map[string]string{"topic": "payments", "queueId": "0"}, nil, false},
		{"min offset payments", reqGetMinOffset, map[string]string{"topic": "payments", "queueId": "0"}, nil, false},
		{"search offset payments", reqSearchOffsetByTimestamp, map[string]string{"topic": "payments", "queueId": "0", "timestamp": "0"}, nil, false},
		{"earliest time payments", reqGetEarliestMsgStoreTime, map[string]string{"topic": "payments", "queueId": "0"}, nil, false},
		{"earliest time orders", reqGetEarliestMsgStoreTime, map[string]string{"topic": "orders", "queueId": "0"}, nil, true},
		{"send back as billing", reqConsumerSendMsgBack, map[string]string{"offset": ordersPhys, "group": "billing", "delayLevel": "0"}, nil, false},
		{"send back as g-1", reqConsumerSendMsgBack, map[string]string{"offset": ordersPhys, "group": "g-1", "delayLevel": "0"}, nil, true},
		{"send back a payments message as g-1", reqConsumerSendMsgBack, map[string]string{"offset": paymentsPhys, "group": "g-1", "delayLevel": "0"}, nil, false},
		{"heartbeat g-1 on orders", reqHeartBeat, nil, heartbeatBody("c1", []string{"any-producer-group"}, map[string][]string{"g-1": {"orders", "%RETRY%g-1"}}), true},
		{"heartbeat billing", reqHeartBeat, nil, heartbeatBody("c2", nil, map[string][]string{"billing": {"orders"}}), false},
		{"heartbeat g-2 on payments", reqHeartBeat, nil, heartbeatBody("c3", nil, map[string][]string{"g-2": {"payments"}}), false},
		{"unregister billing", reqUnregisterClient, map[string]string{"clientID": "c2", "consumerGroup": "billing"}, nil, false},
		{"consumer list billing", reqGetConsumerListByGroup, map[string]string{"consumerGroup": "billing"}, nil, false},
		{"consumer list g-1", reqGetConsumerListByGroup, map[string]string{"consumerGroup": "g-1"}, nil, true},
		{"check client config", reqCheckClientConfig, nil, []byte(`{}`), true},
		{"lock billing", reqLockBatchMQ, nil, lockBody("billing", "orders"), false},
		{"lock g-1 payments", reqLockBatchMQ, nil, lockBody("g-1", "payments"), false},
		{"lock g-1 orders", reqLockBatchMQ, nil, lockBody("g-1", "orders"), true},
		{"unlock billing", reqUnlockBatchMQ, nil, lockBody("billing", "orders"), false},
		{"query message payments", reqQueryMessage, map[string]string{"topic": "payments", "key": "k"}, nil, false},
		{"view a payments message", reqViewMessageByID, map[string]string{"offset": paymentsPhys}, nil, false},
		{"view an orders message", reqViewMessageByID, map[string]string{"offset": ordersPhys}, nil, true},
		{"pop payments", reqPopMessage, popExt("payments", "g-1"), nil, false},
		{"pop as billing", reqPopMessage, popExt("orders", "billing"), nil, false},
		{"ack payments", reqAckMessage, popExt("payments", "g-1"), nil, false},
		{"change invisible payments", reqChangeInvisibleTime, popExt("payments", "g-1"), nil, false},
		{"batch ack payments", reqBatchAckMessage, nil, batchAck("g-1", "payments"), false},
		{"batch ack orders", reqBatchAckMessage, nil, batchAck("g-1", "orders"), true},
		// Admin codes.
		{"create topic", reqUpdateAndCreateTopic, map[string]string{"topic": "orders-new"}, nil, false},
		{"all topic config", reqGetAllTopicConfig, nil, nil, false},
		{"delete topic (broker)", reqDeleteTopicInBroker, map[string]string{"topic": "orders-gone"}, nil, false},
		{"delete topic (namesrv)", reqDeleteTopicInNamesrv, map[string]string{"topic": "orders-gone"}, nil, false},
		{"create group", reqUpdateAndCreateSubGroup, nil, []byte(`{"groupName":"g-new"}`), false},
		{"all group config", reqGetAllSubGroupConfig, nil, nil, false},
		{"delete group", reqDeleteSubGroup, map[string]string{"groupName": "g-gone"}, nil, false},
		{"topic stats", reqGetTopicStatsInfo, map[string]string{"topic": "orders"}, nil, false},
		{"consume stats", reqGetConsumeStats, map[string]string{"consumerGroup": "g-1", "topic": "orders"}, nil, false},
		{"consumer connections", reqGetConsumerConnectionList, map[string]string{"consumerGroup": "g-1"}, nil, false},
		{"producer connections", reqGetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil, false},
		{"topics by cluster", reqGetTopicsByCluster, map[string]string{"cluster": "DefaultCluster"}, nil, false},
		{"who consumes", reqQueryTopicConsumeByWho, map[string]string{"topic": "orders"}, nil, false},
		{"topics of a group", reqQueryTopicsByConsumer, map[string]string{"group": "g-1"}, nil, false},
		{"runtime info", reqGetBrokerRuntimeInfo, nil, nil, false},
		{"consume directly", reqConsumeMessageDirectly, map[string]string{"consumerGroup": "g-1", "clientId": "x", "msgId": "7F0000010000000000000000000000AA"}, nil, false},
		{"consumer running info", reqGetConsumerRunningInfo, map[string]string{"consumerGroup": "g-1", "clientId": "x"}, nil, false},
		{"reset group offset", reqInvokeBrokerToResetOffset, map[string]string{"topic": "orders", "group": "g-1", "timestamp": "0", "isForce": "true"}, nil, false},
		{"topic list", reqGetAllTopicListFromNS, nil, nil, false},
		{"cluster info", reqGetBrokerClusterInfo, nil, nil, false},
		{"put kv", reqPutKVConfig, map[string]string{"namespace": "n", "key": "k", "value": "v"}, nil, false},
		{"get kv", reqGetKVConfig, map[string]string{"namespace": "n", "key": "k"}, nil, false},
		{"delete kv", reqDeleteKVConfig, map[string]string{"namespace": "n", "key": "k"}, nil, false},
	}
	run := func(as string, c *client.Conn, admin bool) {
		for _, tc := range cases {
			resp := e.call(c, tc.code, tc.ext, tc.body)
			refused := resp.Code == codeNoPermission && strings.Contains(resp.Remark, "access key")
			if want := tc.allowed || admin; refused == want {
				t.Errorf("%s as %s: answer %d %q, want allowed %v", tc.name, as, resp.Code, resp.Remark, want)
			}
		}
	}
	run("app", app, false)
	// Refused requests changed nothing.
	if n := e.stored("payments", 0); n != 1 {
		t.Errorf("payments holds %d messages, want the one ops sent", n)
	}
	if ids := e.s.reg.consumerIDs("billing"); len(ids) != 0 {
		t.Errorf("a refused heartbeat registered %v", ids)
	}
	if _, err := e.b.GetTopic(e.ctx, "orders-new"); err == nil {
		t.Error("a non-admin created a topic")
	}
	run("ops", ops, true)
	served := map[int32]bool{}
	for _, tc := range cases {
		served[tc.code] = true
	}
	for code := range e.s.handlers {
		if !served[code] {
			t.Errorf("request code %d has no case here", code)
		}
	}
}

// Every code the listener serves has an access rule (a missing one would
// make the code admin-only).
func TestEveryServedCodeHasAnAccessRule(t *testing.T) {
	s := &Server{}
	for code := range s.routes() {
		if _, ok := accessRules[code]; !ok {
			t.Errorf("request code %d is served but has no access rule", code)
		}
	}
	for code := range accessRules {
		if _, ok := s.routes()[code]; !ok {
			t.Errorf("access rule for code %d, which is not served", code)
		}
	}
}

// Auth off: unsigned requests are served as before, and signed ones too
// (the ACL fields are ignored).
func TestAuthOffUnchanged(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "payments", 1, "")
	e.must(e.send(c, "payments", 0, "a", ""), codeSuccess)
	signed := e.dialSigned("nobody", "wrong", codec.RocketMQ)
	e.must(e.send(signed, "payments", 0, "b", ""), codeSuccess)
	e.must(e.call(signed, reqGetAllTopicListFromNS, nil, nil), codeSuccess)
	if n := e.stored("payments", 0); n != 2 {
		t.Fatalf("%d messages stored", n)
	}
}

// END_TRANSACTION from classic clients names the half message only by its
// commit-log offset: the permission is checked on the half message's real
// topic, so a user cannot end a transaction on a topic it may not publish
// to by leaving the topic out.
func TestAuthEndTransactionChecksTheHalfMessagesTopic(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	e.createTopic(ops, "payments", 1, "")
	app := e.dialSigned("app", "app-secret", codec.JSON)
	half := func(topic string) string {
		r := e.must(e.send(ops, topic, 0, "half", props("TRAN_MSG", "true", "PGROUP", "TPG", "UNIQ_KEY", "U-"+topic)), codeSuccess)
		_, phys, err := wire.ParseOffsetMsgID(r.Ext["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(phys)
	}
	end := func(c *client.Conn, phys, topic string) *codec.Command {
		ext := map[string]string{"producerGroup": "TPG", "tranStateTableOffset": "0", "commitLogOffset": phys, "commitOrRollback": fmt.Sprint(txCommit)}
		return e.call(c, reqEndTransaction, ext, nil)
	}
	payments, orders := half("payments"), half("orders")
	if r := end(app, payments, ""); r.Code != codeNoPermission || !strings.Contains(r.Remark, `"payments"`) {
		t.Fatalf("ending a payments transaction as app: %d %q, want NO_PERMISSION naming payments", r.Code, r.Remark)
	}
	if r := end(app, orders, ""); r.Code == codeNoPermission {
		t.Fatalf("ending an orders transaction as app: refused: %q", r.Remark)
	}
	e.must(end(ops, payments, ""), codeSuccess)
}

// CONSUMER_SEND_MSG_BACK names a message by its commit-log offset and
// copies it into the group's retry or dead-letter topic, which the
// caller then reads: it is refused unless the caller may consume the
// message's own topic. The refusal is the same for a message of another
// topic, an offset inside a message and one past the log, and names no
// topic, so walking offsets maps nothing; nothing is copied.
func TestAuthSendBackReadsOnlyWhatTheCallerMayConsume(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	e.createTopic(ops, "payments", 1, "")
	physOf := func(r *codec.Command) int64 {
		_, phys, err := wire.ParseOffsetMsgID(r.Ext["msgId"])
		if err != nil {
			t.Fatal(err)
		}
		return phys
	}
	orders := physOf(e.must(e.send(ops, "orders", 0, "o", ""), codeSuccess))
	payments := physOf(e.must(e.send(ops, "payments", 0, "secret", ""), codeSuccess))
	app := e.dialSigned("app", "app-secret", codec.JSON)
	// g-1 consumes orders, and (as a group may) the payments topic is
	// what an attacker names.
	e.must(e.call(app, reqHeartBeat, nil, heartbeatBody("c1", nil, map[string][]string{"g-1": {"orders", "%RETRY%g-1"}})), codeSuccess)
	back := func(c *client.Conn, phys int64) *codec.Command {
		return e.call(c, reqConsumerSendMsgBack, map[string]string{"offset": fmt.Sprint(phys), "group": "g-1", "delayLevel": "-1", "maxReconsumeTimes": "16"}, nil)
	}
	var remarks []string
	for _, off := range []int64{payments, payments + 1, orders + 3, payments + 1<<20} {
		r := back(app, off)
		mustRefuse(t, r, "may not read commit-log offset")
		if strings.Contains(r.Remark, "payments") {
			t.Fatalf("the refusal names the record's topic: %q", r.Remark)
		}
		remarks = append(remarks, strings.ReplaceAll(r.Remark, fmt.Sprint(off), "N"))
	}
	for _, r := range remarks[1:] {
		if r != remarks[0] {
			t.Fatalf("refusals differ by what the offset holds: %q", remarks)
		}
	}
	if n := e.stored("%DLQ%g-1", 0); n != 0 {
		t.Fatalf("%%DLQ%%g-1 holds %d messages after refused send-backs", n)
	}
	// Its own topic's message goes back, and app reads the copy.
	e.must(back(app, orders), codeSuccess)
	rs := records(t, e.must(e.pull(app, "g-1", "%DLQ%g-1", 0, 0), codeSuccess).Body)
	if len(rs) != 1 || string(rs[0].Body) != "o" {
		t.Fatalf("dead letters of g-1: %+v", rs)
	}
	// An admin may send back any message of a topic the group consumes.
	e.must(e.call(ops, reqUpdateConsumerOffset, map[string]string{"consumerGroup": "g-1", "topic": "payments", "queueId": "0", "commitOffset": "0"}, nil), codeSuccess)
	e.must(back(ops, payments), codeSuccess)
}

// A transaction check carries the half message. Any signed user may name
// any producer group in a heartbeat, so with auth on a check goes only to
// a connection whose registration was signed by a user who may publish
// to the message's topic: app, who may consume orders only, does not
// receive payments' half message by claiming its producer group, and the
// payments producer is asked.
func TestAuthCheckBackOnlyToPublishersOfTheTopic(t *testing.T) {
	e := newEnv(t, withAuth(t))
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "payments", 1, "")
	e.createTopic(ops, "orders", 1, "")
	app := e.dialSigned("app", "app-secret", codec.JSON)
	leaked := make(chan *codec.Command, 4)
	app.Handle(reqCheckTransactionState, func(cmd *codec.Command) { leaked <- cmd })
	checks := make(chan *codec.Command, 4)
	ops.Handle(reqCheckTransactionState, func(cmd *codec.Command) { checks <- cmd })

	// ops sends a half message of payments in TPG; app then claims TPG,
	// so it is TPG's most recently seen member.
	e.must(e.call(ops, reqHeartBeat, nil, heartbeatBody("ops@1", []string{"TPG"}, nil)), codeSuccess)
	e.must(e.send(ops, "payments", 0, "secret", props("TRAN_MSG", "true", "PGROUP", "TPG", "UNIQ_KEY", "U-pay")), codeSuccess)
	e.clk.Advance(time.Second)
	e.must(e.call(app, reqHeartBeat, nil, heartbeatBody("app@1", []string{"TPG"}, nil)), codeSuccess)
	e.clk.Advance(6 * time.Second)
	select {
	case chk := <-checks:
		if chk.Ext["topic"] != "payments" {
			t.Fatalf("check %+v", chk.Ext)
		}
	case chk := <-leaked:
		t.Fatalf("app received the check of a payments half message: %+v %q", chk.Ext, chk.Body)
	case <-time.After(10 * time.Second):
		t.Fatal("no CHECK_TRANSACTION_STATE")
	}
	// app's own transactions on orders are still checked with app.
	e.must(e.send(app, "orders", 0, "mine", props("TRAN_MSG", "true", "PGROUP", "TPG", "UNIQ_KEY", "U-ord")), codeSuccess)
	e.clk.Advance(7 * time.Second)
	for {
		select {
		case chk := <-leaked:
			if chk.Ext["topic"] != "orders" {
				t.Fatalf("app received a check of %s: %+v", chk.Ext["topic"], chk.Ext)
			}
			return
		case <-checks: // payments asked again
		case <-time.After(10 * time.Second):
			t.Fatal("app was not asked about its own transaction")
		}
	}
}

// Config.SendWindow bounds the replay of a captured signed send: the
// signature covers the send's bornTimestamp, which must be within the
// window of the server's clock. Other requests carry no signed time and
// are not bounded; without a window (upstream's behaviour) a send signed
// long ago is accepted.
func TestAuthSendWindowBoundsReplays(t *testing.T) {
	window := func(c *Config, _ *broker.Config) { c.SendWindow = 5 * time.Minute }
	e := newEnv(t, withAuth(t), window)
	ops := e.dialSigned("ops", "ops-secret", codec.JSON)
	e.createTopic(ops, "orders", 1, "")
	c := e.dial()
	now := e.clk.Now().UnixMilli()
	// The header of SEND_MESSAGE, and of SEND_MESSAGE_V2 in its short
	// names (bornTimestamp is "g").
	header := func(code int32, born int64) map[string]string {
		if code == reqSendMessageV2 {
			return map[string]string{"a": "PG", "b": "orders", "e": "0", "f": "0", "g": fmt.Sprint(born), "h": "0", "i": ""}
		}
		ext := sendExt("orders")
		ext["bornTimestamp"] = fmt.Sprint(born)
		return ext
	}
	send := func(ext map[string]string, body string) *codec.Command {
		code := int32(reqSendMessage)
		if _, v2 := ext["b"]; v2 {
			code = reqSendMessageV2
		}
		return e.call(c, code, signExt(ext, []byte(body), "app", "app-secret"), []byte(body))
	}
	for _, code := range []int32{reqSendMessage, reqSendMessageV2} {
		e.must(send(header(code, now), "x"), codeSuccess)
		e.must(send(header(code, now-4*60_000), "x"), codeSuccess) // a client clock 4 min behind
		mustRefuse(t, send(header(code, now-6*60_000), "x"), "remoting-send-window")
		mustRefuse(t, send(header(code, now+6*60_000), "x"), "remoting-send-window")
	}
	// A captured send replays within the window, not after it.
	captured := signExt(header(reqSendMessage, now), []byte("captured"), "app", "app-secret")
	e.must(e.call(c, reqSendMessage, captured, []byte("captured")), codeSuccess)
	e.clk.Advance(6 * time.Minute)
	mustRefuse(t, e.call(c, reqSendMessage, captured, []byte("captured")), "remoting-send-window")
	// A send without a timestamp cannot be bounded: refused.
	noBorn := sendExt("orders")
	delete(noBorn, "bornTimestamp")
	mustRefuse(t, send(noBorn, "x"), "must carry its bornTimestamp")
	// Other codes are not bounded.
	e.must(e.call(c, reqGetMaxOffset, signExt(map[string]string{"topic": "orders", "queueId": "0"}, nil, "app", "app-secret"), nil), codeSuccess)
	if n := e.stored("orders", 0); n != 5 {
		t.Fatalf("orders holds %d messages, want the 5 accepted sends", n)
	}

	// Without a window a send signed an hour ago is accepted.
	e2 := newEnv(t, withAuth(t))
	e2.createTopic(e2.dialSigned("ops", "ops-secret", codec.JSON), "orders", 1, "")
	old := sendExt("orders")
	old["bornTimestamp"] = fmt.Sprint(e2.clk.Now().Add(-time.Hour).UnixMilli())
	e2.must(e2.call(e2.dial(), reqSendMessage, signExt(old, []byte("x"), "app", "app-secret"), []byte("x")), codeSuccess)
}
