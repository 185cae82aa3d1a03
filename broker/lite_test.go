package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
)

func (e *env) liteTopic(name string, ttl time.Duration) {
	e.t.Helper()
	if _, err := e.b.CreateTopic(e.ctx, model.Topic{Name: name, Type: model.TopicLite, LiteTTL: ttl}); err != nil {
		e.t.Fatal(err)
	}
}

// sendLite sends one message per body to lite topic lt of parent and
// returns their ids.
func (e *env) sendLite(parent, lt string, bodies ...string) []string {
	e.t.Helper()
	var ids []string
	for _, body := range bodies {
		id := fmt.Sprintf("%s-%s-%s", parent, lt, body)
		res, err := e.b.Send(e.ctx, parent, []*model.Message{{Topic: parent, LiteTopic: lt, ID: id, Body: []byte(body)}}, model.Producer{})
		if err != nil || res[0].Err != nil {
			e.t.Fatalf("send to %s/%s: %v %v", parent, lt, err, res)
		}
		ids = append(ids, id)
	}
	return ids
}

func (e *env) sync(client, group, parent string, a lite.Action, lites ...string) error {
	return e.b.SyncLiteSubscription(e.ctx, LiteSyncRequest{ClientID: client, Group: group, Topic: parent, Action: a, Lites: lites})
}

func (e *env) liteReceive(client, group, parent string, max int) []*model.Delivered {
	e.t.Helper()
	got, err := e.b.Receive(e.ctx, ReceiveRequest{Group: group, Topic: parent, ClientID: client, Max: max, Invisible: 30 * time.Second, QueueID: -1})
	if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		e.t.Fatalf("receive: %v", err)
	}
	return got
}

// byLite groups deliveries' bodies by lite topic, in delivery order.
func byLite(ds []*model.Delivered) map[string][]string {
	out := map[string][]string{}
	for _, d := range ds {
		out[d.LiteTopic] = append(out[d.LiteTopic], string(d.Body))
	}
	return out
}

func (e *env) ack(group, topic string, ds ...*model.Delivered) {
	e.t.Helper()
	hs := make([]string, len(ds))
	for i, d := range ds {
		hs[i] = d.ReceiptHandle
	}
	for i, err := range e.b.Ack(e.ctx, group, topic, hs) {
		if err != nil {
			e.t.Fatalf("ack %s: %v", ds[i].ID, err)
		}
	}
}

// A lite consumer gets the messages of the lite topics it subscribes to,
// in order per lite topic, one run per lite topic in flight at a time.
func TestLiteSubscribeReceiveInOrder(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	e.sendLite("chat", "conv-1", "a1", "a2", "a3")
	e.sendLite("chat", "conv-2", "b1", "b2")
	e.sendLite("chat", "conv-3", "c1")
	// Without a subscription a client gets nothing.
	if got := e.liteReceive("c1", "g", "chat", 32); len(got) != 0 {
		t.Fatalf("unsubscribed client got %v", byLite(got))
	}
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "conv-1", "conv-2"); err != nil {
		t.Fatal(err)
	}
	got := e.liteReceive("c1", "g", "chat", 32)
	want := map[string][]string{"conv-1": {"a1", "a2", "a3"}, "conv-2": {"b1", "b2"}}
	if fmt.Sprint(byLite(got)) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", byLite(got), want)
	}
	for _, d := range got {
		if d.Attempt != 1 || !lite.IsHandle(d.ReceiptHandle) || d.Topic != "chat" {
			t.Fatalf("bad delivery %+v", d)
		}
	}
	// Runs in flight block their lite topics.
	e.sendLite("chat", "conv-1", "a4")
	if more := e.liteReceive("c1", "g", "chat", 32); len(more) != 0 {
		t.Fatalf("a lite topic with a run in flight delivered again: %v", byLite(more))
	}
	// Acknowledging part of a run keeps it blocked; all of it frees it.
	var conv1 []*model.Delivered
	for _, d := range got {
		if d.LiteTopic == "conv-1" {
			conv1 = append(conv1, d)
		}
	}
	e.ack("g", "chat", conv1[1]) // out of order
	if more := e.liteReceive("c1", "g", "chat", 32); len(more) != 0 {
		t.Fatalf("partly acknowledged run released: %v", byLite(more))
	}
	e.ack("g", "chat", conv1[0], conv1[2])
	next := e.liteReceive("c1", "g", "chat", 32)
	if fmt.Sprint(byLite(next)) != fmt.Sprint(map[string][]string{"conv-1": {"a4"}}) {
		t.Fatalf("after the ack: %v", byLite(next))
	}
	// A second ack of an acknowledged delivery is refused.
	if errs := e.b.Ack(e.ctx, "g", "chat", []string{conv1[0].ReceiptHandle}); mqerr.KindOf(errs[0]) != mqerr.KindInvalidReceiptHandle {
		t.Fatalf("stale ack: %v", errs[0])
	}
	// conv-2's run expires unacknowledged and goes out again, attempt 2.
	e.clk.Advance(31 * time.Second)
	again := e.liteReceive("c1", "g", "chat", 32)
	if fmt.Sprint(byLite(again)) != fmt.Sprint(map[string][]string{"conv-1": {"a4"}, "conv-2": {"b1", "b2"}}) {
		t.Fatalf("redelivery: %v", byLite(again))
	}
	for _, d := range again {
		if d.LiteTopic == "conv-2" && d.Attempt != 2 {
			t.Fatalf("redelivery attempt %d", d.Attempt)
		}
	}
}

