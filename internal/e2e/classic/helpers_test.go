package classic

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// quietLog drops the classic client's logging (it logs every heartbeat
// and rebalance at info level); set MQGATE_E2E_CLIENT_LOG=1 to see it.
type quietLog struct{}

func (quietLog) Debug(string, map[string]interface{})   {}
func (quietLog) Info(string, map[string]interface{})    {}
func (quietLog) Warning(string, map[string]interface{}) {}
func (quietLog) Error(string, map[string]interface{})   {}
func (quietLog) Fatal(string, map[string]interface{})   {}
func (quietLog) Level(string)                           {}
func (quietLog) OutputPath(string) error                { return nil }

func TestMain(m *testing.M) {
	if os.Getenv("MQGATE_E2E_CLIENT_LOG") == "" {
		rlog.SetLogger(quietLog{})
	}
	e2eutil.Main(m) // the official v5 client of the interop tests
}

// uniq returns a name unique to the process and call (client instance
// names must be unique too: the classic client shares one instance per
// client id across the whole process).
var uniq = e2eutil.Uniq

// e2e skips in -short mode and under -race (both clients race
// internally) and marks the test parallel (e2eutil.Begin).
func e2e(t *testing.T) {
	t.Helper()
	e2eutil.Begin(t)
}

func start(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	p := testutil.Start(t, testutil.StartOptions{Args: args})
	if p.Remoting == "" {
		t.Fatalf("the ready line has no remoting address:\n%s", p.Log())
	}
	return p
}

func ns(p *testutil.Proc) primitive.NamesrvAddr { return primitive.NamesrvAddr{p.Remoting} }

// createTopic creates a topic with the classic admin API against the
// remoting port (UPDATE_AND_CREATE_TOPIC).
func createTopic(t *testing.T, p *testutil.Proc, topic string, queues int) {
	t.Helper()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(ns(p))))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(p.Remoting),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues)); err != nil {
		t.Fatalf("admin CreateTopic %s: %v", topic, err)
	}
}

func newProducer(t *testing.T, p *testutil.Proc, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNameServer(ns(p)), producer.WithGroupName(uniq("PG")),
		producer.WithInstanceName(uniq("prod")), producer.WithRetry(2)}, opts...)
	pr, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Start(); err != nil {
		t.Fatalf("producer start: %v", err)
	}
	t.Cleanup(func() { _ = pr.Shutdown() })
	return pr
}

// collector gathers consumed messages by body.
type collector struct {
	mu   sync.Mutex
	seen map[string][]*primitive.MessageExt
	by   map[string]string // body → consumer name
	ch   chan struct{}
}

func newCollector() *collector {
	return &collector{seen: map[string][]*primitive.MessageExt{}, by: map[string]string{}, ch: make(chan struct{}, 1)}
}

func (c *collector) add(who string, ms ...*primitive.MessageExt) {
	c.mu.Lock()
	for _, m := range ms {
		c.seen[string(m.Body)] = append(c.seen[string(m.Body)], m)
		c.by[string(m.Body)] = who
	}
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// wait waits until ok holds (checked on every arrival) or d passes.
func (c *collector) wait(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		done := ok()
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.ch:
		case <-deadline.C:
			c.mu.Lock()
			n := len(c.seen)
			c.mu.Unlock()
			var got []string
			c.mu.Lock()
			for b, ms := range c.seen {
				got = append(got, fmt.Sprintf("%.20q×%d", b, len(ms)))
			}
			c.mu.Unlock()
			t.Fatalf("timed out after %s waiting for %s (%d distinct bodies consumed: %v)", d, what, n, got)
		}
	}
}

func (c *collector) count(body string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen[body])
}

type consumeFn func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

func newPushConsumer(t *testing.T, p *testutil.Proc, group, topic string, fn consumeFn, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	return newSelectingPushConsumer(t, p, group, topic, consumer.MessageSelector{}, fn, opts...)
}

// newSelectingPushConsumer is newPushConsumer subscribed with sel.
func newSelectingPushConsumer(t *testing.T, p *testutil.Proc, group, topic string, sel consumer.MessageSelector, fn consumeFn, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNameServer(ns(p)), consumer.WithGroupName(group),
		consumer.WithInstance(uniq("cons")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, sel, fn); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("push consumer start: %v", err)
	}
	t.Cleanup(func() { _ = c.Shutdown() }) // idempotent
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context { return testutil.Context(t, d) }
