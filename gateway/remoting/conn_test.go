package remoting

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Trap 1: requests on one connection are served concurrently — a parked
// pull does not hold up a send (or a heartbeat) behind it, and the send
// wakes the pull.
func TestParkedPullDoesNotBlockSendOnTheSameConnection(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	type result struct {
		resp *codec.Command
		err  error
	}
	parked := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		r, err := c.Invoke(ctx, &codec.Command{Code: reqPullMessage, Ext: pullExt("CG", "T", 0, 0, pullSuspend, 20000)})
		parked <- result{r, err}
	}()
	eventually(t, "the pull to park", func() bool { return e.cl.Parked() == 1 })
	e.must(e.call(c, reqHeartBeat, nil, heartbeatBody("me@1", []string{"PG"}, nil)), codeSuccess)
	e.must(e.send(c, "T", 0, "wake", props("UNIQ_KEY", "ID1")), codeSuccess)
	r := <-parked
	if r.err != nil {
		t.Fatal(r.err)
	}
	e.must(r.resp, codeSuccess)
	if rs := records(t, r.resp.Body); len(rs) != 1 || string(rs[0].Body) != "wake" {
		t.Fatalf("woken pull returned %+v", rs)
	}
}

// Traps 2 and 3: responses copy the opaque, set the response bit, keep
// code and version within int16 and every ext value a string; a oneway
// request gets no answer, a flag-0 "fire-and-forget" one does.
func TestResponseShapeAndOneway(t *testing.T) {
	e := newEnv(t)
	nc, err := net.Dial("tcp", e.s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	write := func(c *codec.Command, typ byte) {
		b, err := codec.AppendFrame(nil, c, typ)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (*codec.Command, string) {
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := codec.ReadFrame(br, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		c, err := codec.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		return c, string(f[4 : 4+int(f[3])|int(f[2])<<8|int(f[1])<<16])
	}
	// Oneway (flag 2): processed, not answered. The next frame we read
	// must be the answer to the request after it.
	write(&codec.Command{Code: reqHeartBeat, Opaque: 1, Flag: codec.FlagOneway, Body: heartbeatBody("c@1", []string{"PG"}, nil)}, codec.JSON)
	write(&codec.Command{Code: reqGetMaxOffset, Opaque: 2, Ext: map[string]string{"topic": "nope", "queueId": "0"}}, codec.RocketMQ)
	resp, hdr := read()
	if resp.Opaque != 2 || !resp.IsResponse() || resp.Code != codeSuccess || resp.Ext["offset"] != "0" {
		t.Fatalf("answer %+v", resp)
	}
	// Trap 4: a binary request is answered in JSON.
	if resp.Serialize != codec.JSON || !strings.Contains(hdr, `"offset":"0"`) || !strings.Contains(hdr, `"version":479`) {
		t.Fatalf("header %s", hdr)
	}
	// A flag-0 UPDATE_CONSUMER_OFFSET (Go's fire-and-forget) is answered.
	write(&codec.Command{Code: reqUpdateConsumerOffset, Opaque: 3, Ext: map[string]string{"consumerGroup": "g", "topic": "missing", "queueId": "0", "commitOffset": "1"}}, codec.JSON)
	if resp, _ := read(); resp.Opaque != 3 || resp.Code != codeTopicNotExist {
		t.Fatalf("answer %+v", resp)
	}
	// Trap 5: unknown codes, including POP-range codes only JSON can
	// carry, are answered REQUEST_CODE_NOT_SUPPORTED.
	write(&codec.Command{Code: 299999, Opaque: 4}, codec.JSON)
	if resp, _ := read(); resp.Opaque != 4 || resp.Code != codeRequestCodeNotSupported || !strings.Contains(resp.Remark, "299999") {
		t.Fatalf("answer %+v", resp)
	}
}

// A malformed frame gets an error response and closes its connection
// only; a frame over the maximum is refused before it is read.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.MaxFrame = 4096 })
	other := e.dial()
	for _, raw := range [][]byte{
		{0, 0, 0x10, 0x01, 0, 0, 0, 0}, // 4097 bytes: over MaxFrame
		{0, 0, 0, 5, 9, 0, 0, 1, '{'},  // unknown serialize type
	} {
		nc, err := net.Dial("tcp", e.s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(raw); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := codec.ReadFrame(br, 1<<20)
		if err != nil {
			t.Fatalf("no error response: %v", err)
		}
		if resp, err := codec.Decode(f); err != nil || resp.Code != codeInvalidParameter || !resp.IsResponse() {
			t.Fatalf("error response %+v %v", resp, err)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("connection left open: %v", err)
		}
		nc.Close()
		e.must(e.call(other, reqGetMaxOffset, map[string]string{"topic": "x", "queueId": "0"}, nil), codeSuccess)
	}
}

// An idle connection is closed after IdleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := e.dial()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("idle connection still open")
	}
}

// The per-connection in-flight limit: with room for one request, a
// second waits for the first (here a parked pull) to finish.
func TestInFlightLimitPerConnection(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.MaxInFlight = 1 })
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	parked := make(chan *codec.Command, 1)
	go func() {
		r, _ := c.Invoke(e.ctx, &codec.Command{Code: reqPullMessage, Ext: pullExt("CG", "T", 0, 0, pullSuspend, 20000)})
		parked <- r
	}()
	eventually(t, "the pull to park", func() bool { return e.cl.Parked() == 1 })
	second := make(chan *codec.Command, 1)
	go func() {
		r, _ := c.Invoke(e.ctx, &codec.Command{Code: reqGetMaxOffset, Ext: map[string]string{"topic": "T", "queueId": "0"}})
		second <- r
	}()
	select {
	case r := <-second:
		t.Fatalf("second request answered while the first held the only slot: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	e.clk.Advance(25 * time.Second) // the pull's long poll ends
	if r := <-parked; r == nil || r.Code != codePullNotFound {
		t.Fatalf("parked pull: %+v", r)
	}
	if r := <-second; r == nil || r.Code != codeSuccess {
		t.Fatalf("second request: %+v", r)
	}
}

// Shutdown: requests arriving while draining get SERVICE_NOT_AVAILABLE; a
// parked pull is answered when the broker drains.
func TestStopAnswersParkedPullsAndRefusesNewWork(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	parked := make(chan *codec.Command, 1)
	go func() {
		r, _ := c.Invoke(e.ctx, &codec.Command{Code: reqPullMessage, Ext: pullExt("CG", "T", 0, 0, pullSuspend, 20000)})
		parked <- r
	}()
	eventually(t, "the pull to park", func() bool { return e.cl.Parked() == 1 })
	e.b.Drain()
	if r := <-parked; r == nil || r.Code != codePullNotFound || r.Ext["nextBeginOffset"] != "0" {
		t.Fatalf("drained pull: %+v", r)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := e.s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("connection not closed by Stop")
	}
}

// The server-wide byte budget: request frames of all connections hold at
// most MaxBytesInFlight; a reader waits for room before it allocates.
func TestByteBudgetAcrossConnections(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *broker.Config) { c.MaxBytesInFlight = 1024 })
	a, b := e.dial(), e.dial()
	e.createTopic(a, "T", 1, "")
	parked := make(chan *codec.Command, 1)
	go func() {
		r, _ := a.Invoke(e.ctx, &codec.Command{Code: reqPullMessage, Ext: pullExt("CG", "T", 0, 0, pullSuspend, 20000)})
		parked <- r
	}()
	eventually(t, "the pull to park", func() bool { return e.cl.Parked() == 1 })
	sent := make(chan *codec.Command, 1)
	go func() {
		r, _ := b.Invoke(e.ctx, &codec.Command{Code: reqSendMessage, Body: make([]byte, 2000), Ext: map[string]string{
			"producerGroup": "PG", "topic": "T", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}})
		sent <- r
	}()
	select {
	case r := <-sent:
		t.Fatalf("a frame over the free budget was taken: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	e.clk.Advance(20 * time.Second)
	<-parked
	if r := <-sent; r == nil || r.Code != codeSuccess {
		t.Fatalf("send after the budget freed: %+v", r)
	}
}