// Acknowledged positions survive a crash (they are in the lite journal);
// what was in flight goes out again.
func TestLiteStateSurvivesCrash(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	e.sendLite("chat", "conv-1", "a1", "a2")
	e.sendLite("chat", "conv-2", "b1")
	if err := e.sync("c1", "g", "chat", lite.CompleteAdd, "conv-1", "conv-2"); err != nil {
		t.Fatal(err)
	}
	got := e.liteReceive("c1", "g", "chat", 32)
	for _, d := range got {
		if d.LiteTopic == "conv-1" {
			e.ack("g", "chat", d)
		}
	}
	e.sendLite("chat", "conv-1", "a3")
	e.crash()
	// Subscriptions are the clients' to send again (every 30 s upstream).
	if err := e.sync("c1", "g", "chat", lite.CompleteAdd, "conv-1", "conv-2"); err != nil {
		t.Fatal(err)
	}
	after := e.liteReceive("c1", "g", "chat", 32)
	if fmt.Sprint(byLite(after)) != fmt.Sprint(map[string][]string{"conv-1": {"a3"}, "conv-2": {"b1"}}) {
		t.Fatalf("after the crash: %v", byLite(after))
	}
	page, err := e.b.LiteTopics(e.ctx, "chat", "", "", 10)
	if err != nil || page.Total != 2 {
		t.Fatalf("lite topics after the crash: %+v %v", page, err)
	}
}

func TestLiteQuotasAndNames(t *testing.T) {
	e := &env{t: t}
	*e = *newEnv(t)
	e.close()
	e.b = nil
	e.openWith(func(c *Config) { c.Lite.TopicQuota = 2; c.Lite.SubscriptionQuota = 2 })
	t.Cleanup(func() {
		if e.b != nil {
			e.close()
		}
	})
	e.liteTopic("chat", 0)
	e.topic("plain", model.TopicNormal)
	e.group("g", 0, false)
	e.sendLite("chat", "x", "1")
	e.sendLite("chat", "y", "1")
	e.sendLite("chat", "x", "2") // existing lite topics stay open
	_, err := e.b.Send(e.ctx, "chat", []*model.Message{{Topic: "chat", LiteTopic: "z", ID: "z1", Body: []byte("1")}}, model.Producer{})
	if mqerr.KindOf(err) != mqerr.KindLiteTopicQuota {
		t.Fatalf("third lite topic: %v", err)
	}
	for _, bad := range []string{"has space", "slash/no", string(make([]byte, 65))} {
		_, err := e.b.Send(e.ctx, "chat", []*model.Message{{Topic: "chat", LiteTopic: bad, ID: "b", Body: []byte("1")}}, model.Producer{})
		if mqerr.KindOf(err) != mqerr.KindIllegalLiteTopic {
			t.Fatalf("lite topic %q: %v", bad, err)
		}
		if err := e.sync("c1", "g", "chat", lite.PartialAdd, bad); mqerr.KindOf(err) != mqerr.KindIllegalLiteTopic {
			t.Fatalf("subscribe %q: %v", bad, err)
		}
	}
	// LITE messages go to LITE topics only, and LITE topics take only them.
	if _, err := e.b.Send(e.ctx, "plain", []*model.Message{{Topic: "plain", LiteTopic: "x", ID: "p", Body: []byte("1")}}, model.Producer{}); mqerr.KindOf(err) != mqerr.KindMessageTypeConflict {
		t.Fatalf("lite message to a NORMAL topic: %v", err)
	}
	if _, err := e.b.Send(e.ctx, "chat", []*model.Message{{Topic: "chat", ID: "n", Body: []byte("1")}}, model.Producer{}); mqerr.KindOf(err) != mqerr.KindMessageTypeConflict {
		t.Fatalf("plain message to a LITE topic: %v", err)
	}
	if err := e.sync("c1", "g", "plain", lite.PartialAdd, "x"); mqerr.KindOf(err) != mqerr.KindBadRequest {
		t.Fatalf("subscribing lite topics of a NORMAL topic: %v", err)
	}
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "c"); mqerr.KindOf(err) != mqerr.KindLiteSubscriptionQuota {
		t.Fatalf("third subscription: %v", err)
	}
	if err := e.sync("c1", "g", "chat", lite.CompleteAdd, "a", "b", "c"); mqerr.KindOf(err) != mqerr.KindLiteSubscriptionQuota {
		t.Fatalf("full set over the quota: %v", err)
	}
	// Remove one, then there is room.
	if err := e.sync("c1", "g", "chat", lite.PartialRemove, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "c"); err != nil {
		t.Fatal(err)
	}
}

