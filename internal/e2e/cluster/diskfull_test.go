package cluster

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// TestClusterDiskFull: every member's data directory is on a small disk
// of its own (a tmpfs; the test needs root to mount it), alike. Sends
// through the group are refused once the leader's disk has less than
// --disk-reserve free (INTERNAL_SERVER_ERROR saying the disk is full), and
// consumers drain every message accepted before: what they write is
// replicated into every member's reserve. Once space is freed on the
// leader's disk, sends are accepted again, while a follower still below
// its reserve says so on its /readyz (the leader does not see it). The
// members' logs end byte-identical.
func TestClusterDiskFull(t *testing.T) {
	e2eutil.Begin(t)
	g := planGroup(t, []string{"--peer-token", "disk-full-peer-token-of-the-test", "--segment-size", "5MiB", "--disk-reserve", "8MiB", "--disk-usage-limit", "0"})
	ballast := map[int]string{}
	for _, m := range g.members {
		// The raft log takes 64 MiB (one preallocated file) of each disk.
		disk := e2eutil.SmallDisk(t, 128<<20)
		m.dir = filepath.Join(disk, "data")
		ballast[m.id] = filepath.Join(disk, "ballast")
		// Room left for what a member writes as it starts (the raft
		// log's file, the first segment, its index, the commit log's
		// zeroing ahead, members.json): with 16 MiB of ballast a member
		// once found no room for members.json as it started.
		e2eutil.FillFile(t, ballast[m.id], 8<<20)
	}
	g.startNew()
	l := g.leader(30 * time.Second)
	topic, cgroup := e2eutil.Uniq("full"), e2eutil.Uniq("drain")

	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))
	body := bytes.Repeat([]byte("c"), 16<<10)
	send := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: body})
		if err != nil {
			return "", err
		}
		return rs[0].MessageID, nil
	}
	accepted := map[string]bool{}
	var refusal error
	for refusal == nil {
		if len(accepted) == 5000 {
			t.Fatalf("%d messages of 16 KiB accepted: never refused", len(accepted))
		}
		id, err := send()
		if err != nil {
			refusal = err
			break
		}
		accepted[id] = true
	}
	if e2eutil.RPCCode(refusal) != int32(pb.Code_INTERNAL_SERVER_ERROR) || !strings.Contains(refusal.Error(), "the disk is full") {
		t.Fatalf("after %d messages: %v, want INTERNAL_SERVER_ERROR saying the disk is full", len(accepted), refusal)
	}
	if len(accepted) < 300 {
		t.Fatalf("only %d messages of 16 KiB accepted", len(accepted))
	}

	c := e2eutil.StartSimpleConsumer(t, config(g, cgroup), rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(got) < len(accepted) {
		if time.Now().After(deadline) {
			t.Fatalf("drained %d of %d accepted messages", len(got), len(accepted))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		mvs, err := c.Receive(ctx, 32, 30*time.Second)
		cancel()
		if e2eutil.IsNoMessage(err) {
			continue
		}
		if err != nil {
			t.Fatalf("receive after %d of %d: %v", len(got), len(accepted), err)
		}
		for _, mv := range mvs {
			id := mv.GetMessageId()
			if !accepted[id] || got[id] {
				t.Fatalf("message %s: accepted %v, received before %v", id, accepted[id], got[id])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Ack(ctx, mv)
			cancel()
			if err != nil {
				t.Fatalf("ack after %d of %d: %v", len(got), len(accepted), err)
			}
			got[id] = true
		}
	}

	if err := os.Remove(ballast[l.id]); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a send accepted once the leader's disk has room", func() bool {
		_, err := send()
		return err == nil
	})
	for _, m := range g.others(l) {
		resp, err := http.Get("http://" + m.proc.Metrics + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "this member's disk is below its reserve") {
			t.Fatalf("follower %d /readyz: %d %q, want ready, saying its disk is below its reserve", m.id, resp.StatusCode, b)
		}
	}
	g.stopAll()
	g.sameLogs()
}
