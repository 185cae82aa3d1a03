package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

// BrowseQueue reads a queue from an offset or a store time, whatever the
// groups consumed, and clamps offsets to the retained range.
func TestBrowseQueue(t *testing.T) {
	e := newEnv(t)
	if _, err := e.b.CreateTopic(e.ctx, model.Topic{Name: "b", Queues: 1}); err != nil {
		t.Fatal(err)
	}
	e.group("g", 16, false)
	var times []time.Time
	for i := 0; i < 5; i++ {
		times = append(times, e.clk.Now())
		e.send("b", 1, fmt.Sprint(i))
		e.clk.Advance(time.Second)
	}
	// A consumer takes and acks two: browsing still shows them.
	got, err := e.receive("g", "b", 2, 30*time.Second)
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	for _, d := range got {
		if errs := e.b.Ack(e.ctx, "g", "b", []string{d.ReceiptHandle}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}

	page, err := e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if page.Min != 0 || page.Max != 5 || page.Start != 0 || page.Next != 3 || len(page.Messages) != 3 || page.Messages[0].Tag != "0" || page.Messages[2].QueueOffset != 2 {
		t.Fatalf("first page: %+v", page)
	}
	page, err = e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Offset: page.Next, Max: 3})
	if err != nil || page.Start != 3 || page.Next != 5 || len(page.Messages) != 2 || page.Messages[1].Tag != "4" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	// By time: the first message stored at or after the third send.
	page, err = e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Time: times[2], Max: 1})
	if err != nil || page.Start != 2 || len(page.Messages) != 1 || page.Messages[0].Tag != "2" {
		t.Fatalf("from time: %+v %v", page, err)
	}
	// After the last message: the end, empty.
	page, err = e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Time: e.clk.Now().Add(time.Hour)})
	if err != nil || page.Start != 5 || page.Next != 5 || len(page.Messages) != 0 {
		t.Fatalf("from a time after every message: %+v %v", page, err)
	}
	// Offsets outside the range are clamped.
	page, err = e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Offset: 99})
	if err != nil || page.Start != 5 || len(page.Messages) != 0 {
		t.Fatalf("past the end: %+v %v", page, err)
	}
	page, err = e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", Offset: -7, Max: 1})
	if err != nil || page.Start != 0 || len(page.Messages) != 1 {
		t.Fatalf("before the start: %+v %v", page, err)
	}

	if _, err := e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "b", QueueID: 1}); mqerr.KindOf(err) != mqerr.KindBadRequest {
		t.Fatalf("queue 1 of a one-queue topic: %v", err)
	}
	if _, err := e.b.BrowseQueue(e.ctx, BrowseRequest{Topic: "nope"}); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("unknown topic: %v", err)
	}
}

// TopicTraffic counts each topic's sends (messages and body bytes) when
// the broker counts (a MeterProvider), and StoredMessages what its queues
// hold.
func TestTopicTrafficAndStored(t *testing.T) {
	o := newObserved(t, false)
	o.topic("t1", model.TopicNormal)
	o.topic("t2", model.TopicNormal)
	o.send("t1", 3, "")
	o.send("t2", 1, "")
	got := o.b.TopicTraffic()
	if len(got) != 2 || got[0].Topic != "t1" || got[0].Messages != 3 || got[1].Topic != "t2" || got[1].Messages != 1 {
		t.Fatalf("traffic: %+v", got)
	}
	if want := int64(len("body-")) * 3; got[0].Bytes < want {
		t.Fatalf("t1 bytes %d, want at least %d", got[0].Bytes, want)
	}
	if n, err := o.b.StoredMessages(o.ctx, "t1"); err != nil || n != 3 {
		t.Fatalf("stored in t1: %d %v", n, err)
	}
	if _, err := o.b.StoredMessages(o.ctx, "nope"); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("stored in an unknown topic: %v", err)
	}
}

// OldestInFlight names the earliest stored message a group holds
// unacknowledged, with its deliveries and deadline, and nothing once it
// is acknowledged.
func TestOldestInFlight(t *testing.T) {
	e := newEnv(t)
	e.topic("t", model.TopicNormal) // 4 queues
	e.group("g", 16, false)
	var ids []string
	for range 4 { // stored a millisecond apart
		ids = append(ids, e.send("t", 1, "")...)
		e.clk.Advance(time.Millisecond)
	}
	if _, ok, err := e.b.OldestInFlight(e.ctx, "g", "t"); ok || err != nil {
		t.Fatalf("before any receive: %v %v", ok, err)
	}
	got, err := e.receive("g", "t", 4, 30*time.Second)
	if err != nil || len(got) != 4 {
		t.Fatalf("receive: %v %d", err, len(got))
	}
	m, ok, err := e.b.OldestInFlight(e.ctx, "g", "t")
	if err != nil || !ok || m.ID != ids[0] || m.Deliveries != 1 || !m.VisibleAt.Equal(e.clk.Now().Add(30*time.Second)) || m.Held {
		t.Fatalf("oldest in flight: %+v %v %v (want %s)", m, ok, err, ids[0])
	}
	// The first redelivered counts two deliveries.
	e.clk.Advance(31 * time.Second)
	again, err := e.receive("g", "t", 4, 30*time.Second)
	if err != nil || len(again) != 4 {
		t.Fatalf("redelivery: %v %d", err, len(again))
	}
	byID := map[string]string{}
	for _, d := range again {
		byID[d.ID] = d.ReceiptHandle
	}
	if errs := e.b.Ack(e.ctx, "g", "t", []string{byID[ids[0]]}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	m, ok, err = e.b.OldestInFlight(e.ctx, "g", "t")
	if err != nil || !ok || m.ID != ids[1] || m.Deliveries != 2 {
		t.Fatalf("after acking the first: %+v %v %v (want %s)", m, ok, err, ids[1])
	}
	if _, _, err := e.b.OldestInFlight(e.ctx, "g", "nope"); mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		t.Fatalf("unknown topic: %v", err)
	}
}