func (e *env) openWith(f func(*Config)) {
	e.t.Helper()
	e.open()
	cfg := e.b.cfg
	e.close()
	f(&cfg)
	e.openCfg(cfg)
}

// Where a new subscription starts: by default at the oldest message kept;
// with a start position where it says.
func TestLiteStartPositions(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	e.sendLite("chat", "conv", "m0", "m1", "m2", "m3")
	cases := []struct {
		client string
		start  lite.Start
		want   []string
	}{
		{"default", lite.Start{}, []string{"m0", "m1", "m2", "m3"}},
		{"last", lite.Start{Kind: lite.StartLast}, nil},
		{"offset", lite.Start{Kind: lite.StartOffset, Value: 2}, []string{"m2", "m3"}},
		{"first", lite.Start{Kind: lite.StartFirst}, []string{"m0", "m1", "m2", "m3"}},
	}
	for i, c := range cases {
		group := fmt.Sprintf("g%d", i)
		e.group(group, 0, false)
		if err := e.b.SyncLiteSubscription(e.ctx, LiteSyncRequest{ClientID: c.client, Group: group, Topic: "chat", Action: lite.PartialAdd, Lites: []string{"conv"}, Start: c.start}); err != nil {
			t.Fatal(err)
		}
		got := byLite(e.liteReceive(c.client, group, "chat", 32))["conv"]
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.client, got, c.want)
		}
	}
	// tail_n goes n messages back from where the group is.
	ds := e.liteReceive("default", "g0", "chat", 32)
	if len(ds) != 0 {
		t.Fatalf("run in flight delivered again: %v", byLite(ds))
	}
	e.clk.Advance(31 * time.Second)
	ds = e.liteReceive("default", "g0", "chat", 32)
	e.ack("g0", "chat", ds...)
	if err := e.b.SyncLiteSubscription(e.ctx, LiteSyncRequest{ClientID: "default2", Group: "g0", Topic: "chat", Action: lite.PartialAdd,
		Lites: []string{"conv"}, Start: lite.Start{Kind: lite.StartTailN, Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := byLite(e.liteReceive("default2", "g0", "chat", 32))["conv"]; !slices.Equal(got, []string{"m3"}) {
		t.Errorf("tail 1: got %v", got)
	}
}

// An idle lite topic expires after its parent's TTL: it is gone from the
// views, and every client subscribed to it is told.
func TestLiteExpiryNotifiesSubscribers(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var notices []lite.Unsubscribed
	e.b.SetLiteNotifier(func(n lite.Unsubscribed) {
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	})
	e.liteTopic("chat", time.Minute)
	e.group("g", 0, false)
	e.sendLite("chat", "old", "1")
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "old", "fresh"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(50 * time.Second)
	e.sendLite("chat", "fresh", "1")
	e.clk.Advance(20 * time.Second) // old: 70 s idle, fresh: 20 s
	e.b.ExpireLiteTopics()
	mu.Lock()
	got := fmt.Sprint(notices)
	mu.Unlock()
	if want := fmt.Sprint([]lite.Unsubscribed{{ClientID: "c1", Group: "g", Parent: "chat", Lite: "old"}}); got != want {
		t.Fatalf("notices %s, want %s", got, want)
	}
	page, err := e.b.LiteTopics(e.ctx, "chat", "", "", 10)
	if err != nil || page.Total != 1 || page.Topics[0].Name != "fresh" {
		t.Fatalf("after expiry: %+v %v", page, err)
	}
	// Expired stays expired after a restart: the rule reads store times.
	e.restart()
	page, _ = e.b.LiteTopics(e.ctx, "chat", "", "", 10)
	if page.Total != 1 || page.Topics[0].Name != "fresh" {
		t.Fatalf("after restart: %+v", page)
	}
	// A message to an expired name starts a new lite topic with only it.
	e.sendLite("chat", "old", "2")
	if err := e.sync("c2", "g", "chat", lite.PartialAdd, "old"); err != nil {
		t.Fatal(err)
	}
	if got := byLite(e.liteReceive("c2", "g", "chat", 32))["old"]; !slices.Equal(got, []string{"2"}) {
		t.Fatalf("reborn lite topic delivered %v", got)
	}
	e.restart()
	page, _ = e.b.LiteTopics(e.ctx, "chat", "", "old", 10)
	if len(page.Topics) != 0 {
		t.Fatalf("paging after %q: %+v", "old", page)
	}
	page, _ = e.b.LiteTopics(e.ctx, "chat", "ol", "", 10)
	if len(page.Topics) != 1 || page.Topics[0].MaxOffset-page.Topics[0].MinOffset != 1 {
		t.Fatalf("reborn lite topic after restart: %+v", page)
	}
}

// Sends to one lite topic from many goroutines while a consumer receives
// and acknowledges: every message comes once, in the order of the parent
// queue (a receive never passes a message whose send has not returned
// yet).
func TestLiteConcurrentSendsKeepOrder(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "conv"); err != nil {
		t.Fatal(err)
	}
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("s%d-%d", s, i)
				if _, err := e.b.Send(e.ctx, "chat", []*model.Message{{Topic: "chat", LiteTopic: "conv", ID: id, Body: []byte(id)}}, model.Producer{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	last := int64(-1)
	perSender := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < senders*each && time.Now().Before(deadline) {
		got, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "chat", ClientID: "c1", Max: 7, Invisible: 30 * time.Second, QueueID: -1})
		if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
			t.Fatal(err)
		}
		for _, d := range got {
			if seen[d.ID] || d.QueueOffset <= last {
				t.Fatalf("%s at offset %d after offset %d (seen before: %v)", d.ID, d.QueueOffset, last, seen[d.ID])
			}
			seen[d.ID], last = true, d.QueueOffset
			var s, i int
			fmt.Sscanf(d.ID, "s%d-%d", &s, &i)
			key := fmt.Sprint(s)
			if i != perSender[key] {
				t.Fatalf("sender %d's message %d came after %d", s, i, perSender[key]-1)
			}
			perSender[key]++
		}
		e.ack("g", "chat", got...)
	}
	wg.Wait()
	if len(seen) != senders*each {
		t.Fatalf("received %d of %d", len(seen), senders*each)
	}
}

