package classic

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClassicResetOffsetWhileRunning: `mqgate group reset-offset --to
// earliest` while a classic push consumer of the group runs. The consumer
// keeps its offsets in memory and commits them every 5 s, so without
// RESET_CONSUMER_CLIENT_OFFSET from the server it would go on from where
// it was and write its old offsets over the reset. Told, it consumes every
// message again (after the Go client's own 10 s pause), exactly once more,
// and commits its progress from the new position.
//
// (A second member started after a shutdown is not used here to check the
// offsets: the Go client can re-register a shut-down instance through a
// heartbeat racing its shutdown, and the broker then counts it for up to
// the client expiry, holding half the queues.)
func TestClassicResetOffsetWhileRunning(t *testing.T) {
	e2e(t)
	p := start(t)
	topic, group := uniq("T"), uniq("CG")
	createTopic(t, p, topic, 4)
	pr := newProducer(t, p)
	ctx := ctxT(t, 90*time.Second)
	const n = 12
	var want []string
	for i := range n {
		body := fmt.Sprintf("reset-%02d", i)
		if r, err := pr.SendSync(ctx, primitive.NewMessage(topic, []byte(body))); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: %v %v", body, r, err)
		}
		want = append(want, body)
	}
	col := newCollector()
	newPushConsumer(t, p, group, topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	atLeast := func(k int) func() bool {
		return func() bool {
			for _, w := range want {
				if len(col.seen[w]) < k {
					return false
				}
			}
			return true
		}
	}
	col.wait(t, 45*time.Second, "every message once", atLeast(1))
	// The broker holds the group's progress before the reset (the client
	// commits every 5 s): what a stale commit would write back.
	waitCommitted(t, p, group, topic, 4, n, 30*time.Second)

	e2eutil.CLI(t, p.GRPC, "group", "reset-offset", group, "--topic", topic, "--to", "earliest")
	col.wait(t, 45*time.Second, "every message again after the reset", atLeast(2))

	col.mu.Lock()
	for _, w := range want {
		if k := len(col.seen[w]); k != 2 {
			col.mu.Unlock()
			t.Fatalf("%s consumed %d times, want 2 (once, and once after the reset)", w, k)
		}
	}
	col.mu.Unlock()

	// The member goes on committing from the new position: the broker
	// holds its progress through the replay (the end of every queue again).
	waitCommitted(t, p, group, topic, 4, n, 30*time.Second)
}
