package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// Three message groups × 20 messages on a one-queue FIFO topic, consumed
// by two SimpleConsumers of one FIFO group (`group create --fifo`):
//   - each message group arrives in send order, each message once;
//   - the next message of a group is never delivered while the previous
//     one is still unacknowledged (each consumer holds every message for a
//     while before acking, so a server that did not wait would hand the
//     successor to the other, polling consumer inside that window);
//   - one group is stuck — its first message is held unacknowledged — and
//     the other two groups, in the SAME queue, still run to completion
//     meanwhile (upstream RocketMQ would block the whole queue).
func TestFIFOMessageGroupsAcrossConsumers(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("fifo"), uniq("fg")
	cli(t, p, "topic", "create", topic, "--type", "FIFO", "--queues", "1")
	cli(t, p, "group", "create", group, "--fifo")
	pr := newProducer(t, p, topic)

	const perGroup = 20
	mgs := []string{"mg-a", "mg-b", "mg-stuck"}
	stuckGroup := mgs[2]
	type pos struct {
		group string
		seq   int
	}
	sent := map[string]pos{}
	for i := range perGroup {
		for _, g := range mgs {
			m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("%s/%d", g, i))}
			m.SetMessageGroup(g)
			sent[send(t, pr, m).MessageID] = pos{g, i}
		}
	}

	// Shared state of the two receive loops.
	var (
		mu         sync.Mutex
		next       = map[string]int{}    // next expected sequence per group
		unacked    = map[string]string{} // group → message received, ack not yet sent
		done       = map[string]int{}    // acked per group
		byConsumer = map[int]int{}
		stuck      *rmq.MessageView
		stuckAt    time.Time
		violations []string
		changed    = make(chan struct{})
	)
	signal := func() { close(changed); changed = make(chan struct{}) } // mu held
	r := dialRaw(t, p)
	const hold = 30 * time.Millisecond // "processing" before each ack
	const invisible = 40 * time.Second

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for ci := range 2 {
		c := newConsumer(t, p, group, 2*time.Second, all(topic))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
				mvs, err := c.Receive(rctx, 32, invisible)
				rcancel()
				if err != nil {
					if ctx.Err() == nil && !isNoMessage(err) {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("consumer %d receive: %v", ci, err))
						signal()
						mu.Unlock()
					}
					continue
				}
				for _, mv := range mvs {
					at, ok := sent[mv.GetMessageId()]
					mu.Lock()
					byConsumer[ci]++
					switch {
					case !ok:
						violations = append(violations, "unknown message "+mv.GetMessageId())
					case unacked[at.group] != "":
						violations = append(violations, fmt.Sprintf("%s/%d delivered to consumer %d while %s was still unacknowledged",
							at.group, at.seq, ci, unacked[at.group]))
					case at.seq != next[at.group]:
						violations = append(violations, fmt.Sprintf("%s/%d delivered (attempt %d) when %s/%d was next",
							at.group, at.seq, mv.GetDeliveryAttempt(), at.group, next[at.group]))
					}
					next[at.group] = at.seq + 1
					unacked[at.group] = fmt.Sprintf("%s/%d", at.group, at.seq)
					if at.group == stuckGroup && at.seq == 0 {
						stuck, stuckAt = mv, time.Now() // held: acked by the test later
						signal()
						mu.Unlock()
						continue
					}
					mu.Unlock()
					time.Sleep(hold)
					mu.Lock()
					unacked[at.group] = "" // from here on the server may move on
					mu.Unlock()
					if st := r.ack(group, topic, mv.GetReceiptHandle()); st.GetCode() != pb.Code_OK {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("ack %s/%d: %v", at.group, at.seq, st))
						mu.Unlock()
					}
					mu.Lock()
					done[at.group]++
					signal()
					mu.Unlock()
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	await := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		for {
			mu.Lock()
			ok, v, ch := cond(), len(violations), changed
			mu.Unlock()
			if v > 0 {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("FIFO violated: %v", violations)
			}
			if ok {
				return
			}
			select {
			case <-ch:
			case <-deadline.C:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: not within %s (acked per group %v, next %v)", what, timeout, done, next)
			}
		}
	}
	// The two free groups finish while the third is stuck in the same
	// queue; the stuck group gets nothing more meanwhile.
	await("groups a and b complete while mg-stuck/0 is unacknowledged", 30*time.Second, func() bool {
		return stuck != nil && done["mg-a"] == perGroup && done["mg-b"] == perGroup
	})
	mu.Lock()
	if next[stuckGroup] != 1 || done[stuckGroup] != 0 {
		t.Fatalf("stuck group moved on: next %d, acked %d", next[stuckGroup], done[stuckGroup])
	}
	if held := time.Since(stuckAt); held >= invisible {
		t.Fatalf("the other groups took %s, longer than the stuck message's invisibility", held)
	}
	unacked[stuckGroup] = ""
	mu.Unlock()
	wantCode(t, "ack of the stuck message", r.ack(group, topic, stuck.GetReceiptHandle()), pb.Code_OK)
	mu.Lock()
	done[stuckGroup]++
	signal()
	mu.Unlock()
	await("the stuck group completes after its first message is acked", 30*time.Second, func() bool {
		return done[stuckGroup] == perGroup
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("FIFO violated: %v", violations)
	}
	total := byConsumer[0] + byConsumer[1]
	if total != len(sent) {
		t.Fatalf("%d deliveries for %d messages (duplicates)", total, len(sent))
	}
	if byConsumer[0] == 0 || byConsumer[1] == 0 {
		t.Fatalf("one consumer did all the work: %v", byConsumer)
	}
	t.Logf("deliveries per consumer %v", byConsumer)
}