// Past the group's max attempts a lite message goes to the group's
// dead-letter topic and the lite topic moves on; a consumer can forward
// one there itself.
func TestLiteDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 2, false)
	e.sendLite("chat", "conv", "m1", "m2")
	e.sendLite("chat", "other", "o1")
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "conv"); err != nil {
		t.Fatal(err)
	}
	first := e.liteReceive("c1", "g", "chat", 1) // m1 only
	if fmt.Sprint(byLite(first)) != fmt.Sprint(map[string][]string{"conv": {"m1"}}) {
		t.Fatalf("first: %v", byLite(first))
	}
	e.clk.Advance(31 * time.Second)
	second := e.liteReceive("c1", "g", "chat", 1)
	if len(second) != 1 || string(second[0].Body) != "m1" || second[0].Attempt != 2 {
		t.Fatalf("second: %s attempt %d", second[0].Body, second[0].Attempt)
	}
	e.clk.Advance(31 * time.Second)
	// Attempt 3 > 2: m1 is dead-lettered, m2 goes out in its place.
	third := e.liteReceive("c1", "g", "chat", 1)
	if len(third) != 1 || string(third[0].Body) != "m2" || third[0].Attempt != 1 {
		t.Fatalf("third: %+v", third)
	}
	// A consumer forwards o1 itself.
	if err := e.sync("c2", "g", "chat", lite.PartialAdd, "other"); err != nil {
		t.Fatal(err)
	}
	o := e.liteReceive("c2", "g", "chat", 1)
	if len(o) != 1 || string(o[0].Body) != "o1" {
		t.Fatalf("other: %+v", o)
	}
	if err := e.b.ForwardToDLQ(e.ctx, "g", "chat", o[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	_, written := e.store.LogRange()
	if err := e.store.WaitDispatched(e.ctx, written); err != nil {
		t.Fatal(err)
	}
	page, err := e.b.DeadLetters(e.ctx, "g", 10)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range page.Messages {
		bodies = append(bodies, string(m.Body))
		if m.DLQOriginTopic != "chat" {
			t.Fatalf("dead letter from %q", m.DLQOriginTopic)
		}
	}
	if fmt.Sprint(bodies) != "[m1 o1]" {
		t.Fatalf("dead letters %v", bodies)
	}
	// Neither comes back.
	e.ack("g", "chat", third...)
	e.clk.Advance(time.Minute)
	if more := e.liteReceive("c1", "g", "chat", 32); len(more) != 0 {
		t.Fatalf("after dead-lettering: %v", byLite(more))
	}
}

// A parked lite receive wakes when a message of a lite topic it
// subscribes to is sent, when a run of one is acknowledged, and when its
// subscription changes (the clock is fake: nothing else ends the wait).
func TestLiteParkedReceiveWakes(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "conv"); err != nil {
		t.Fatal(err)
	}
	var base int
	park := func() chan []*model.Delivered {
		base = e.clk.Timers()
		ch := make(chan []*model.Delivered, 1)
		go func() {
			got, err := e.b.Receive(e.ctx, ReceiveRequest{Group: "g", Topic: "chat", ClientID: "c1", Max: 32, Invisible: 30 * time.Second, Wait: time.Hour, QueueID: -1})
			if err != nil {
				t.Error(err)
			}
			ch <- got
		}()
		return ch
	}
	awaitParked := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for e.clk.Timers() <= base && time.Now().Before(deadline) {
			select {
			case <-e.clk.Changed():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	ch := park()
	awaitParked()
	e.sendLite("chat", "conv", "m1")
	first := <-ch
	if fmt.Sprint(byLite(first)) != fmt.Sprint(map[string][]string{"conv": {"m1"}}) {
		t.Fatalf("woken with %v", byLite(first))
	}
	e.sendLite("chat", "conv", "m2") // waits for m1's ack
	ch = park()
	awaitParked()
	e.ack("g", "chat", first...)
	if got := <-ch; fmt.Sprint(byLite(got)) != fmt.Sprint(map[string][]string{"conv": {"m2"}}) {
		t.Fatalf("after the ack: %v", byLite(got))
	}
	e.sendLite("chat", "other", "o1")
	ch = park()
	awaitParked()
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "other"); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; fmt.Sprint(byLite(got)) != fmt.Sprint(map[string][]string{"other": {"o1"}}) {
		t.Fatalf("after subscribing: %v", byLite(got))
	}
}

// A message acknowledged out of order stays acknowledged when its run
// expires: only the others go out again.
func TestLiteOutOfOrderAckSurvivesRedelivery(t *testing.T) {
	e := newEnv(t)
	e.liteTopic("chat", 0)
	e.group("g", 0, false)
	e.sendLite("chat", "conv", "m1", "m2", "m3")
	if err := e.sync("c1", "g", "chat", lite.PartialAdd, "conv"); err != nil {
		t.Fatal(err)
	}
	got := e.liteReceive("c1", "g", "chat", 32)
	if len(got) != 3 {
		t.Fatalf("received %v", byLite(got))
	}
	e.ack("g", "chat", got[1])
	page, _ := e.b.LiteTopics(e.ctx, "chat", "", "", 1)
	if g := page.Topics[0].Groups[0]; g.Ready != 0 || g.InFlight != 2 {
		t.Fatalf("backlog %+v", g)
	}
	e.clk.Advance(31 * time.Second)
	again := e.liteReceive("c1", "g", "chat", 32)
	if fmt.Sprint(byLite(again)) != fmt.Sprint(map[string][]string{"conv": {"m1", "m3"}}) {
		t.Fatalf("redelivered %v", byLite(again))
	}
	e.ack("g", "chat", again...)
	page, _ = e.b.LiteTopics(e.ctx, "chat", "", "", 1)
	if g := page.Topics[0].Groups[0]; g.Ready != 0 || g.InFlight != 0 || g.Consumed != 3 {
		t.Fatalf("backlog after the acks %+v", g)
	}
}
