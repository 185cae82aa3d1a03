package classic

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// TestClassicDiskFull: on a small data disk (a tmpfs; the test needs root
// to mount it) a classic producer's sends are refused once less than
// --disk-reserve is free, with upstream's answer to a full disk
// (SERVICE_NOT_AVAILABLE, 14, saying the disk is full); a classic push
// consumer still consumes every message accepted before, and once space
// is freed sends are accepted again.
func TestClassicDiskFull(t *testing.T) {
	e2e(t)
	disk := e2eutil.SmallDisk(t, 32<<20)
	ballast := filepath.Join(disk, "ballast")
	e2eutil.FillFile(t, ballast, 8<<20)
	p := testutil.Start(t, testutil.StartOptions{DataDir: filepath.Join(disk, "data"),
		Args: []string{"--segment-size", "5MiB", "--disk-reserve", "6MiB", "--disk-usage-limit", "0"}})
	topic := uniq("T")
	createTopic(t, p, topic, 4)
	pr := newProducer(t, p)
	rng := rand.New(rand.NewPCG(1, 2))
	body := func(i int) []byte { // incompressible: the client compresses bodies over 4 KiB
		b := make([]byte, 16<<10)
		for j := range b {
			b[j] = 'a' + byte(rng.IntN(26))
		}
		return append([]byte(fmt.Sprintf("m-%d-", i)), b...)
	}
	accepted := map[string]bool{}
	var refusal error
	for i := 0; refusal == nil; i++ {
		if i == 5000 {
			t.Fatalf("%d classic sends of 16 KiB accepted on a 32 MiB disk: never refused", i)
		}
		b := body(i)
		r, err := pr.SendSync(ctxT(t, 10*time.Second), primitive.NewMessage(topic, b))
		switch {
		case err != nil:
			refusal = err
		case r.Status != primitive.SendOK:
			t.Fatalf("send %d: %v", i, r)
		default:
			accepted[string(b)] = true
		}
	}
	if !strings.Contains(refusal.Error(), "CODE: 14") || !strings.Contains(refusal.Error(), "the disk is full") {
		t.Fatalf("after %d sends: %v, want SERVICE_NOT_AVAILABLE (14) saying the disk is full", len(accepted), refusal)
	}
	if len(accepted) < 300 {
		t.Fatalf("only %d classic sends of 16 KiB accepted", len(accepted))
	}

	col := newCollector()
	newPushConsumer(t, p, uniq("CG"), topic, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 90*time.Second, fmt.Sprintf("the %d accepted messages", len(accepted)), func() bool { return len(col.seen) >= len(accepted) })
	col.mu.Lock()
	for b := range col.seen {
		if !accepted[b] {
			t.Errorf("consumed a message that was refused: %.20q", b)
		}
	}
	col.mu.Unlock()

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a classic send accepted once space was freed", func() bool {
		r, err := pr.SendSync(ctxT(t, 10*time.Second), primitive.NewMessage(topic, []byte("after")))
		return err == nil && r.Status == primitive.SendOK
	})
	col.wait(t, 45*time.Second, "the message sent once space was freed", func() bool { return len(col.seen["after"]) > 0 })
}
