package e2e

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

type consumed struct {
	consumer int
	id, body string
	attempt  int32
	at       time.Time
}

// Two official PushConsumers of one group (QueryAssignment: one "any
// queue" assignment each, auto-renewed receives) share N messages; in a
// run without failures each is consumed exactly once.
func TestPushConsumersShareWorkEachOnce(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("push"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "4")
	cli(t, p, "group", "create", group)
	log := newEvents[consumed]()
	newPushConsumers(t, p, 2, group, topic, func(ci int, mv *rmq.MessageView) rmq.ConsumerResult {
		log.add(consumed{ci, mv.GetMessageId(), string(mv.GetBody()), mv.GetDeliveryAttempt(), time.Now()})
		return rmq.SUCCESS
	})
	// Send in rounds until both consumers have had work (each starts
	// polling about 1 s after Start, when it first asks for assignments)
	// and at least 60 messages went out.
	pr := newProducer(t, p, topic)
	sent := map[string]string{}
	for round := 0; ; round++ {
		maps.Copy(sent, sendBodies(t, pr, topic, 10, fmt.Sprint("r", round)))
		l, ok := log.await(30*time.Second, func(l []consumed) bool { return len(l) >= len(sent) })
		if !ok {
			t.Fatalf("consumed %d of %d", len(l), len(sent))
		}
		busy := map[int]bool{}
		for _, c := range l {
			busy[c.consumer] = true
		}
		if len(sent) >= 60 && len(busy) == 2 {
			break
		}
		if round == 30 {
			t.Fatalf("after %d messages one push consumer still did all the work", len(sent))
		}
	}
	// Acks are sent after the listener returns; a lost or late ack would
	// come back as a redelivery — give duplicates a moment to appear.
	l, _ := log.await(2*time.Second, func(l []consumed) bool { return len(l) > len(sent) })
	per := map[int]int{}
	seen := map[string]bool{}
	for _, c := range l {
		if seen[c.id] {
			t.Fatalf("message %s consumed twice", c.id)
		}
		seen[c.id] = true
		if sent[c.id] != c.body || c.attempt != 1 {
			t.Fatalf("consumed %+v (sent %q)", c, sent[c.id])
		}
		per[c.consumer]++
	}
	if len(seen) != len(sent) {
		t.Fatalf("consumed %d distinct of %d", len(seen), len(sent))
	}
	t.Logf("%d messages, per push consumer: %v", len(sent), per)
}

// A listener FAILURE is retried after the group's backoff (customized: 1 s
// after the first attempt, 5 s after the second); a message that always
// fails is consumed max-delivery-attempts (2) times and then lands in
// %DLQ%<group>, never delivered again.
func TestPushConsumerRetryThenDeadLetter(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group, reader := uniq("push-retry"), uniq("g"), uniq("dlq-reader")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "group", "create", group, "--max-delivery-attempts", "2")
	cli(t, p, "group", "create", reader)
	log := newEvents[consumed]()
	newPushConsumers(t, p, 1, group, topic, func(_ int, mv *rmq.MessageView) rmq.ConsumerResult {
		body := string(mv.GetBody())
		log.add(consumed{0, mv.GetMessageId(), body, mv.GetDeliveryAttempt(), time.Now()})
		switch {
		case strings.HasPrefix(body, "poison"):
			return rmq.FAILURE
		case strings.HasPrefix(body, "flaky") && mv.GetDeliveryAttempt() == 1:
			return rmq.FAILURE
		}
		return rmq.SUCCESS
	})
	pr := newProducer(t, p, topic)
	ids := map[string]string{}
	for _, body := range []string{"ok-1", "flaky", "poison", "ok-2"} {
		ids[body] = send(t, pr, &rmq.Message{Topic: topic, Body: []byte(body)}).MessageID
	}
	attemptsOf := func(l []consumed, body string) []consumed {
		var out []consumed
		for _, c := range l {
			if c.body == body {
				out = append(out, c)
			}
		}
		return out
	}
	l, ok := log.await(30*time.Second, func(l []consumed) bool {
		return len(attemptsOf(l, "flaky")) >= 2 && len(attemptsOf(l, "poison")) >= 2
	})
	if !ok {
		t.Fatalf("consumption log %+v", l)
	}
	for _, body := range []string{"flaky", "poison"} {
		a := attemptsOf(l, body)
		if a[0].attempt != 1 || a[1].attempt != 2 {
			t.Fatalf("%s consumed with attempts %d, %d", body, a[0].attempt, a[1].attempt)
		}
		// The client nacks with the first step of the group's schedule.
		if gap := a[1].at.Sub(a[0].at); gap < time.Second-slack || gap > time.Second+3*time.Second {
			t.Fatalf("%s retried after %s, want about 1 s (customized backoff step 1)", body, gap)
		}
	}
	// The poison message's second failure is its last attempt: it goes to
	// the dead-letter queue when it comes due again (5 s later) instead of
	// a third delivery.
	r := dialRaw(t, p)
	dlq := "%DLQ%" + group
	var dead []*pb.Message
	for deadline := time.Now().Add(30 * time.Second); len(dead) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the poison message never reached %s; consumption log %+v", dlq, log.snapshot())
		}
		route, err := r.c.QueryRoute(r.ctx(10*time.Second), &pb.QueryRouteRequest{Topic: res(dlq), Endpoints: endpointsOf(t, p)})
		if err != nil {
			t.Fatal(err)
		}
		if route.Status.Code != pb.Code_OK {
			time.Sleep(200 * time.Millisecond) // the DLQ topic is created on first use; nothing to await
			continue
		}
		st, msgs := r.receiveRaw(r.id, recvReq(reader, dlq, 32, time.Minute), 5*time.Second)
		if st.GetCode() != pb.Code_OK && st.GetCode() != pb.Code_MESSAGE_NOT_FOUND {
			t.Fatalf("DLQ receive: %v", st)
		}
		dead = msgs
	}
	if len(dead) != 1 || dead[0].GetSystemProperties().GetMessageId() != ids["poison"] || string(dead[0].Body) != "poison" {
		t.Fatalf("DLQ holds %v, want only the poison message", dead)
	}
	if dl := dead[0].GetSystemProperties().GetDeadLetterQueue(); dl.GetTopic() != topic || dl.GetMessageId() != ids["poison"] {
		t.Fatalf("dead_letter_queue info %v", dl)
	}
	l, _ = log.await(time.Second, func(l []consumed) bool { return len(attemptsOf(l, "poison")) > 2 })
	if n := len(attemptsOf(l, "poison")); n != 2 {
		t.Fatalf("poison consumed %d times with max delivery attempts 2", n)
	}
	for _, body := range []string{"ok-1", "ok-2"} {
		if n := len(attemptsOf(l, body)); n != 1 {
			t.Fatalf("%s consumed %d times", body, n)
		}
	}
	if n := len(attemptsOf(l, "flaky")); n != 2 {
		t.Fatalf("flaky consumed %d times", n)
	}
}

