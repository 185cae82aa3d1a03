package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// sendLoad is n official-client senders sending to topic until stopped,
// each send on its own; a send that fails (a failover outlasting the
// client's retries) is dropped and the next one sent.
type sendLoad struct {
	mu     sync.Mutex
	acked  map[string]string // message id → body, of the sends answered OK
	okAt   []time.Time       // when each OK came, in order
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(pr rmq.Producer, topic string, n int) *sendLoad {
	return startPacedLoad(pr, topic, n, 0)
}

// startPacedLoad is startLoad with each sender pausing for pause after
// each send: fewer messages for the test to read back afterwards.
func startPacedLoad(pr rmq.Producer, topic string, n int, pause time.Duration) *sendLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &sendLoad{acked: map[string]string{}, cancel: cancel}
	for p := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("%s-%d-%d", topic, p, i)
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				rs, err := pr.Send(sctx, &rmq.Message{Topic: topic, Body: []byte(body)})
				scancel()
				if err == nil {
					l.mu.Lock()
					l.acked[rs[0].MessageID] = body
					l.okAt = append(l.okAt, time.Now())
					l.mu.Unlock()
				}
				if pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
			}
		}()
	}
	return l
}

// count is how many sends were answered OK so far.
func (l *sendLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitFor waits until n sends were answered OK in all, failing the test
// after timeout.
func (l *sendLoad) waitFor(t *testing.T, n int, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for l.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d sends answered OK within %v, waited for %d", what, l.count(), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the senders and returns the sends answered OK.
func (l *sendLoad) stop() map[string]string {
	l.cancel()
	l.wg.Wait()
	return l.acked
}
