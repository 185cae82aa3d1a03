package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// TestClusterAcksSurviveAPausedLeader pauses the leader (SIGSTOP) until
// another member leads, receives and acknowledges messages through the
// new leader, resumes the old one, waits until it follows and has applied
// everything, and hands the leadership back to it: no message
// acknowledged meanwhile may be delivered again, then or once the
// invisible duration of its delivery has passed. Three rounds, each with
// the leader of the moment.
//
// (A scenario the nemesis test found: the paused member resumes still
// serving, and the new leader's entries can be applied to its store
// before the POP state snapshot it writes as it stops serving; the
// snapshot then claims them although its state in memory never saw
// them, and when the member leads again it skips them. It depends on
// that order, so a round does not always show it.)
func TestClusterAcksSurviveAPausedLeader(t *testing.T) {
	e2eutil.Begin(t)
	g := newGroup(t, "--peer-token", nemesisToken)
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("paused"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	a := g.acker()
	const invisible = 10 * time.Second
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))

	for round := 1; round <= 3; round++ {
		old := g.leader(30 * time.Second)
		const n = 20
		sent := map[string]bool{}
		for i := range n {
			sent[sendOK(t, pr, &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("paused-%d-%d", round, i))}, 20*time.Second)] = true
		}

		old.proc.Signal(syscall.SIGSTOP)
		nl := g.leaderAmong(g.others(old), 30*time.Second)
		t.Logf("round %d: member %d (leader) paused; member %d leads", round, old.id, nl.id)

		// Every message received and acknowledged through the new leader
		// (the consumer's connections to the paused member hang, so it
		// asks the new leader only meanwhile).
		nc := e2eutil.StartSimpleConsumer(t, e2eutil.Config(nl.grpc, cg), rmq.WithSimpleAwaitDuration(time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
		acked := map[string]bool{}
		var lastWindow time.Time
		if !waitFor(60*time.Second, func() bool {
			asked := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			mvs, err := nc.Receive(ctx, 32, invisible)
			cancel()
			if err != nil {
				backoff(err)
			}
			for _, mv := range mvs {
				if !sent[mv.GetMessageId()] {
					continue // an earlier round's, redelivered: reported there
				}
				actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := a.ackOnce(actx, nl.id-1, cg, topic, mv.GetReceiptHandle())
				acancel()
				if err != nil {
					t.Fatalf("round %d: ack of %s through the leader %d: %v", round, mv.GetMessageId(), nl.id, err)
				}
				acked[mv.GetMessageId()] = true
				lastWindow = asked.Add(invisible)
			}
			return len(acked) == n
		}) {
			t.Fatalf("round %d: %d of %d messages received and acknowledged through member %d", round, len(acked), n, nl.id)
		}
		_ = nc.GracefulStop()

		old.proc.Signal(syscall.SIGCONT)
		g.waitStatus(old, 30*time.Second, "follow the new leader", func(st memberStatus) bool {
			return st.State == "StateFollower" && st.Leader == uint64(nl.id)
		})
		g.caughtUp(old, 30*time.Second)
		if out, err := g.cli("cluster", "transfer-leader", "--peer", nl.peer, "--cluster-id", g.id, "--to", strconv.Itoa(old.id)); err != nil {
			t.Fatalf("round %d: transfer the leadership back to member %d: %v\n%s", round, old.id, err, out)
		}
		t.Logf("round %d: member %d resumed, caught up and was handed the leadership back", round, old.id)

		// Nothing comes back: receive until the acknowledged deliveries'
		// windows have passed, and a little longer.
		again := map[string]int32{}
		for until := lastWindow.Add(3 * time.Second); time.Now().Before(until); {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			mvs, err := c.Receive(ctx, 32, invisible)
			cancel()
			if err != nil {
				backoff(err)
			}
			for _, mv := range mvs {
				if acked[mv.GetMessageId()] {
					again[mv.GetMessageId()] = max(again[mv.GetMessageId()], mv.GetDeliveryAttempt())
				}
				a.mustAck(20*time.Second, cg, topic, mv)
			}
		}
		if len(again) > 0 {
			ids := slices.Sorted(func(yield func(string) bool) {
				for id := range again {
					if !yield(id) {
						return
					}
				}
			})
			t.Fatalf("round %d: %d of %d messages acknowledged through member %d while member %d was paused were delivered again once member %d led (ids and highest attempts: %v)",
				round, len(again), n, nl.id, old.id, old.id, fmtAttempts(ids, again))
		}
	}
}

func fmtAttempts(ids []string, attempts map[string]int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf("%s@%d", id, attempts[id]))
	}
	return out
}
