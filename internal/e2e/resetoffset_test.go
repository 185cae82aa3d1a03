package e2e

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// TestResetOffsetWithOfficialClient: `mqgate group reset-offset` rewinds and
// skips a group that the official Go client consumes: to the earliest
// message (all again, first attempt), to a time (RFC 3339 and Unix ms:
// exactly what was stored from then on), to the latest (the backlog
// skipped, new messages still arrive); a reset holds across kill -9.
func TestResetOffsetWithOfficialClient(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dir})
	topic, group := uniq("reset"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "4")
	cli(t, p, "group", "create", group)
	pr := newProducer(t, p, topic)

	a := sendBodies(t, pr, topic, 10, "a")
	c := newConsumer(t, p, group, 0, all(topic))
	r := dialRaw(t, p)
	consumeExactly(t, c, r, group, topic, a, "before any reset")

	out := cli(t, p, "group", "reset-offset", group, "--topic", topic, "--to", "earliest")
	if n := strings.Count(out, "\n"); n < 4 {
		t.Fatalf("reset-offset printed %q, want a line per queue", out)
	}
	consumeExactly(t, c, r, group, topic, a, "after a reset to the earliest")

	// To a time: what was stored from then on, in both time forms.
	// from is a millisecond after everything stored so far (store times
	// are whole milliseconds of this machine's clock) and not after what
	// is sent next.
	from := time.UnixMilli(time.Now().UnixMilli() + 1)
	for time.Now().Before(from) {
	}
	b := sendBodies(t, pr, topic, 5, "b")
	consumeExactly(t, c, r, group, topic, b, "new messages")
	cli(t, p, "group", "reset-offset", group, "--topic", topic, "--to-time", from.UTC().Format(time.RFC3339Nano))
	consumeExactly(t, c, r, group, topic, b, "after a reset to an RFC 3339 time")
	cli(t, p, "group", "reset-offset", group, "--topic", topic, "--to-time", strconv.FormatInt(from.UnixMilli(), 10))
	consumeExactly(t, c, r, group, topic, b, "after a reset to a Unix ms time")

	// To the latest: the backlog is skipped, new messages arrive.
	sendBodies(t, pr, topic, 3, "skipped")
	cli(t, p, "group", "reset-offset", group, "--topic", topic, "--to", "latest")
	d := sendBodies(t, pr, topic, 2, "d")
	consumeExactly(t, c, r, group, topic, d, "after a reset to the latest")

	// Durable: reset to the earliest, kill -9, restart: everything again.
	cli(t, p, "group", "reset-offset", group, "--topic", topic, "--to", "earliest")
	p.Kill9()
	p2 := start(t, testutil.StartOptions{DataDir: dir})
	everything := map[string]string{}
	for _, m := range []map[string]string{a, b, d} {
		maps.Copy(everything, m)
	}
	c2 := newConsumer(t, p2, group, 0, all(topic))
	r2 := dialRaw(t, p2)
	got := consumeAll(t, c2, r2, group, topic, 20, "after a reset to the earliest and kill -9")
	for id, body := range everything {
		if got[id] != body {
			t.Fatalf("after a reset to the earliest and kill -9: message %s missing (got %d messages)", id, len(got))
		}
	}
	if len(got) != 20 {
		t.Fatalf("after a reset to the earliest and kill -9: %d messages, want 20 (10 a, 5 b, 3 skipped, 2 d)", len(got))
	}

	// One queue to an exact offset (skip all but its last message): only
	// that message comes again. The queue is one holding at least two.
	var desc struct {
		Queues []struct {
			QueueID   int32  `json:"queueId"`
			MaxOffset string `json:"maxOffset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(cli(t, p2, "topic", "describe", topic, "--json")), &desc); err != nil {
		t.Fatal(err)
	}
	q, last := int32(-1), int64(0)
	for _, qo := range desc.Queues {
		if m, _ := strconv.ParseInt(qo.MaxOffset, 10, 64); m >= 2 {
			q, last = qo.QueueID, m-1
			break
		}
	}
	if q < 0 {
		t.Fatalf("no queue holds two messages: %+v", desc)
	}
	cli(t, p2, "group", "reset-offset", group, "--topic", topic, "--queue", strconv.Itoa(int(q)), "--to-offset", strconv.FormatInt(last, 10))
	if got := consumeAll(t, c2, r2, group, topic, 1, "after a reset of one queue to its last offset"); len(got) != 1 {
		t.Fatalf("after a reset of queue %d to offset %d: %d messages, want 1", q, last, len(got))
	}
	if out, err := cliResult(t, p2, "group", "reset-offset", group, "--topic", topic, "--queue", strconv.Itoa(int(q)), "--to-offset", strconv.FormatInt(last+2, 10)); err == nil || !strings.Contains(out, "holds offsets") {
		t.Fatalf("reset past the queue's end: %v %q", err, out)
	}

	// Unknown group: the CLI fails with the server's message.
	if out, err := cliResult(t, p2, "group", "reset-offset", uniq("nope"), "--topic", topic, "--to", "latest"); err == nil || !strings.Contains(strings.ToLower(out), "group") {
		t.Fatalf("reset of an unknown group: %v %q", err, out)
	}
}

// consumeExactly receives and acks until want arrived, requires nothing
// else to arrive, and every delivery to be a first attempt.
func consumeExactly(t *testing.T, c rmq.SimpleConsumer, r *raw, group, topic string, want map[string]string, when string) {
	t.Helper()
	got := consumeAll(t, c, r, group, topic, len(want), when)
	if !maps.Equal(got, want) {
		t.Fatalf("%s: received %v, want %v", when, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// consumeAll receives and acks until n distinct messages arrived, then
// one more empty receive; it returns id → body.
func consumeAll(t *testing.T, c rmq.SimpleConsumer, r *raw, group, topic string, n int, when string) map[string]string {
	t.Helper()
	got := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d messages within 60 s, want %d", when, len(got), n)
		}
		mvs := receive(t, c, 32, 60*time.Second)
		if len(mvs) == 0 && len(got) >= n {
			return got
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			if _, dup := got[id]; dup {
				t.Fatalf("%s: message %s delivered twice", when, id)
			}
			if a := mv.GetDeliveryAttempt(); a != 1 {
				t.Fatalf("%s: message %s delivered with attempt %d, want 1", when, id, a)
			}
			got[id] = string(mv.GetBody())
			wantCode(t, when+": ack", r.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
		}
	}
}
