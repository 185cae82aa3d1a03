package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// TestKill9MidSend: kill -9 while 8 official producers send, restart on
// the same data dir: every send that was answered OK is there, once, with
// its body. With async flush (the default) the records went through the
// commit log's shared mapping and the page cache must keep them; with sync
// flush each answer waited for a group-commit fsync.
func TestKill9MidSend(t *testing.T) {
	e2e(t)
	for _, flush := range []string{"async", "sync"} {
		t.Run(flush, func(t *testing.T) { kill9MidSend(t, flush) })
	}
}

func kill9MidSend(t *testing.T, flush string) {
	dir := t.TempDir()
	opts := testutil.StartOptions{DataDir: dir, Args: []string{"--flush", flush}}
	p := start(t, opts)
	topic, group := uniq("midsend"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "4")
	cli(t, p, "group", "create", group)
	pr := newProducer(t, p, topic)

	var (
		mu     sync.Mutex
		acked  = map[string]string{} // message id → body
		killed atomic.Bool
		enough = make(chan struct{})
		once   sync.Once
	)
	target := 300 + rand.IntN(700) // answered sends before the kill
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer killed.Store(true) // a failed test leaves its producers quiet too
	for g := range 8 {
		go func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("%s-%d-%d", topic, g, i)
				sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
				rs, err := pr.Send(sctx, &rmq.Message{Topic: topic, Body: []byte(body)})
				scancel()
				if err != nil {
					if !killed.Load() {
						t.Errorf("send before the kill: %v", err)
					}
					return
				}
				mu.Lock()
				acked[rs[0].MessageID] = body
				if len(acked) >= target {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("fewer than %d sends answered in 60 s", target)
	}
	killed.Store(true)
	p.Kill9() // producers still sending
	// The producers' sends now fail; they are not waited for (the official
	// client's Send can take minutes to give up on a dead endpoint) and no
	// longer touch t. An answer read after this snapshot is not checked.
	cancel()
	mu.Lock()
	want := maps.Clone(acked)
	mu.Unlock()

	p2 := start(t, opts)
	c := newConsumer(t, p2, group, 0, all(topic))
	r := dialRaw(t, p2)
	seen := map[string]bool{}
	missing := len(want)
	deadline := time.Now().Add(60 * time.Second)
	for missing > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s flush: %d of %d acknowledged sends missing after kill -9 and restart", flush, missing, len(want))
		}
		for _, mv := range receive(t, c, 32, 60*time.Second) {
			id := mv.GetMessageId()
			if seen[id] {
				t.Fatalf("message %s delivered twice after the restart", id)
			}
			seen[id] = true
			if body, ok := want[id]; ok {
				if string(mv.GetBody()) != body {
					t.Fatalf("message %s: body %q, sent %q", id, mv.GetBody(), body)
				}
				missing--
			}
			wantCode(t, "ack", r.ack(group, topic, mv.GetReceiptHandle()), pb.Code_OK)
		}
	}
	t.Logf("%s flush: %d acknowledged sends before kill -9 all there after the restart (%d messages stored)", flush, len(want), len(seen))
}