// The FIFO gate survives kill -9: a message group whose message was in
// flight at the crash stays blocked after the restart until that message's
// invisibility ends; it is then redelivered (attempt 2) before its
// successors, which follow in order once it is acked. An acked group is
// not affected.
func TestFIFOAcrossKill9Restart(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group := uniq("fifo"), uniq("fg")
	cli(t, p, "topic", "create", topic, "--type", "FIFO", "--queues", "1")
	cli(t, p, "group", "create", group, "--fifo")
	pr := newProducer(t, p, topic)
	body := map[string]string{}
	for _, b := range []string{"a-0", "b-0", "a-1", "b-1", "a-2"} {
		m := &rmq.Message{Topic: topic, Body: []byte(b)}
		m.SetMessageGroup(b[:1])
		body[send(t, pr, m).MessageID] = b
	}
	c := newConsumer(t, p, group, 2*time.Second, all(topic))
	first := collect(t, c, 2, minInvisible, 30*time.Second, nil)
	t0 := time.Now()
	r := dialRaw(t, p)
	var got []string
	for _, mv := range first {
		got = append(got, body[mv.GetMessageId()])
		if body[mv.GetMessageId()] == "b-0" {
			wantCode(t, "ack b-0", r.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
		}
	}
	if len(got) != 2 || !(got[0] == "a-0" && got[1] == "b-0" || got[0] == "b-0" && got[1] == "a-0") {
		t.Fatalf("first deliveries %v, want a-0 and b-0 (one per message group)", got)
	}

	p.Kill9()
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	c2 := newConsumer(t, p2, group, 2*time.Second, all(topic))
	r2 := dialRaw(t, p2)
	var order []string
	deadline := time.Now().Add(minInvisible + 40*time.Second)
	for len(order) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart received %v", order)
		}
		for _, mv := range receive(t, c2, 32, minInvisible) {
			b := body[mv.GetMessageId()]
			order = append(order, b)
			switch {
			case b == "a-0":
				if mv.GetDeliveryAttempt() != 2 {
					t.Fatalf("a-0 redelivered with attempt %d", mv.GetDeliveryAttempt())
				}
				if since := time.Since(t0); since < minInvisible-slack {
					t.Fatalf("a-0 redelivered %s after its first delivery, before its invisibility ended", since)
				}
			case b == "a-1" || b == "a-2":
				if !slices.Contains(order, "a-0") {
					t.Fatalf("%s delivered before a-0 was redelivered and acked: %v", b, order)
				}
			}
			wantCode(t, "ack "+b, r2.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
		}
	}
	if want := []string{"a-0", "a-1", "a-2"}; !slices.Equal(slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s[0] != 'a' }), want) {
		t.Fatalf("group a after the restart: %v, want %v", order, want)
	}
	if !slices.Contains(order, "b-1") || slices.Contains(order, "b-0") {
		t.Fatalf("group b after the restart: %v (b-0 was acked before the crash)", order)
	}
	if extra := receive(t, c2, 32, minInvisible); len(extra) != 0 {
		t.Fatalf("more after everything was acked: %v", ids(extra))
	}
}
