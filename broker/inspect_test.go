package broker

import (
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

func TestDescribeTopicAndGroup(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal) // 4 queues (env default)
	e.group("g", 1, false)
	e.send("t", 6, "")

	d, err := e.b.DescribeTopic(e.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Queues) != 4 || d.Messages != 6 || len(d.Groups) != 0 {
		t.Fatalf("before any receive: %+v", d)
	}
	var sum int64
	for _, q := range d.Queues {
		if q.Min != 0 || q.Max < 1 {
			t.Fatalf("queue %+v: round robin puts at least one of 6 messages in each of 4 queues", q)
		}
		sum += q.Max - q.Min
	}
	if sum != 6 {
		t.Fatalf("queues hold %d messages, want 6", sum)
	}

	got, err := e.receive("g", "t", 2, 10*time.Second)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{got[0].ReceiptHandle}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	gd, err := e.b.DescribeGroup(e.ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(gd.Topics) != 1 {
		t.Fatalf("group topics: %+v", gd.Topics)
	}
	p := gd.Topics[0]
	if p.Topic != "t" || p.Ready != 4 || p.InFlight != 1 || p.Held != 0 || p.Backlog != 5 || len(p.Queues) != 4 {
		t.Fatalf("progress after 2 delivered, 1 acked: %+v", p)
	}
	if gd.DLQ.Topic != "%DLQ%g" || gd.DLQ.Messages != 0 {
		t.Fatalf("dlq before any dead letter: %+v", gd.DLQ)
	}
	td, _ := e.b.DescribeTopic(e.ctx, "t")
	if len(td.Groups) != 1 || td.Groups[0].Group != "g" || td.Groups[0].Backlog != 5 {
		t.Fatalf("topic's groups: %+v", td.Groups)
	}

	// The unacked one passes its deadline; max attempts is 1, so the next
	// receive dead-letters it instead of delivering it.
	e.clk.Advance(11 * time.Second)
	_, _ = e.receive("g", "t", 32, 10*time.Second)
	// Counts come from the consume queues: wait for the dead letter's
	// record to be dispatched.
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}
	gd, err = e.b.DescribeGroup(e.ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if !gd.DLQ.Exists || gd.DLQ.Messages != 1 {
		t.Fatalf("dlq after max attempts: %+v", gd.DLQ)
	}
	if p := gd.Topics[0]; p.Ready != 0 || p.InFlight != 4 || p.Backlog != 4 {
		t.Fatalf("progress after receiving the rest: %+v", p)
	}

	if _, err := e.b.DescribeTopic(e.ctx, "nope"); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("missing topic: %v", err)
	}
	if _, err := e.b.DescribeGroup(e.ctx, "nope"); mqerr.KindOf(err) != mqerr.KindGroupNotFound {
		t.Fatalf("missing group: %v", err)
	}
}

func TestLookupMessage(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.topic("d", model.TopicDelay)
	e.sendOne(&model.Message{Topic: "t", ID: "id-1", Keys: []string{"order-7"}, Tag: "A", Body: []byte("one")})
	e.sendOne(&model.Message{Topic: "t", ID: "id-2", Keys: []string{"order-7", "other"}, Body: []byte("two")})
	due := e.clk.Now().Add(time.Minute)
	e.sendOne(&model.Message{Topic: "d", ID: "id-3", Keys: []string{"later"}, Body: []byte("three"), DeliveryTime: due})
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}

	found, err := e.b.LookupMessage(e.ctx, LookupRequest{ID: "id-1"})
	if err != nil || len(found) != 1 || found[0].Topic != "t" || string(found[0].Body) != "one" || found[0].Tag != "A" || found[0].Scheduled {
		t.Fatalf("by id: %v %+v", err, found)
	}
	found, err = e.b.LookupMessage(e.ctx, LookupRequest{Topic: "t", Key: "order-7"})
	if err != nil || len(found) != 2 {
		t.Fatalf("by key: %v %+v", err, found)
	}
	// id or key: "id-2" as an id and "other" as a key are the same record.
	found, err = e.b.LookupMessage(e.ctx, LookupRequest{ID: "id-2", Key: "other"})
	if err != nil || len(found) != 1 || found[0].ID != "id-2" {
		t.Fatalf("id or key: %v %+v", err, found)
	}
	// A delayed message not yet due is found in the stage, with its
	// destination topic.
	found, err = e.b.LookupMessage(e.ctx, LookupRequest{ID: "id-3"})
	if err != nil || len(found) != 1 || !found[0].Scheduled || found[0].Topic != "d" || !found[0].DeliveryTime.Equal(due.Truncate(time.Millisecond)) {
		t.Fatalf("scheduled: %v %+v", err, found)
	}
	// Once due it is in its topic, reported once.
	e.clk.Advance(time.Minute)
	e.group("g2", 0, false)
	e.waitReceive("g2", "d")
	found, err = e.b.LookupMessage(e.ctx, LookupRequest{Key: "later"})
	if err != nil || len(found) != 1 || found[0].Scheduled || found[0].Topic != "d" {
		t.Fatalf("after delivery: %v %+v", err, found)
	}

	if _, err := e.b.LookupMessage(e.ctx, LookupRequest{}); mqerr.KindOf(err) != mqerr.KindBadRequest {
		t.Fatalf("no id or key: %v", err)
	}
	if _, err := e.b.LookupMessage(e.ctx, LookupRequest{Topic: "nope", ID: "x"}); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("missing topic: %v", err)
	}
	if found, err := e.b.LookupMessage(e.ctx, LookupRequest{ID: "absent"}); err != nil || len(found) != 0 {
		t.Fatalf("absent: %v %+v", err, found)
	}
}

// A group that only commits offsets (classic push consumers, the offset
// API) shows its progress too: consumed up to its committed offset in the
// queues it committed, from the start in the others.
func TestDescribeCommittedOnlyGroup(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal)
	e.group("classic", 0, false)
	e.send("t", 8, "")
	_, hi := e.store.QueueRange("t", 0)
	if err := e.b.UpdateOffset(e.ctx, "classic", "t", 0, hi); err != nil {
		t.Fatal(err)
	}
	gd, err := e.b.DescribeGroup(e.ctx, "classic")
	if err != nil {
		t.Fatal(err)
	}
	if len(gd.Topics) != 1 || gd.Topics[0].Topic != "t" || gd.Topics[0].InFlight != 0 || gd.Topics[0].Ready != 8-hi {
		t.Fatalf("classic group's progress: %+v", gd.Topics)
	}
	if q := gd.Topics[0].Queues[0]; q.Consumed != hi || q.Ready != 0 {
		t.Fatalf("queue 0: %+v", q)
	}
	td, err := e.b.DescribeTopic(e.ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(td.Groups) != 1 || td.Groups[0].Group != "classic" || td.Groups[0].Backlog != 8-hi {
		t.Fatalf("topic's groups: %+v", td.Groups)
	}
}
