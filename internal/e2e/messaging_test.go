package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// Producer sync and async sends; a SimpleConsumer receives and acks
// exactly what was sent (ids, bodies, tags, keys, properties), each once,
// at attempt 1; afterwards there is nothing left.
func TestSendSyncAsyncReceiveAckExactly(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("orders"), uniq("g")
	out := cli(t, p, "topic", "create", topic, "--type", "NORMAL", "--queues", "4")
	if !strings.Contains(out, "created topic "+topic) {
		t.Fatalf("topic create said %q", out)
	}
	cli(t, p, "group", "create", group)

	pr := newProducer(t, p, topic)
	sent := map[string]string{} // id → body
	for i := range 10 {
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("sync-%d", i))}
		m.SetTag("sync")
		m.SetKeys(fmt.Sprintf("key-%d", i), "shared key")
		m.AddProperty("n", fmt.Sprint(i))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, m)
		cancel()
		if err != nil {
			t.Fatalf("sync send %d: %v", i, err)
		}
		if len(rs) != 1 || rs[0].MessageID == "" {
			t.Fatalf("receipts %v", rs)
		}
		sent[rs[0].MessageID] = string(m.Body)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 10 {
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("async-%d", i))}
		m.SetTag("async")
		m.AddProperty("n", fmt.Sprint(i))
		wg.Add(1)
		pr.SendAsync(context.Background(), m, func(_ context.Context, rs []*rmq.SendReceipt, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(rs) != 1 {
				t.Errorf("async send: %v %v", rs, err)
				return
			}
			sent[rs[0].MessageID] = string(m.Body)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(sent) != 20 {
		t.Fatalf("%d distinct message ids for 20 sends", len(sent))
	}

	c := newConsumer(t, p, group, 0, all(topic))
	got := map[string]int{}
	collect(t, c, 20, 30*time.Second, 60*time.Second, func(mv *rmq.MessageView) {
		got[mv.GetMessageId()]++
		body := string(mv.GetBody())
		if sent[mv.GetMessageId()] != body {
			t.Errorf("message %s: body %q, sent %q", mv.GetMessageId(), body, sent[mv.GetMessageId()])
		}
		if mv.GetDeliveryAttempt() != 1 {
			t.Errorf("message %s: attempt %d on first delivery", mv.GetMessageId(), mv.GetDeliveryAttempt())
		}
		if mv.GetTopic() != topic {
			t.Errorf("topic %q", mv.GetTopic())
		}
		kind, _, _ := strings.Cut(body, "-")
		if mv.GetTag() == nil || *mv.GetTag() != kind {
			t.Errorf("message %s: tag %v, want %s", body, mv.GetTag(), kind)
		}
		if n := strings.TrimPrefix(body, kind+"-"); mv.GetProperties()["n"] != n {
			t.Errorf("message %s: properties %v", body, mv.GetProperties())
		}
		if kind == "sync" {
			if k := mv.GetKeys(); len(k) != 2 || k[0] != "key-"+strings.TrimPrefix(body, "sync-") || k[1] != "shared key" {
				t.Errorf("message %s: keys %q (a key with a space must stay one key)", body, k)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Ack(ctx, mv); err != nil {
			t.Errorf("ack: %v", err)
		}
	})
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(sent))) {
		t.Fatalf("received ids %v, sent %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(sent)))
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("message %s delivered %d times", id, n)
		}
	}
	// Everything was acked: nothing more (the Go default awaitDuration 0
	// still long-polls what fits in its 3 s deadline).
	begin := time.Now()
	if extra := receive(t, c, 32, 30*time.Second); len(extra) != 0 {
		t.Fatalf("received %v after acking everything", ids(extra))
	}
	if waited := time.Since(begin); waited < time.Second {
		t.Fatalf("empty receive answered after %s: the server must long-poll before MESSAGE_NOT_FOUND", waited)
	}
}

// Tag expressions select by tag; untagged messages match only "*". Each
// group filters independently.
func TestTagFiltering(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, ga, gall := uniq("tags"), uniq("g-ab"), uniq("g-all")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", ga)
	cli(t, p, "group", "create", gall)
	pr := newProducer(t, p, topic)
	want := map[string]string{} // id → tag
	for _, tag := range []string{"a", "b", "c", ""} {
		for id := range sendBodies(t, pr, topic, 2, tag) {
			want[id] = tag
		}
	}

	cab := newConsumer(t, p, ga, 0, map[string]*rmq.FilterExpression{topic: rmq.NewFilterExpression("a || b")})
	got := collect(t, cab, 4, 30*time.Second, 60*time.Second, nil)
	for _, mv := range got {
		if tag := want[mv.GetMessageId()]; tag != "a" && tag != "b" {
			t.Fatalf("filter a||b delivered a message tagged %q", tag)
		}
	}
	if extra := receive(t, cab, 32, 30*time.Second); len(extra) != 0 {
		t.Fatalf("filter a||b delivered more: %v", ids(extra))
	}

	call := newConsumer(t, p, gall, 0, all(topic))
	got = collect(t, call, 8, 30*time.Second, 60*time.Second, nil)
	if len(got) != 8 {
		t.Fatalf("'*' got %d messages, want all 8", len(got))
	}
}
