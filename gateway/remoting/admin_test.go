package remoting

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/broker/model"
)

// Traps 27 and 29: attributes +message.type=FIFO creates a FIFO topic for
// gRPC clients, "-key" deletes, duplicates and unknown keys are refused
// with INVALID_PARAMETER and logged (Go admin ignores the answer);
// re-creating with the same config is idempotent, more queues update.
func TestTopicAdmin(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "F", 4, "+message.type=FIFO")
	if tp, err := e.b.GetTopic(e.ctx, "F"); err != nil || tp.Type != model.TopicFIFO || tp.Queues != 4 {
		t.Fatalf("%+v %v", tp, err)
	}
	e.createTopic(c, "F", 4, "")
	e.createTopic(c, "F", 6, "-message.type")
	if tp, _ := e.b.GetTopic(e.ctx, "F"); tp.Type != model.TopicNormal || tp.Queues != 6 {
		t.Fatalf("after update %+v", tp)
	}
	for _, bad := range []string{"+message.type=FIFO,+message.type=NORMAL", "+nope=1", "message.type=FIFO", "+message.type=WHAT", "-message.type"} {
		name := "B" + string(rune('a'+len(bad)%26))
		r := e.call(c, reqUpdateAndCreateTopic, map[string]string{"topic": name, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "attributes": bad}, nil)
		if r.Code != codeInvalidParameter {
			t.Fatalf("attributes %q: %d %s", bad, r.Code, r.Remark)
		}
	}
	if !strings.Contains(e.logs.String(), "topic create/update refused") {
		t.Fatal("refusals are not logged")
	}
	e.must(e.call(c, reqUpdateAndCreateTopic, map[string]string{"topic": "%DLQ%x"}, nil), codeInvalidParameter)
	e.createTopic(c, "R", 2, "")
	e.must(e.call(c, reqUpdateAndCreateTopic, map[string]string{"topic": "R", "readQueueNums": "2", "writeQueueNums": "2", "perm": "4"}, nil), codeSuccess)
	e.must(e.send(c, "R", 0, "x", ""), codeNoPermission)

	r := e.must(e.call(c, reqGetAllTopicConfig, nil, nil), codeSuccess)
	var all struct {
		TopicConfigTable map[string]topicConfig `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(r.Body, &all); err != nil || all.TopicConfigTable["R"].Perm != 4 || all.TopicConfigTable["F"].WriteQueueNums != 6 {
		t.Fatalf("%s %v", r.Body, err)
	}
}

func TestGroupAdmin(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.must(e.call(c, reqUpdateAndCreateSubGroup, nil, []byte(`{"groupName":"G1","retryMaxTimes":3,"consumeMessageOrderly":true}`)), codeSuccess)
	g, err := e.b.GetGroup(e.ctx, "G1")
	if err != nil || g.MaxDeliveryAttempts != 4 || !g.FIFO {
		t.Fatalf("%+v %v", g, err)
	}
	e.must(e.call(c, reqUpdateAndCreateSubGroup, nil, []byte(`{"groupName":"bad name"}`)), codeInvalidParameter)
	r := e.must(e.call(c, reqGetAllSubGroupConfig, nil, nil), codeSuccess)
	if !strings.Contains(string(r.Body), `"retryMaxTimes":3`) || !strings.Contains(string(r.Body), `"dataVersion"`) {
		t.Fatalf("%s", r.Body)
	}
	e.must(e.call(c, reqDeleteSubGroup, map[string]string{"groupName": "G1"}, nil), codeSuccess)
	if _, err := e.b.GetGroup(e.ctx, "G1"); err == nil {
		t.Fatal("group not deleted")
	}
	e.must(e.call(c, reqCheckClientConfig, nil, []byte(`{"subscriptionData":{"expressionType":"TAG"}}`)), codeSuccess)
	e.must(e.call(c, reqCheckClientConfig, nil, []byte(`{"subscriptionData":{"expressionType":"SQL92","subString":"a > 1 AND b = 'x'"}}`)), codeSuccess)
	e.must(e.call(c, reqCheckClientConfig, nil, []byte(`{"subscriptionData":{"expressionType":"SQL92","subString":"a >"}}`)), codeSubscriptionParseFailed)
}

// QUERY_MESSAGE by key and by unique key.
func TestQueryMessage(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	e.must(e.send(c, "T", 0, "a", props("KEYS", "order-1 other", "UNIQ_KEY", "UA")), codeSuccess)
	e.must(e.send(c, "T", 0, "b", props("KEYS", "order-2", "UNIQ_KEY", "UB")), codeSuccess)
	q := func(key string, unique bool) []string {
		ext := map[string]string{"topic": "T", "key": key, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9999999999999"}
		if unique {
			ext["_UNIQUE_KEY_QUERY"] = "true"
		}
		r := e.call(c, reqQueryMessage, ext, nil)
		if r.Code == codeQueryNotFound {
			return nil
		}
		e.must(r, codeSuccess)
		var out []string
		for _, rec := range records(t, r.Body) {
			out = append(out, string(rec.Body))
		}
		return out
	}
	if got := q("order-1", false); strings.Join(got, ",") != "a" {
		t.Fatalf("by key %v", got)
	}
	if got := q("UB", true); strings.Join(got, ",") != "b" {
		t.Fatalf("by id %v", got)
	}
	if got := q("missing", false); got != nil {
		t.Fatalf("missing %v", got)
	}
}
