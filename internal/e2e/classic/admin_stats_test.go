package classic

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// TestClassicAdminViews: what mqadmin consumerConnection, consumerStatus
// and consumerProgress ask a broker, against a running Go push consumer:
// the group's connection list names it, GET_CONSUMER_RUNNING_INFO is
// relayed to it and its own answer comes back, and the group's progress
// reaches the end of every queue once it has consumed everything.
func TestClassicAdminViews(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 2)
	pr := newProducer(t, p)
	ctx := ctxT(t, 90*time.Second)
	const n = 6
	var firstID string // m0's offset message id
	for i := range n {
		r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprint("m", i))))
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("SendSync: %v %v", r, err)
		}
		if i == 0 {
			firstID = r.OffsetMsgID
		}
	}
	col := newCollector()
	newPushConsumer(t, p, group, topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 45*time.Second, "every message", func() bool { return len(col.seen) == n })

	adm, err := client.Dial(ctx, p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	call := func(code int32, ext map[string]string) *codec.Command {
		t.Helper()
		r, err := adm.Invoke(ctx, &codec.Command{Code: code, Ext: ext})
		if err != nil {
			t.Fatal(err)
		}
		if r.Code != 0 {
			t.Fatalf("request %d %v: code %d %s", code, ext, r.Code, r.Remark)
		}
		return r
	}

	var cc struct {
		ConnectionSet []struct{ ClientID, Language string }
		MessageModel  string
	}
	if r := call(203, map[string]string{"consumerGroup": group}); json.Unmarshal(r.Body, &cc) != nil || len(cc.ConnectionSet) != 1 ||
		cc.MessageModel != "CLUSTERING" || cc.ConnectionSet[0].Language != "GO" {
		t.Fatalf("consumer connections: %s", r.Body)
	}
	id := cc.ConnectionSet[0].ClientID

	// The client's ConsumerRunningInfo (fastjson: its mqTable is keyed by
	// MessageQueue objects, so the body is not JSON as a whole).
	r := call(307, map[string]string{"consumerGroup": group, "clientId": id, "jstackEnable": "false"})
	if b := string(r.Body); !strings.Contains(b, `"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"`) || !strings.Contains(b, `"topic":"`+topic+`"`) {
		t.Fatalf("running info from the consumer: %s", r.Body)
	}

	// mqadmin consumeMessage: m0 handed to the consumer once more, through
	// its listener, whose verdict comes back.
	r = call(309, map[string]string{"consumerGroup": group, "clientId": id, "msgId": firstID, "topic": topic})
	if !strings.Contains(string(r.Body), `"consumeResult":`) {
		t.Fatalf("consume directly: %s", r.Body)
	}
	col.wait(t, 10*time.Second, "m0 consumed a second time", func() bool { return len(col.seen["m0"]) == 2 })

	// mqadmin clusterList: the runtime figures count what was stored and
	// delivered through this listener.
	r = call(28, nil)
	got, _ := strconv.Atoi(kvTable(t, r.Body)["msgGetTotalTodayNow"])
	if tb := kvTable(t, r.Body); tb["msgPutTotalTodayNow"] != fmt.Sprint(n) || got < n || len(strings.Fields(tb["putTps"])) != 3 {
		t.Fatalf("runtime info: %s", r.Body)
	}

	// The client commits every 5 s: wait for its progress to reach the
	// end of both queues, as consumerProgress would show it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		body := string(call(208, map[string]string{"consumerGroup": group, "topic": topic}).Body)
		if strings.Count(body, `"brokerOffset":`) != 2 {
			t.Fatalf("consume stats: %s", body)
		}
		done := true
		for _, part := range strings.Split(body, `"brokerOffset":`)[1:] {
			var broker, consumer int64
			if _, err := fmt.Sscanf(part, `%d,"consumerOffset":%d`, &broker, &consumer); err != nil {
				t.Fatalf("consume stats %s: %v", body, err)
			}
			done = done && broker == consumer && broker > 0
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's progress never reached the end: %s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kvTable decodes a KVTable body.
func kvTable(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var kv struct{ Table map[string]string }
	if err := json.Unmarshal(body, &kv); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return kv.Table
}
