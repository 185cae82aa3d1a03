package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// SQL92 filters with the official Go client: a SimpleConsumer subscribed
// with an SQL92 expression over user properties and TAGS gets exactly the
// matching messages; another group's different expression gets its own
// set from the same topic; nothing else comes afterwards.
func TestSQL92Filtering(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, g1, g2 := uniq("sql"), uniq("g-sql1"), uniq("g-sql2")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", g1)
	cli(t, p, "group", "create", g2)
	pr := newProducer(t, p, topic)
	type props struct {
		a           int
		region, tag string
	}
	sent := map[string]props{} // id → what it carried
	for i := 1; i <= 12; i++ {
		m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("sql %d", i))}
		pp := props{a: i, region: []string{"us", "eu"}[i%2], tag: []string{"x", "y", "z"}[i%3]}
		m.SetTag(pp.tag)
		m.AddProperty("a", strconv.Itoa(pp.a))
		m.AddProperty("region", pp.region)
		if i%4 == 0 {
			m.AddProperty("vip", "true")
		}
		sent[send(t, pr, m).MessageID] = pp
	}

	for _, c := range []struct {
		group, expr string
		match       func(id string, pp props) bool
	}{
		{g1, "a > 3 AND region = 'eu' AND TAGS <> 'z'", func(_ string, pp props) bool {
			return pp.a > 3 && pp.region == "eu" && pp.tag != "z"
		}},
		{g2, "vip IS NOT NULL OR (a BETWEEN 1 AND 2) OR TAGS IN ('q')", func(_ string, pp props) bool {
			return pp.a%4 == 0 || pp.a <= 2
		}},
	} {
		want := map[string]bool{}
		for id, pp := range sent {
			if c.match(id, pp) {
				want[id] = true
			}
		}
		cons := newConsumer(t, p, c.group, 0, map[string]*rmq.FilterExpression{topic: rmq.NewFilterExpressionWithType(c.expr, rmq.SQL92)})
		got := collect(t, cons, len(want), 30*time.Second, 60*time.Second, func(mv *rmq.MessageView) {
			ackMsg(t, cons, mv)
		})
		for _, mv := range got {
			if !want[mv.GetMessageId()] {
				t.Fatalf("%q delivered %s (properties %v, tag %q), which it does not match", c.expr, mv.GetMessageId(), mv.GetProperties(), sent[mv.GetMessageId()].tag)
			}
			if pp := sent[mv.GetMessageId()]; mv.GetProperties()["a"] != strconv.Itoa(pp.a) || string(mv.GetBody()) != fmt.Sprintf("sql %d", pp.a) {
				t.Fatalf("message a=%d arrived as %q with %v", pp.a, mv.GetBody(), mv.GetProperties())
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d deliveries, want the %d matching messages once each", c.expr, len(got), len(want))
		}
		if extra := receive(t, cons, 32, 30*time.Second); len(extra) != 0 {
			t.Fatalf("%q delivered more: %v", c.expr, ids(extra))
		}
	}
}

func ackMsg(t *testing.T, c rmq.SimpleConsumer, mv *rmq.MessageView) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ack(ctx, mv); err != nil {
		t.Fatalf("ack %s: %v", mv.GetMessageId(), err)
	}
}
