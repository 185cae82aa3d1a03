package remoting

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/broker"
)

// Trap 6 and 7: the route is compact JSON with quoted numeric keys and no
// whitespace in brokerAddrs, perm 6, and brokerAddrs["0"] is THIS
// listener's reachable address (the address the client dialed, or the
// advertised host with the listener's port) — never another port.
func TestRouteAdvertisesThisListener(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 3, "")
	r := e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil), codeSuccess)
	body := string(r.Body)
	want := `"brokerAddrs":{"0":"` + e.s.Addr() + `"}`
	if !strings.Contains(body, want) || strings.ContainsAny(body, " \n") {
		t.Fatalf("route %s lacks %s or is not compact", body, want)
	}
	var rd topicRouteData
	if err := json.Unmarshal(r.Body, &rd); err != nil || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].Perm != 6 ||
		rd.QueueDatas[0].WriteQueueNums != 3 || rd.QueueDatas[0].BrokerName != rd.BrokerDatas[0].BrokerName || rd.FilterServerTable == nil {
		t.Fatalf("route %s (%v)", body, err)
	}

	adv := newEnv(t, func(c *Config, _ *broker.Config) { c.AdvertiseHost = "192.0.2.7" })
	ac := adv.dial()
	adv.createTopic(ac, "T", 1, "")
	_, port, _ := strings.Cut(adv.s.Addr(), ":")
	r = adv.must(adv.call(ac, reqGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `{"0":"192.0.2.7:`+port+`"}`) {
		t.Fatalf("advertised route %s", r.Body)
	}
	// The advertised IPv4 is also the store host inside offset ids.
	s := adv.must(adv.send(ac, "T", 0, "x", ""), codeSuccess)
	if !strings.HasPrefix(s.Ext["msgId"], "C0000207") {
		t.Fatalf("msgId %s does not carry the advertised host", s.Ext["msgId"])
	}
	// Cluster info names the same broker and address (trap 28).
	ci := adv.must(adv.call(ac, reqGetBrokerClusterInfo, nil, nil), codeSuccess)
	if !strings.Contains(string(ci.Body), `"clusterAddrTable":{"DefaultCluster":["broker-a"]}`) || !strings.Contains(string(ci.Body), "192.0.2.7:"+port) {
		t.Fatalf("cluster info %s", ci.Body)
	}
}

// Trap 8: %RETRY%<group> routes are served on demand (one queue), before
// any heartbeat; trap 10: unknown user topics have no route.
func TestRetryRouteOnDemandAndUnknownTopics(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	r := e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "%RETRY%CG"}, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `"writeQueueNums":1`) {
		t.Fatalf("retry route %s", r.Body)
	}
	if _, err := e.b.GetGroup(e.ctx, "CG"); err != nil {
		t.Fatalf("the group was not created with its retry topic: %v", err)
	}
	r = e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "Nope"}, nil), codeTopicNotExist)
	if !strings.Contains(r.Remark, "No topic route info in name server for the topic: Nope") {
		t.Fatalf("remark %q", r.Remark)
	}
	e.must(e.call(c, reqGetRouteInfoByTopic, nil, nil), codeInvalidParameter)
}

// Trap 9: TBW102 has a route only when a send would create the topic.
func TestAutoCreateTopicRoute(t *testing.T) {
	off := newEnv(t)
	oc := off.dial()
	off.must(off.call(oc, reqGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil), codeTopicNotExist)
	off.must(off.send(oc, "Fresh", -1, "x", ""), codeTopicNotExist)

	on := newEnv(t, func(_ *Config, b *broker.Config) { b.AutoCreate = true })
	c := on.dial()
	r := on.must(on.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `"perm":7`) {
		t.Fatalf("TBW102 route %s", r.Body)
	}
	s := on.must(on.send(c, "Fresh", 1, "x", ""), codeSuccess)
	if s.Ext["queueId"] != "1" {
		t.Fatalf("send %+v", s.Ext)
	}
}

func TestTopicListAndKVConfig(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "A", 1, "")
	e.createTopic(c, "B", 1, "")
	r := e.must(e.call(c, reqGetAllTopicListFromNS, nil, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `"topicList":["A","B"]`) {
		t.Fatalf("topic list %s", r.Body)
	}
	kv := map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "A", "value": "broker-a:1"}
	e.must(e.call(c, reqPutKVConfig, kv, nil), codeSuccess)
	if r := e.must(e.call(c, reqGetKVConfig, kv, nil), codeSuccess); r.Ext["value"] != "broker-a:1" {
		t.Fatalf("kv %+v", r.Ext)
	}
	e.must(e.call(c, reqDeleteKVConfig, kv, nil), codeSuccess)
	e.must(e.call(c, reqGetKVConfig, kv, nil), codeQueryNotFound)
	// 215 then 216 (Go admin DeleteTopic): the second is idempotent.
	e.must(e.call(c, reqDeleteTopicInBroker, map[string]string{"topic": "A"}, nil), codeSuccess)
	e.must(e.call(c, reqDeleteTopicInNamesrv, map[string]string{"topic": "A"}, nil), codeSuccess)
	e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "A"}, nil), codeTopicNotExist)
}

// In a replica group the route's broker is the member the client asked,
// readable and writable; every other member routes name is a broker of
// its own ("broker-a-<id>") at its own address, writable only, so that a
// producer's retries and next sends can go through another member when
// the one it asked dies, and consumers still see each queue once. The
// member asked is not listed twice.
func TestRouteNamesOtherMembersForProducers(t *testing.T) {
	var e *env
	e = newEnv(t, func(c *Config, _ *broker.Config) {
		c.Members = func(context.Context) []RouteMember {
			return []RouteMember{{ID: 2, Addr: "192.0.2.2:9876"}, {ID: 1, Addr: e.s.Addr()}, {ID: 3, Addr: "192.0.2.3:9876"}}
		}
	})
	c := e.dial()
	e.createTopic(c, "T", 3, "")
	r := e.must(e.call(c, reqGetRouteInfoByTopic, map[string]string{"topic": "T"}, nil), codeSuccess)
	var rd topicRouteData
	if err := json.Unmarshal(r.Body, &rd); err != nil {
		t.Fatal(err)
	}
	wantQ := []queueData{
		{BrokerName: "broker-a", ReadQueueNums: 3, WriteQueueNums: 3, Perm: permRead | permWrite},
		{BrokerName: "broker-a-2", WriteQueueNums: 3, Perm: permWrite},
		{BrokerName: "broker-a-3", WriteQueueNums: 3, Perm: permWrite},
	}
	wantB := []brokerData{
		{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: e.s.Addr()}},
		{Cluster: "DefaultCluster", BrokerName: "broker-a-2", BrokerAddrs: map[int64]string{0: "192.0.2.2:9876"}},
		{Cluster: "DefaultCluster", BrokerName: "broker-a-3", BrokerAddrs: map[int64]string{0: "192.0.2.3:9876"}},
	}
	if !reflect.DeepEqual(rd.QueueDatas, wantQ) || !reflect.DeepEqual(rd.BrokerDatas, wantB) {
		t.Fatalf("route %s\nwant queues %+v\nand brokers %+v", r.Body, wantQ, wantB)
	}
}