// A FIFO group's push consumers (Settings say fifo: the client picks its
// FIFO consume service; QueryAssignment hands out one assignment per
// queue) see each message group in order, one message of a group at a
// time across both consumers; a failed message is retried before its
// successors.
func TestPushConsumersFIFO(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, group := uniq("push-fifo"), uniq("fg")
	cli(t, p, "topic", "create", topic, "--type", "FIFO", "--queues", "2")
	cli(t, p, "group", "create", group, "--fifo")
	const perGroup = 10
	mgs := []string{"a", "b", "c"}
	var (
		mu         sync.Mutex
		next       = map[string]int{}
		busy       = map[string]bool{}
		failedOnce = false
		violations []string
	)
	log := newEvents[consumed]()
	newPushConsumers(t, p, 2, group, topic, func(ci int, mv *rmq.MessageView) rmq.ConsumerResult {
		var g string
		var seq int
		fmt.Sscanf(string(mv.GetBody()), "%1s-%d", &g, &seq)
		mu.Lock()
		if busy[g] {
			violations = append(violations, fmt.Sprintf("%s-%d consumed while another message of %s is being consumed", g, seq, g))
		}
		if seq != next[g] {
			violations = append(violations, fmt.Sprintf("%s-%d consumed (attempt %d) when %s-%d was next", g, seq, mv.GetDeliveryAttempt(), g, next[g]))
		}
		busy[g] = true
		fail := g == "b" && seq == 3 && !failedOnce
		if fail {
			failedOnce = true
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond) // processing
		mu.Lock()
		busy[g] = false
		if !fail {
			next[g] = seq + 1
		}
		mu.Unlock()
		log.add(consumed{ci, mv.GetMessageId(), string(mv.GetBody()), mv.GetDeliveryAttempt(), time.Now()})
		if fail {
			return rmq.FAILURE
		}
		return rmq.SUCCESS
	})
	pr := newProducer(t, p, topic)
	for i := range perGroup {
		for _, g := range mgs {
			m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("%s-%d", g, i))}
			m.SetMessageGroup(g)
			send(t, pr, m)
		}
	}
	l, ok := log.await(60*time.Second, func(l []consumed) bool { return len(l) >= len(mgs)*perGroup+1 })
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("FIFO violated: %v", violations)
	}
	if !ok {
		t.Fatalf("consumed %d of %d (+1 retry); next per group %v", len(l), len(mgs)*perGroup, next)
	}
	for _, g := range mgs {
		if next[g] != perGroup {
			t.Fatalf("group %s stopped at %d", g, next[g])
		}
	}
	retried := 0
	for _, c := range l {
		if c.body == "b-3" {
			retried++
			if retried == 2 && c.attempt != 2 {
				t.Fatalf("b-3 retried with attempt %d", c.attempt)
			}
		}
	}
	if retried != 2 {
		t.Fatalf("b-3 consumed %d times, want 2 (one FAILURE, one retry)", retried)
	}
}
