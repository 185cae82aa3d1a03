package classic

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/internal/testutil"
)

const authUsers = `
users:
  - accessKey: app
    secretKey: app-secret-1
    publish: ["orders*"]
    subscribe: ["orders*"]
    groups: ["g-*"]
  - accessKey: reader
    secretKey: reader-secret-1
    publish: []
    subscribe: ["orders*"]
  - accessKey: ops
    secretKey: ops-secret-1
    admin: true
`

// TestClassicAuth: mqgate serve --auth-file. The official classic Go
// client (v2.1.2) with primitive.Credentials signs every request: a
// producer and a push consumer of an allowed topic send and receive. A
// producer without credentials, one with a wrong secret, a producer
// sending to a topic its user may not publish to (or may only consume)
// all fail, and none of their messages reaches the consumer.
func TestClassicAuth(t *testing.T) {
	e2e(t)
	file := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(file, []byte(authUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "--auth-file", file)
	orders, payments := uniq("orders"), uniq("payments")
	ctx := ctxT(t, 90*time.Second)

	// Topics: an unsigned CreateTopic is refused, an admin's succeeds.
	adm, err := client.Dial(ctx, p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	create := func(topic string) *codec.Command {
		resp, err := adm.Invoke(ctx, &codec.Command{Code: 17, Ext: map[string]string{"topic": topic, "readQueueNums": "2",
			"writeQueueNums": "2", "perm": "6"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := create(orders); r.Code != 16 || !strings.Contains(r.Remark, "AccessKey") {
		t.Fatalf("unsigned CreateTopic: answer %d %q, want NO_PERMISSION (16)", r.Code, r.Remark)
	}
	adm.SetCredentials("ops", "ops-secret-1")
	for _, topic := range []string{orders, payments} {
		if r := create(topic); r.Code != 0 {
			t.Fatalf("CreateTopic %s as ops: answer %d %q", topic, r.Code, r.Remark)
		}
	}

	appCreds := primitive.Credentials{AccessKey: "app", SecretKey: "app-secret-1"}
	col := newCollector()
	newPushConsumer(t, p, uniq("g-orders"), orders, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	}, consumer.WithCredentials(appCreds))

	pr := newProducer(t, p, producer.WithCredentials(appCreds))
	for i := range 3 {
		if r, err := pr.SendSync(ctx, primitive.NewMessage(orders, []byte(fmt.Sprint("signed-", i)))); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("signed SendSync: %v %v", r, err)
		}
	}

	refused := func(name string, pr interface {
		SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
	}, topic, want string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := pr.SendSync(sctx, primitive.NewMessage(topic, []byte("refused-"+name)))
		if err == nil {
			t.Fatalf("%s: SendSync to %s succeeded: %v", name, topic, r)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: SendSync error %q, want one mentioning %q", name, err, want)
		}
	}
	// Without credentials or with a wrong secret even the route query is
	// refused, so the client finds no route.
	refused("unsigned", newProducer(t, p), orders, "route info not found")
	refused("wrong secret", newProducer(t, p, producer.WithCredentials(primitive.Credentials{AccessKey: "app", SecretKey: "nope"})), orders, "route info not found")
	// app may neither publish to nor consume payments: no route either.
	refused("app to payments", pr, payments, "route info not found")
	// reader may read orders' route but not publish: the send is refused.
	refused("reader to orders", newProducer(t, p, producer.WithCredentials(primitive.Credentials{AccessKey: "reader", SecretKey: "reader-secret-1"})),
		orders, "CODE: 16")

	col.wait(t, 45*time.Second, "the signed messages", func() bool {
		for i := range 3 {
			if len(col.seen[fmt.Sprint("signed-", i)]) == 0 {
				return false
			}
		}
		return true
	})
	// Nothing refused was stored: the topic holds exactly the 3 sends.
	var total int64
	for q := range 2 {
		resp, err := adm.Invoke(ctx, &codec.Command{Code: 30, Ext: map[string]string{"topic": orders, "queueId": fmt.Sprint(q)}})
		if err != nil || resp.Code != 0 {
			t.Fatalf("GET_MAX_OFFSET: %v %+v", err, resp)
		}
		var n int64
		fmt.Sscan(resp.Ext["offset"], &n)
		total += n
	}
	if total != 3 {
		t.Fatalf("%s holds %d messages, want the 3 signed sends", orders, total)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for b := range col.seen {
		if strings.HasPrefix(b, "refused-") {
			t.Fatalf("a refused message was consumed: %q", b)
		}
	}
}

// TestClassicRetryUnderAuth: with --auth-file, the official classic Go
// client's own send-backs (a push consumer answering ConsumeRetryLater)
// are accepted for a consume-only user: the message is redelivered
// through the group's retry topic until it succeeds. Send-back is checked
// against the message's own topic and the group's subscriptions, and the
// client's redeliveries pass both.
func TestClassicRetryUnderAuth(t *testing.T) {
	e2e(t)
	topa, grpa := uniq("topa"), uniq("grpa")
	users := fmt.Sprintf(`
users:
  - {accessKey: ops, secretKey: ops-secret-1, admin: true}
  - {accessKey: cons, secretKey: cons-secret-1, publish: [], subscribe: [%q], groups: [%q]}
`, topa, grpa)
	file := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(file, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "--auth-file", file)
	ctx := ctxT(t, 90*time.Second)
	adm, err := client.Dial(ctx, p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	adm.SetCredentials("ops", "ops-secret-1")
	if r, err := adm.Invoke(ctx, &codec.Command{Code: 17, Ext: map[string]string{"topic": topa, "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "6"}}); err != nil || r.Code != 0 {
		t.Fatalf("CreateTopic: %v %+v", err, r)
	}
	pr := newProducer(t, p, producer.WithCredentials(primitive.Credentials{AccessKey: "ops", SecretKey: "ops-secret-1"}))
	if r, err := pr.SendSync(ctx, primitive.NewMessage(topa, []byte("flaky"))); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", r, err)
	}
	col := newCollector()
	newPushConsumer(t, p, grpa, topa, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		if ms[0].ReconsumeTimes < 2 {
			if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
				cc.DelayLevelWhenNextConsume = 1 // 1 s
			}
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithCredentials(primitive.Credentials{AccessKey: "cons", SecretKey: "cons-secret-1"}))
	col.wait(t, 60*time.Second, "two redeliveries", func() bool { return len(col.seen["flaky"]) >= 3 })
	if strings.Contains(p.Log(), "send-back refused") {
		t.Fatalf("a send-back of the client was refused:\n%s", p.Log())
	}
}

// TestClassicSendWindow: with --remoting-send-window the official Go
// client's signed sends are accepted (it stamps each attempt's
// bornTimestamp, which the signature covers), and a signed send frame
// whose bornTimestamp lies beyond the window, as a captured one replayed
// later does, is refused NO_PERMISSION and not stored.
func TestClassicSendWindow(t *testing.T) {
	e2e(t)
	file := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(file, []byte(authUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "--auth-file", file, "--remoting-send-window", "30s")
	orders := uniq("orders")
	ctx := ctxT(t, 60*time.Second)
	c, err := client.Dial(ctx, p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetCredentials("ops", "ops-secret-1")
	if r, err := c.Invoke(ctx, &codec.Command{Code: 17, Ext: map[string]string{"topic": orders, "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "6"}}); err != nil || r.Code != 0 {
		t.Fatalf("CreateTopic: %v %+v", err, r)
	}
	pr := newProducer(t, p, producer.WithCredentials(primitive.Credentials{AccessKey: "app", SecretKey: "app-secret-1"}))
	if r, err := pr.SendSync(ctx, primitive.NewMessage(orders, []byte("fresh"))); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("the Go client's signed send: %v %v", r, err)
	}
	send := func(body string, born time.Time) *codec.Command {
		r, err := c.Invoke(ctx, &codec.Command{Code: 10, Body: []byte(body), Ext: map[string]string{"producerGroup": "PG", "topic": orders,
			"queueId": "0", "sysFlag": "0", "bornTimestamp": fmt.Sprint(born.UnixMilli()), "flag": "0", "properties": ""}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := send("signed-long-ago", time.Now().Add(-time.Minute)); r.Code != 16 || !strings.Contains(r.Remark, "remoting-send-window") {
		t.Fatalf("a send signed a minute ago: %d %q, want NO_PERMISSION", r.Code, r.Remark)
	}
	if r := send("signed-now", time.Now()); r.Code != 0 {
		t.Fatalf("a send signed now: %d %q", r.Code, r.Remark)
	}
	// The queue holds the two accepted sends and not the refused one.
	var bodies []string
	testutil.Eventually(t, "the accepted sends in the queue", func() bool {
		resp, err := c.Invoke(ctx, &codec.Command{Code: 11, Ext: map[string]string{"consumerGroup": "g-window", "topic": orders, "queueId": "0",
			"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "-1", "suspendTimeoutMillis": "0", "subscription": "*"}})
		if err != nil || resp.Code != 0 {
			return false
		}
		rs, err := wire.DecodeRecords(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		bodies = bodies[:0]
		for _, r := range rs {
			bodies = append(bodies, string(r.Body))
		}
		return len(bodies) >= 2
	})
	if strings.Join(bodies, ",") != "fresh,signed-now" {
		t.Fatalf("the queue holds %q, want the Go client's send and the one signed now", bodies)
	}
}
