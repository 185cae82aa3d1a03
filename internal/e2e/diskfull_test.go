package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// appendedBytes is what p's store has appended to its commit log
// (mqgate_store_append_size_bytes_total).
func appendedBytes(t *testing.T, p *testutil.Proc) int64 {
	t.Helper()
	b := []byte(e2eutil.ScrapeMetrics(t, p))
	m := regexp.MustCompile(`(?m)^mqgate_store_append_size_bytes_total\{[^}]*\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no mqgate_store_append_size_bytes_total in /metrics")
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(f)
}

// TestDiskFullDrainsToTheEnd fills a small data disk (a 40 MiB tmpfs; the
// test needs root to mount it) through the official Go client until a
// send is refused — once less than --disk-reserve is free: INTERNAL_SERVER_ERROR
// saying the disk is full, as upstream answers; REST 507; the CLI says so
// too, not that the server cannot be reached — while /readyz stays ready.
// The official SimpleConsumer then receives and acknowledges every message
// accepted before, to the end: none is lost or delivered twice. Once
// space is freed (a file on the disk removed), sends are accepted again
// without a restart.
func TestDiskFullDrainsToTheEnd(t *testing.T) {
	e2e(t)
	disk := e2eutil.SmallDisk(t, 40<<20)
	ballast := filepath.Join(disk, "ballast")
	e2eutil.FillFile(t, ballast, 8<<20)
	p := start(t, testutil.StartOptions{DataDir: filepath.Join(disk, "data"),
		Args: []string{"--segment-size", "5MiB", "--disk-reserve", "8MiB", "--disk-usage-limit", "0"}})
	topic, group := uniq("full"), uniq("drain")
	cli(t, p, "topic", "create", topic)
	cli(t, p, "group", "create", group)

	pr := newProducer(t, p, topic)
	body := bytes.Repeat([]byte("m"), 16<<10)
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
			t.Fatalf("%d messages of 16 KiB accepted on a 40 MiB disk: never refused", len(accepted))
		}
		id, err := send()
		if err != nil {
			refusal = err
			break
		}
		accepted[id] = true
	}
	if rpcCode(refusal) != int32(pb.Code_INTERNAL_SERVER_ERROR) || !strings.Contains(refusal.Error(), "the disk is full") ||
		!strings.Contains(refusal.Error(), "below its reserve of 8.0 MiB") {
		t.Fatalf("after %d messages: %v, want INTERNAL_SERVER_ERROR saying the disk is full", len(accepted), refusal)
	}
	if len(accepted) < 500 {
		t.Fatalf("only %d messages of 16 KiB accepted on a 40 MiB disk with an 8 MiB reserve", len(accepted))
	}
	t.Logf("%d messages of 16 KiB accepted, then refused: %v", len(accepted), refusal)

	resp, err := http.Post("http://"+p.HTTP+"/v1/topics/"+topic+"/messages", "application/json", strings.NewReader(`{"messages":[{"text":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(b), "the disk is full") {
		t.Fatalf("REST send on the full disk: %d %s, want 507", resp.StatusCode, b)
	}
	out, err := cliResult(t, p, "send", "--topic", topic, "hello")
	if err == nil || !strings.Contains(out, "the disk is full") || strings.Contains(out, "cannot reach") || strings.Contains(out, "no answer") {
		t.Fatalf("mqgate send on the full disk: %v\n%s", err, out)
	}
	resp, err = http.Get("http://" + p.HTTP + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "new messages are refused") {
		t.Fatalf("/readyz on the full disk: %d %q, want 200 saying new messages are refused", resp.StatusCode, b)
	}

	// Drain: every accepted message, each once.
	appendedBefore := appendedBytes(t, p)
	c := newConsumer(t, p, group, 0, all(topic))
	got := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(got) < len(accepted) {
		if time.Now().After(deadline) {
			t.Fatalf("drained %d of %d accepted messages", len(got), len(accepted))
		}
		for _, mv := range receive(t, c, 32, 30*time.Second) {
			id := mv.GetMessageId()
			if !accepted[id] || got[id] {
				t.Fatalf("message %s: accepted %v, received before %v", id, accepted[id], got[id])
			}
			if !bytes.Equal(mv.GetBody(), body) {
				t.Fatalf("message %s: body of %d bytes", id, len(mv.GetBody()))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.Ack(ctx, mv)
			cancel()
			if err != nil {
				t.Fatalf("ack %s after %d of %d: %v", id, len(got), len(accepted), err)
			}
			got[id] = true
		}
	}
	if mvs := receive(t, c, 32, 30*time.Second); len(mvs) != 0 {
		t.Fatalf("%d more messages after the drain", len(mvs))
	}
	drained := appendedBytes(t, p) - appendedBefore
	t.Logf("draining %d messages (receives of up to 32, one ack each) appended %d bytes to the commit log (%d per message)",
		len(got), drained, drained/int64(len(got)))

	// An operator frees space: sends are accepted again, no restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.Eventually(t, "a send accepted once space was freed", func() bool {
		id, err = send()
		return err == nil
	})
	mvs := receive(t, c, 32, 30*time.Second)
	if len(mvs) != 1 || mvs[0].GetMessageId() != id {
		t.Fatalf("after space was freed: received %v, want %s", ids(mvs), id)
	}
}
