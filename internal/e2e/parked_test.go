package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// metric reads one unlabelled-or-not sample of a counter or gauge from
// /metrics (the first series of that name); -1 when absent.
func metric(t *testing.T, p *testutil.Proc, name string) int64 {
	t.Helper()
	body := []byte(e2eutil.ScrapeMetrics(t, p))
	m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\d+)`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// TestManyParkedConsumers: eight SimpleConsumers of one group and three
// of another long-poll one topic. Messages sent while they wait reach
// each group exactly once, and are spread over the group's consumers; an
// arrival wakes one parked receive of each group (which hands the wake
// on when it took a message), not every receive parked on the topic.
func TestManyParkedConsumers(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic := uniq("parked")
	cli(t, p, "topic", "create", topic, "--type", "NORMAL", "--queues", "4")
	groups := map[string]int{uniq("many"): 8, uniq("few"): 3}
	for g := range groups {
		cli(t, p, "group", "create", g)
	}
	pr := newProducer(t, p, topic)

	type take struct {
		group    string
		consumer int
		id       string
	}
	takes := make(chan take, 256)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	total := 0
	for g, n := range groups {
		total += n
		for i := range n {
			c := newConsumer(t, p, g, 5*time.Second, all(topic))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
					mvs, err := c.Receive(rctx, 4, 30*time.Second)
					rcancel()
					if err != nil {
						if ctx.Err() == nil && !isNoMessage(err) {
							t.Errorf("%s consumer %d: receive: %v", g, i, err)
							return
						}
						continue
					}
					for _, mv := range mvs {
						actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
						if err := c.Ack(actx, mv); err != nil {
							t.Errorf("%s consumer %d: ack: %v", g, i, err)
						}
						acancel()
						takes <- take{g, i, mv.GetMessageId()}
					}
				}
			}()
		}
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	testutil.Eventually(t, fmt.Sprintf("%d consumers parked", total), func() bool {
		return metric(t, p, "mqgate_polls_parked") == int64(total)
	})
	wokenBefore := metric(t, p, "mqgate_polls_woken_total")

	const messages = 40
	sent := sendBodies(t, pr, topic, messages, "")
	got := map[string]map[string]int{}     // group → id → deliveries
	byConsumer := map[string]map[int]int{} // group → consumer → messages
	for g := range groups {
		got[g], byConsumer[g] = map[string]int{}, map[int]int{}
	}
	timeout := time.After(60 * time.Second)
	for n := 0; n < messages*len(groups); n++ {
		select {
		case tk := <-takes:
			got[tk.group][tk.id]++
			byConsumer[tk.group][tk.consumer]++
		case <-timeout:
			t.Fatalf("after 60 s: %d of %d deliveries", n, messages*len(groups))
		}
	}
	for g := range groups {
		for id := range sent {
			if got[g][id] != 1 {
				t.Errorf("%s: message %s delivered %d times", g, id, got[g][id])
			}
		}
		if len(byConsumer[g]) < 2 {
			t.Errorf("%s: every message went to one consumer of %d: %v", g, groups[g], byConsumer[g])
		}
	}
	// Two wake-ups per message and group at most (the woken receive, and
	// the next one it hands the wake to); waking every parked receive
	// would be 11 per message.
	woken := metric(t, p, "mqgate_polls_woken_total") - wokenBefore
	if bound := int64(2*messages*len(groups) + 10); woken > bound {
		t.Errorf("%d parked receives woken for %d messages, want at most %d", woken, messages, bound)
	}
	t.Logf("%d messages to %d groups: %d wake-ups; per consumer %v", messages, len(groups), woken, byConsumer)
}
