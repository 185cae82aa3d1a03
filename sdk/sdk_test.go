package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/sdk"
)

// These tests run against the real mqgate process TestMain started.

func dial(t *testing.T) *sdk.Client {
	t.Helper()
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sdk.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func newProducer(t *testing.T, ctx context.Context, c *sdk.Client, cfg sdk.ProducerConfig) *sdk.Producer {
	t.Helper()
	p, err := c.NewProducer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newConsumer starts a consumer of group on topic (every tag unless
// given) that waits up to 5 s for messages.
func newConsumer(t *testing.T, ctx context.Context, c *sdk.Client, group, topic string, tag ...string) *sdk.SimpleConsumer {
	t.Helper()
	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: group, Subscriptions: map[string]string{topic: strings.Join(tag, "||")}, Await: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

func TestSendReceiveAckChangeInvisible(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{Topics: []string{"sdk-e2e"}})
	sent := map[string]string{}
	for i := 0; i < 3; i++ {
		body := fmt.Sprintf("message %d", i)
		r, err := p.Send(ctx, &sdk.Message{Topic: "sdk-e2e", Body: []byte(body), Tag: "t1", Keys: []string{"k" + fmt.Sprint(i)},
			Properties: map[string]string{"n": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.MessageID) != 34 {
			t.Fatalf("message id %q", r.MessageID)
		}
		sent[r.MessageID] = body
	}
	cons := newConsumer(t, ctx, c, "sdk-e2e-g", "sdk-e2e", "t1")
	var got []*sdk.ReceivedMessage
	for len(got) < 3 {
		ms, err := cons.Receive(ctx, 32, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("no message within Await; got %d of 3", len(got))
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if sent[m.ID] != string(m.Body) || m.Tag != "t1" || len(m.Keys) != 1 || m.Properties["n"] == "" || m.DeliveryAttempt != 1 ||
			m.ReceiptHandle == "" || m.Topic != "sdk-e2e" || m.StoreTime.IsZero() || m.InvisibleDuration != 20*time.Second {
			t.Fatalf("received %+v", m)
		}
	}

	// Extend one, then ack it with the NEW handle; the old one is refused.
	m := got[0]
	old := m.ReceiptHandle
	if err := cons.ChangeInvisibleDuration(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	if m.ReceiptHandle == old || m.InvisibleDuration != time.Minute {
		t.Fatalf("handle not replaced: %+v", m)
	}
	stale := *m
	stale.ReceiptHandle = old
	if err := cons.Ack(ctx, &stale); !errors.Is(err, sdk.ErrInvalidReceiptHandle) {
		t.Fatalf("ack with the superseded handle: %v, want ErrInvalidReceiptHandle", err)
	}
	for _, m := range got {
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatalf("ack %s: %v", m.ID, err)
		}
	}
	// Nothing is left for the group.
	short := testContext(t, 1500*time.Millisecond)
	if ms, err := cons.Receive(short, 32, 20*time.Second); err != nil || len(ms) != 0 {
		t.Fatalf("after acking everything: %d messages, %v", len(ms), err)
	}
}

// Ack failures are returned, not swallowed (the official Go client's
// SimpleConsumer.Ack returns nil whatever the server said).
func TestAckFailureIsReturned(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{})
	if _, err := p.Send(ctx, &sdk.Message{Topic: "sdk-ackfail", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	cons := newConsumer(t, ctx, c, "sdk-ackfail-g", "sdk-ackfail")
	ms, err := cons.Receive(ctx, 1, 10*time.Second)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %d %v", len(ms), err)
	}
	if err := cons.Ack(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	// Acking twice, and acking a forged handle, are refused with
	// INVALID_RECEIPT_HANDLE.
	err = cons.Ack(ctx, ms[0])
	var se *sdk.StatusError
	if !errors.Is(err, sdk.ErrInvalidReceiptHandle) || !errors.As(err, &se) || se.Op != "AckMessage" || se.Message == "" {
		t.Fatalf("second ack: %v", err)
	}
	forged := *ms[0]
	forged.ReceiptHandle = "r1.not-a-handle"
	if err := cons.Ack(ctx, &forged); !errors.Is(err, sdk.ErrInvalidReceiptHandle) {
		t.Fatalf("forged handle: %v", err)
	}
	errs, err := cons.AckHandles(ctx, "sdk-ackfail", "bogus-1", "bogus-2")
	if err != nil || len(errs) != 2 || !errors.Is(errs[0], sdk.ErrInvalidReceiptHandle) || !errors.Is(errs[1], sdk.ErrInvalidReceiptHandle) {
		t.Fatalf("AckHandles: %v %v", errs, err)
	}
	// A wrong topic is the request's error.
	if _, err := cons.AckHandles(ctx, "bad topic!", "x"); sdk.CodeOf(err) != sdk.CodeIllegalTopic {
		t.Fatalf("illegal topic: %v", err)
	}
}

// A refusal is final: one attempt, ErrNotStored, the server's code.
func TestRefusedSendIsNotRetried(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{})
	// A FIFO message (message group) to a NORMAL topic.
	_, err := p.Send(ctx, &sdk.Message{Topic: "sdk-e2e", Body: []byte("x"), MessageGroup: "g1"})
	var se *sdk.SendError
	if !errors.Is(err, sdk.ErrNotStored) || !errors.Is(err, sdk.ErrMessageTypeConflict) || !errors.As(err, &se) || se.Attempts != 1 || se.MayBeStored() {
		t.Fatalf("err = %v", err)
	}
	_, err = p.Send(ctx, &sdk.Message{Topic: "sdk-e2e"})
	if sdk.CodeOf(err) != sdk.Code(41302) || !errors.Is(err, sdk.ErrNotStored) { // MESSAGE_BODY_EMPTY
		t.Fatalf("empty body: %v", err)
	}
}

// A batch goes to one queue, in order, one receipt per message.
func TestSendBatch(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{})
	var batch []*sdk.Message
	for i := 0; i < 5; i++ {
		batch = append(batch, &sdk.Message{Topic: "sdk-batch", Body: []byte(fmt.Sprint(i))})
	}
	rs, err := p.SendBatch(ctx, batch)
	if err != nil || len(rs) != 5 {
		t.Fatalf("%v %v", rs, err)
	}
	for i := 1; i < 5; i++ {
		if rs[i].Offset != rs[i-1].Offset+1 || rs[i].MessageID == rs[i-1].MessageID {
			t.Fatalf("receipts %+v", rs)
		}
	}
	if _, err := p.SendBatch(ctx, []*sdk.Message{{Topic: "a", Body: []byte("x")}, {Topic: "b", Body: []byte("x")}}); !errors.Is(err, sdk.ErrNotStored) {
		t.Fatalf("two topics: %v", err)
	}
}

// Close leaves no goroutine of the SDK (or of grpc's client) behind.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	needServer(t)
	base := runtime.NumGoroutine()
	ctx := testContext(t, 30*time.Second)
	c, err := sdk.Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, ctx, c, sdk.ProducerConfig{Topics: []string{"sdk-leak"}})
	if _, err := p.Send(ctx, &sdk.Message{Topic: "sdk-leak", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	cons := newConsumer(t, ctx, c, "sdk-leak-g", "sdk-leak")
	ms, err := cons.Receive(ctx, 1, 10*time.Second)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %d %v", len(ms), err)
	}
	if err := cons.Ack(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	if runtime.NumGoroutine() <= base {
		t.Fatal("the client started no goroutines: the check below would prove nothing")
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sdk.WaitGoroutines(t, base)
}

// SQLSubscriptions: receives carry the SQL92 expression; only the
// messages whose properties match arrive. A topic cannot have both kinds,
// and an empty expression is refused before anything is sent.
func TestSQLSubscription(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 30*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{Topics: []string{"sdk-sql"}})
	want := map[string]bool{}
	for i := 0; i < 6; i++ {
		r, err := p.Send(ctx, &sdk.Message{Topic: "sdk-sql", Body: []byte(fmt.Sprint("m", i)), Tag: []string{"x", "y"}[i%2],
			Properties: map[string]string{"n": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i >= 2 && i%2 == 0 {
			want[r.MessageID] = true
		}
	}
	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: "sdk-sql-g", SQLSubscriptions: map[string]string{"sdk-sql": "n >= 2 AND TAGS = 'x'"},
		Await: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got []*sdk.ReceivedMessage
	for len(got) < len(want) {
		ms, err := cons.Receive(ctx, 32, 20*time.Second)
		if err != nil || len(ms) == 0 {
			t.Fatalf("receive: %d messages, %v; got %d of %d", len(ms), err, len(got), len(want))
		}
		got = append(got, ms...)
	}
	for _, m := range got {
		if !want[m.ID] {
			t.Fatalf("received %s (%q, tag %q, %v), which the filter does not match", m.ID, m.Body, m.Tag, m.Properties)
		}
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("received %d, want %d", len(got), len(want))
	}
	short := testContext(t, 1500*time.Millisecond)
	if ms, err := cons.Receive(short, 32, 20*time.Second); err != nil || len(ms) != 0 {
		t.Fatalf("after the matching messages: %d messages, %v", len(ms), err)
	}
	for name, cfg := range map[string]sdk.ConsumerConfig{
		"both kinds": {Group: "g", Subscriptions: map[string]string{"t": "*"}, SQLSubscriptions: map[string]string{"t": "a > 1"}},
		"empty sql":  {Group: "g", SQLSubscriptions: map[string]string{"t": " "}},
	} {
		if _, err := c.NewSimpleConsumer(ctx, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A lingering producer against mqgate: every message given to SendAsync
// is stored with its own receipt; a message the server refuses (a tag
// with '|') fails alone, its batch-mates are stored; FIFO messages of
// two groups are received by a FIFO group in each group's send order.
func TestLingeringProducerAgainstMqgate(t *testing.T) {
	c := dial(t)
	ctx := testContext(t, 60*time.Second)
	p := newProducer(t, ctx, c, sdk.ProducerConfig{Linger: 5 * time.Millisecond, BatchMessages: 16})
	type outcome struct {
		r   sdk.SendReceipt
		err error
	}
	var mu sync.Mutex
	got := map[string]outcome{}
	send := func(m *sdk.Message) {
		p.SendAsync(ctx, m, func(r sdk.SendReceipt, err error) {
			mu.Lock()
			got[m.ID] = outcome{r, err}
			mu.Unlock()
		})
	}
	for i := range 100 {
		m := &sdk.Message{Topic: "sdk-linger", Body: []byte(fmt.Sprint(i)), ID: sdk.NewMessageID()}
		if i == 37 {
			m.Tag = "a|b"
		}
		send(m)
	}
	// FIFO: two groups interleaved, each group's messages numbered.
	for i := range 40 {
		g := fmt.Sprintf("g%d", i%2)
		send(&sdk.Message{Topic: "sdk-linger-fifo", Body: []byte(fmt.Sprintf("%s-%02d", g, i/2)), MessageGroup: g, ID: sdk.NewMessageID()})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 140 {
		t.Fatalf("%d outcomes, want 140", len(got))
	}
	failed := 0
	for id, o := range got {
		if o.err != nil {
			failed++
			if !errors.Is(o.err, sdk.ErrNotStored) || sdk.CodeOf(o.err) != sdk.Code(40004) {
				t.Errorf("%s: %v, want ErrNotStored with ILLEGAL_MESSAGE_TAG (40004)", id, o.err)
			}
			continue
		}
		if o.r.MessageID != id {
			t.Errorf("receipt %+v for message %s", o.r, id)
		}
	}
	mu.Unlock()
	if failed != 1 {
		t.Fatalf("%d sends failed, want the bad tag's alone", failed)
	}
	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: "sdk-linger-fifo-g", Subscriptions: map[string]string{"sdk-linger-fifo": "*"}, Await: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for n := 0; n < 40; {
		ms, err := cons.Receive(ctx, 16, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			var g string
			var k int
			if _, err := fmt.Sscanf(string(m.Body), "g%1s-%02d", &g, &k); err != nil {
				t.Fatalf("body %q: %v", m.Body, err)
			}
			if k != next[g] {
				t.Fatalf("group g%s: message %d received after %d, want %d", g, k, next[g]-1, next[g])
			}
			next[g]++
			n++
			if err := cons.Ack(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
}
