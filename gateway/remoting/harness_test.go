package remoting

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Component tests: the real broker and store (in memory, fake clock)
// behind a real listener on a loopback port, driven by the test client.

type env struct {
	t    *testing.T
	clk  *clock.Fake
	st   *storage.Store
	b    *broker.Broker
	cl   *broker.Classic
	s    *Server
	logs *testutil.SyncBuffer
	ctx  context.Context
}

type envOpt func(*Config, *broker.Config)

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, clk: clock.NewFake(time.UnixMilli(1_800_000_000_000)), logs: &testutil.SyncBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{Clock: e.clk, Logger: log, Pid: 4242}
	bcfg := broker.Config{Clock: e.clk, Logger: log, DefaultQueues: 4, PopSnapshotInterval: time.Hour}
	for _, o := range opts {
		o(&cfg, &bcfg)
	}
	st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 8 << 20, Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(ctx, bcfg, st)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Classic()
	s, err := New(cfg, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	b.SetCheckBackSender(broker.CheckBackFanOut{s})
	b.AddResetListener(s)
	e.st, e.b, e.cl, e.s = st, b, cl, s
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		b.Drain()
		if err := s.Stop(sctx); err != nil {
			t.Errorf("server stop: %v", err)
		}
		if err := b.Close(sctx); err != nil {
			t.Errorf("broker close: %v", err)
		}
		if err := st.Close(sctx); err != nil {
			t.Errorf("store close: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", e.logs.String())
		}
	})
	return e
}

func (e *env) dial() *client.Conn { return e.dialAs(codec.JSON) }

func (e *env) dialAs(ser byte) *client.Conn {
	e.t.Helper()
	c, err := client.Dial(e.ctx, e.s.Addr(), ser)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// settle waits until everything appended is dispatched to the consume
// queues and the index (appends return before that, as upstream's do).
func (e *env) settle() {
	e.t.Helper()
	_, w := e.st.LogRange()
	if err := e.st.WaitDispatched(e.ctx, w); err != nil {
		e.t.Fatal(err)
	}
}

// call sends a request and returns its answer; it settles dispatch first
// so reads see every earlier write.
func (e *env) call(c *client.Conn, code int32, ext map[string]string, body []byte) *codec.Command {
	e.t.Helper()
	e.settle()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, &codec.Command{Code: code, Ext: ext, Body: body})
	if err != nil {
		e.t.Fatalf("request %d: %v", code, err)
	}
	return resp
}

func (e *env) must(resp *codec.Command, code int32) *codec.Command {
	e.t.Helper()
	if resp.Code != code {
		e.t.Fatalf("response code %d (%s), want %d", resp.Code, resp.Remark, code)
	}
	return resp
}

func (e *env) createTopic(c *client.Conn, topic string, queues int, attrs string) {
	e.t.Helper()
	e.must(e.call(c, reqUpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": "TBW102",
		"readQueueNums": fmt.Sprint(queues), "writeQueueNums": fmt.Sprint(queues), "perm": "6",
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", "attributes": attrs}, nil), codeSuccess)
}

func props(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i] + "\x01" + kv[i+1] + "\x02")
	}
	return b.String()
}

func (e *env) send(c *client.Conn, topic string, queue int, body, properties string) *codec.Command {
	e.t.Helper()
	return e.call(c, reqSendMessage, map[string]string{"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": fmt.Sprint(queue), "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
		"properties": properties}, []byte(body))
}

func pullExt(group, topic string, queue int, offset int64, sysFlag int, suspendMs int) map[string]string {
	return map[string]string{"consumerGroup": group, "topic": topic, "queueId": fmt.Sprint(queue), "queueOffset": fmt.Sprint(offset),
		"maxMsgNums": "32", "sysFlag": fmt.Sprint(sysFlag), "commitOffset": "-1", "suspendTimeoutMillis": fmt.Sprint(suspendMs),
		"subVersion": "0", "expressionType": "TAG", "subscription": "*"}
}

func (e *env) pull(c *client.Conn, group, topic string, queue int, offset int64) *codec.Command {
	e.t.Helper()
	return e.call(c, reqPullMessage, pullExt(group, topic, queue, offset, 0, 0), nil)
}

func records(t *testing.T, body []byte) []wire.Record {
	t.Helper()
	rs, err := wire.DecodeRecords(body)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func propsOf(r wire.Record) map[string]string {
	m := map[string]string{}
	for _, p := range wire.ParseProperties(r.Properties) {
		m[p.Key] = p.Value
	}
	return m
}

func heartbeatBody(clientID string, producers []string, consumers map[string][]string) []byte {
	type sub struct {
		Topic          string   `json:"topic"`
		SubString      string   `json:"subString"`
		ExpressionType string   `json:"expressionType"`
		CodeSet        []string `json:"codeSet"`
		SubVersion     int64    `json:"subVersion"`
	}
	type cons struct {
		GroupName           string `json:"groupName"`
		ConsumeType         string `json:"consumeType"`
		MessageModel        string `json:"messageModel"`
		ConsumeFromWhere    string `json:"consumeFromWhere"`
		SubscriptionDataSet []sub  `json:"subscriptionDataSet"`
	}
	type prod struct {
		GroupName string `json:"groupName"`
	}
	hb := struct {
		ClientID        string `json:"clientID"`
		ProducerDataSet []prod `json:"producerDataSet"`
		ConsumerDataSet []cons `json:"consumerDataSet"`
	}{ClientID: clientID}
	for _, p := range producers {
		hb.ProducerDataSet = append(hb.ProducerDataSet, prod{p})
	}
	for g, topics := range consumers {
		cd := cons{GroupName: g, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET"}
		for _, tp := range topics {
			expr := "*"
			if i := strings.IndexByte(tp, ':'); i >= 0 {
				tp, expr = tp[:i], tp[i+1:]
			}
			cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, sub{Topic: tp, SubString: expr, ExpressionType: "TAG",
				CodeSet: []string{}, SubVersion: 1796017662508720862})
		}
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, cd)
	}
	b, _ := json.Marshal(hb)
	return b
}

// eventually waits for cond (no sleeps where a condition can be awaited:
// the server answers asynchronously to some requests, so poll briefly).
var eventually = testutil.Eventually

// advanceUntil moves the fake clock forward by step until cond holds: for
// work a background loop does on a clock timer that may not be armed yet
// when the test starts advancing.
func advanceUntil(t *testing.T, clk *clock.Fake, step time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() bool {
		if cond() {
			return true
		}
		clk.Advance(step)
		return false
	})
}

var modelFilterAll = model.Filter{}
