package remoting

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// The admin views of mqadmin and the dashboard: topic offsets, a group's
// progress, its connected consumers and producers, and a consumer's own
// running info relayed from it.
func TestAdminStats(t *testing.T) {
	e := newEnv(t)
	admin, cons := e.dial(), e.dial()
	e.createTopic(admin, "T", 2, "")
	var m0 string // offset message id of m0
	for i, q := range []int{0, 0, 0, 1} {
		r := e.must(e.send(admin, "T", q, fmt.Sprint("m", i), ""), codeSuccess)
		if i == 0 {
			m0 = r.Ext["msgId"]
		}
	}
	at := e.clk.Now().UnixMilli()
	mq := func(q int) string {
		return fmt.Sprintf(`{"brokerName":"broker-a","queueId":%d,"topic":"T"}`, q)
	}

	r := e.must(e.call(admin, reqGetTopicStatsInfo, map[string]string{"topic": "T"}, nil), codeSuccess)
	want := fmt.Sprintf(`{"offsetTable":{%s:{"lastUpdateTimestamp":%d,"maxOffset":3,"minOffset":0},%s:{"lastUpdateTimestamp":%d,"maxOffset":1,"minOffset":0}}}`, mq(0), at, mq(1), at)
	if string(r.Body) != want {
		t.Fatalf("topic stats\n%s\nwant\n%s", r.Body, want)
	}
	e.must(e.call(admin, reqGetTopicStatsInfo, map[string]string{"topic": "NOPE"}, nil), codeTopicNotExist)
	e.must(e.call(admin, reqGetTopicStatsInfo, nil, nil), codeInvalidParameter)

	// A classic consumer of CG that committed 2 in queue 0 and nothing in 1.
	running := make(chan *codec.Command, 1)
	cons.Handle(reqGetConsumerRunningInfo, func(cmd *codec.Command) {
		running <- cmd
		_ = cons.Write(&codec.Command{Code: codeSuccess, Opaque: cmd.Opaque, Flag: codec.FlagResponse, Body: []byte(`{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}`)})
	})
	e.must(e.call(cons, reqHeartBeat, nil, heartbeatBody("192.0.2.2@1", []string{"PG"}, map[string][]string{"CG": {"T"}})), codeSuccess)
	e.must(e.call(cons, reqUpdateConsumerOffset, map[string]string{"consumerGroup": "CG", "topic": "T", "queueId": "0", "commitOffset": "2"}, nil), codeSuccess)
	wantStats := fmt.Sprintf(`{"consumeTps":0.0,"offsetTable":{%s:{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":%d,"pullOffset":2},%s:{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}`, mq(0), at, mq(1))
	for _, topic := range []string{"T", ""} {
		r = e.must(e.call(admin, reqGetConsumeStats, map[string]string{"consumerGroup": "CG", "topic": topic}, nil), codeSuccess)
		if string(r.Body) != wantStats {
			t.Fatalf("consume stats (topic %q)\n%s\nwant\n%s", topic, r.Body, wantStats)
		}
	}
	e.must(e.call(admin, reqGetConsumeStats, map[string]string{"consumerGroup": "NOPE"}, nil), codeSubscriptionGroupNotExist)

	r = e.must(e.call(admin, reqGetConsumerConnectionList, map[string]string{"consumerGroup": "CG"}, nil), codeSuccess)
	var cc struct {
		ConnectionSet []struct {
			ClientID, ClientAddr, Language string
			Version                        int32
		}
		ConsumeType, MessageModel, ConsumeFromWhere string
		SubscriptionTable                           map[string]struct {
			Topic, SubString, ExpressionType string
		}
	}
	if err := json.Unmarshal(r.Body, &cc); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != "192.0.2.2@1" || cc.ConnectionSet[0].ClientAddr == "" ||
		cc.ConsumeType != "CONSUME_PASSIVELY" || cc.MessageModel != "CLUSTERING" || cc.ConsumeFromWhere != "CONSUME_FROM_FIRST_OFFSET" ||
		cc.SubscriptionTable["T"].SubString != "*" || cc.SubscriptionTable["T"].Topic != "T" {
		t.Fatalf("consumer connections %s", r.Body)
	}
	e.must(e.call(admin, reqGetConsumerConnectionList, map[string]string{"consumerGroup": "NOPE"}, nil), codeConsumerNotOnline)

	r = e.must(e.call(admin, reqGetProducerConnectionList, map[string]string{"producerGroup": "PG"}, nil), codeSuccess)
	var pc struct{ ConnectionSet []struct{ ClientID string } }
	if err := json.Unmarshal(r.Body, &pc); err != nil || len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].ClientID != "192.0.2.2@1" {
		t.Fatalf("producer connections %s (%v)", r.Body, err)
	}
	e.must(e.call(admin, reqGetProducerConnectionList, map[string]string{"producerGroup": "NOPE"}, nil), codeSystemError)

	r = e.must(e.call(admin, reqGetConsumerRunningInfo, map[string]string{"consumerGroup": "CG", "clientId": "192.0.2.2@1", "jstackEnable": "false"}, nil), codeSuccess)
	if string(r.Body) != `{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}` {
		t.Fatalf("running info %s", r.Body)
	}
	if cmd := <-running; cmd.Ext["clientId"] != "192.0.2.2@1" || cmd.IsOneway() {
		t.Fatalf("forwarded %v", cmd.Ext)
	}
	e.must(e.call(admin, reqGetConsumerRunningInfo, map[string]string{"consumerGroup": "CG", "clientId": "192.0.2.3@1"}, nil), codeSystemError)

	// Consume directly: the consumer gets the message itself, encoded as
	// a pull would carry it, and its verdict is relayed.
	direct := make(chan *codec.Command, 1)
	cons.Handle(reqConsumeMessageDirectly, func(cmd *codec.Command) {
		direct <- cmd
		_ = cons.Write(&codec.Command{Code: codeSuccess, Opaque: cmd.Opaque, Flag: codec.FlagResponse, Body: []byte(`{"consumeResult":"CR_SUCCESS"}`)})
	})
	r = e.must(e.call(admin, reqConsumeMessageDirectly, map[string]string{"consumerGroup": "CG", "clientId": "192.0.2.2@1", "msgId": m0}, nil), codeSuccess)
	if string(r.Body) != `{"consumeResult":"CR_SUCCESS"}` {
		t.Fatalf("consume directly: %s", r.Body)
	}
	cmd := <-direct
	if rs := records(t, cmd.Body); len(rs) != 1 || string(rs[0].Body) != "m0" || rs[0].Topic != "T" || cmd.Ext["brokerName"] != "broker-a" {
		t.Fatalf("handed over %v: %+v", cmd.Ext, rs)
	}
	e.must(e.call(admin, reqConsumeMessageDirectly, map[string]string{"consumerGroup": "CG", "clientId": "192.0.2.2@1", "msgId": "nope"}, nil), codeInvalidParameter)

	// Who consumes T: CG (committed, and subscribed), and OG, known only
	// by the subscription of a connected member; which topics CG consumes.
	e.must(e.call(cons, reqHeartBeat, nil, heartbeatBody("192.0.2.4@1", nil, map[string][]string{"OG": {"T"}})), codeSuccess)
	if r := e.must(e.call(admin, reqQueryTopicConsumeByWho, map[string]string{"topic": "T"}, nil), codeSuccess); string(r.Body) != `{"groupList":["CG","OG"]}` {
		t.Fatalf("who consumes T: %s", r.Body)
	}
	e.must(e.call(admin, reqQueryTopicConsumeByWho, map[string]string{"topic": "NOPE"}, nil), codeTopicNotExist)
	var tl struct {
		TopicList  []string
		BrokerAddr string
	}
	r = e.must(e.call(admin, reqQueryTopicsByConsumer, map[string]string{"group": "CG"}, nil), codeSuccess)
	if err := json.Unmarshal(r.Body, &tl); err != nil || !slices.Contains(tl.TopicList, "T") || tl.BrokerAddr == "" {
		t.Fatalf("topics of CG: %s (%v)", r.Body, err)
	}
	e.must(e.call(admin, reqQueryTopicsByConsumer, map[string]string{"group": "NOPE"}, nil), codeSubscriptionGroupNotExist)
	r = e.must(e.call(admin, reqGetTopicsByCluster, map[string]string{"cluster": "DefaultCluster"}, nil), codeSuccess)
	if err := json.Unmarshal(r.Body, &tl); err != nil || !slices.Contains(tl.TopicList, "T") {
		t.Fatalf("topics of the cluster: %s (%v)", r.Body, err)
	}
	if r := e.must(e.call(admin, reqGetTopicsByCluster, map[string]string{"cluster": "Other"}, nil), codeSuccess); string(r.Body) != `{"topicList":[]}` {
		t.Fatalf("topics of another cluster: %s", r.Body)
	}
}
