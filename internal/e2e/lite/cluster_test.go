package lite

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/testutil"
)

type member struct {
	id   int
	grpc string
	proc *testutil.Proc
}

// startCluster starts a 3-member group with a peer token and returns its
// members once one of them leads and serves.
func startCluster(t *testing.T) []*member {
	t.Helper()
	id, token := uniq("lite-cl"), uniq("lite-peer-token-")
	var ms []*member
	var peers, peerAddrs []string
	for i := 1; i <= 3; i++ {
		ms = append(ms, &member{id: i, grpc: testutil.StableAddr(t)})
		peerAddrs = append(peerAddrs, testutil.StableAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i, peerAddrs[i-1]))
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.proc = start(t, testutil.StartOptions{Args: []string{"--grpc-addr", m.grpc, "--http-addr", testutil.StableAddr(t),
				"--cluster-id", id, "--node-id", strconv.Itoa(m.id), "--peers", strings.Join(peers, ","), "--peer-token", token}})
		}()
	}
	wg.Wait()
	for _, m := range ms {
		if m.proc == nil {
			t.FailNow()
		}
	}
	leader(t, ms, nil)
	return ms
}

// leader waits until a member other than gone leads and serves.
func leader(t *testing.T, ms []*member, gone *member) *member {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if m == gone {
				continue
			}
			// A call the leader answers: through a follower it is relayed.
			if err := exec.Command(testutil.Binary(t), "topic", "list", "--server", m.grpc, "--timeout", "2s").Run(); err == nil {
				for _, l := range ms {
					if l != gone && strings.Contains(l.proc.Log(), "this member leads: serving") {
						return l
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no leader serving within 60 s")
	return nil
}

// In cluster mode a lite topic lives with its parent's queues: its
// messages and the acknowledgements that move a group's position are
// records of the replicated log, so a new leader has the lite topics, the
// backlog and the positions the old one had. Clients follow the Java
// client (see TestLiteSimpleConsumer) and, as its 30 s COMPLETE_ADD does,
// send their subscription again to the new leader.
func TestLiteClusterFailover(t *testing.T) {
	begin(t)
	ms := startCluster(t)
	old := leader(t, ms, nil)
	var via *member // a follower: clients reach the leader through it
	for _, m := range ms {
		if m != old {
			via = m
			break
		}
	}
	parent, group := uniq("chat"), uniq("g")
	cli(t, via.grpc, "topic", "create", parent, "--type", "LITE", "--queues", "2")
	cli(t, via.grpc, "group", "create", group)
	pr := dial(t, via.grpc, "producer")
	pr.mustSend(parent, "a", "a1", "a2")
	pr.mustSend(parent, "b", "b1")
	c := dial(t, via.grpc, "lite")
	mq := c.queryRoute(parent)[0]
	c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	code(t, "subscribe", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "a", "b"), v2.Code_OK)
	got := c.receiveAll(group, mq, 3, 30*time.Second)
	if len(got) != 3 {
		t.Fatalf("received %v", byLite(got))
	}
	for _, m := range got {
		if m.GetSystemProperties().GetLiteTopic() == "a" {
			code(t, "ack", c.ack(group, parent, m), v2.Code_OK)
		}
	}

	old.proc.Kill9()
	leader(t, ms, old)
	pr = dial(t, via.grpc, "producer")
	c = dial(t, via.grpc, "lite")
	mq = c.queryRoute(parent)[0]
	c.settings(liteConsumerSettings(v2.ClientType_LITE_SIMPLE_CONSUMER, group, parent))
	code(t, "COMPLETE_ADD on the new leader", c.sync(v2.LiteSubscriptionAction_COMPLETE_ADD, group, parent, nil, "a", "b"), v2.Code_OK)
	pr.mustSend(parent, "a", "a3")
	after := c.receiveAll(group, mq, 2, 30*time.Second)
	if want := map[string][]string{"a": {"a3"}, "b": {"b1"}}; fmt.Sprint(byLite(after)) != fmt.Sprint(want) {
		t.Fatalf("on the new leader: %v, want %v", byLite(after), want)
	}
	out := cli(t, via.grpc, "topic", "lite", parent)
	contains(t, "topic lite on the new leader", out, "2 lite topics", group)
}
