package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// benchOtherProtocol runs the produce workload over gRPC and then over
// HTTP/JSON or classic remoting against the same mqgate, so the two
// figures come from one run on one server.
func benchOtherProtocol(ctx context.Context, o benchOpts, srv *child, target string, pid int, log io.Writer) (benchResult, error) {
	res := benchResult{Mode: o.mode, Flush: o.flush}
	g, err := benchProduce(ctx, o, "grpc", target, pid)
	if err != nil {
		return res, fmt.Errorf("gRPC run: %w", err)
	}
	res.Echo = &g // the baseline column: gRPC on the same server
	var f benchFigures
	switch o.mode {
	case "http":
		if srv == nil || srv.http == "" {
			return res, fmt.Errorf("http mode needs the mqgate bench starts (its HTTP address)")
		}
		fmt.Fprintf(log, "bench: HTTP at %s\n", srv.http)
		f, err = benchProduceHTTP(ctx, o, srv.http, pid)
	case "remoting":
		if srv == nil || srv.remoting == "" {
			return res, fmt.Errorf("remoting mode needs the mqgate bench starts (its remoting address)")
		}
		fmt.Fprintf(log, "bench: remoting at %s\n", srv.remoting)
		f, err = benchProduceRemoting(ctx, o, srv.remoting, pid)
	}
	if err != nil {
		return res, fmt.Errorf("%s run: %w", o.mode, err)
	}
	f.RSSAnonMiB = rssAnonMiB(pid)
	res.Mqgate = f
	if g.PerSecond > 0 {
		res.Ratio = f.PerSecond / g.PerSecond
	}
	return res, nil
}

// benchProduceHTTP sends one message per POST /v1/topics/{t}/messages over
// HTTP/1.1 keep-alive, one connection per producer.
func benchProduceHTTP(ctx context.Context, o benchOpts, addr string, pid int) (benchFigures, error) {
	payload, err := json.Marshal(map[string]any{"messages": []map[string]any{{"body": base64.StdEncoding.EncodeToString(make([]byte, o.size))}}})
	if err != nil {
		return benchFigures{}, err
	}
	url := "http://" + addr + "/v1/topics/" + o.topic + "/messages"
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	s := &sampler{}
	for i := 0; i < o.producers; i++ {
		// One transport (so one keep-alive connection) per producer.
		cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}, Timeout: 10 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.CloseIdleConnections()
			local := make([]time.Duration, 0, 1<<15)
			for runCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(runCtx, http.MethodPost, url, bytes.NewReader(payload))
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				d := time.Since(t0)
				if !s.on.Load() {
					continue
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					if runCtx.Err() == nil {
						s.errs.Add(1)
					}
					continue
				}
				s.count.Add(1)
				local = append(local, d)
			}
			s.add(local)
		}()
	}
	secs, cpu := window(ctx, o, s, pid)
	stop()
	wg.Wait()
	return s.figures("http", secs, cpu), nil
}

// benchProduceRemoting sends one message per SEND_MESSAGE request over the
// classic remoting protocol, one connection per producer, round robin over
// the topic's queues like a classic producer.
func benchProduceRemoting(ctx context.Context, o benchOpts, addr string, pid int) (benchFigures, error) {
	body := make([]byte, o.size)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	s := &sampler{}
	for i := 0; i < o.producers; i++ {
		c, err := client.Dial(ctx, addr, codec.JSON)
		if err != nil {
			stop()
			return benchFigures{}, err
		}
		defer c.Close()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<15)
			for n := 0; runCtx.Err() == nil; n++ {
				cctx, cancel := context.WithTimeout(runCtx, 5*time.Second)
				t0 := time.Now()
				resp, err := c.Invoke(cctx, &codec.Command{Code: 10, Body: body, Ext: map[string]string{
					"producerGroup": "bench", "topic": o.topic, "queueId": strconv.Itoa((i + n) % 8), "sysFlag": "0",
					"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
					"properties": "UNIQ_KEY\x01" + fmt.Sprintf("01BENCR%027X", benchSeq.Add(1)) + "\x02"}})
				d := time.Since(t0)
				cancel()
				if !s.on.Load() {
					continue
				}
				if err != nil || resp.Code != 0 {
					if runCtx.Err() == nil {
						s.errs.Add(1)
					}
					continue
				}
				s.count.Add(1)
				local = append(local, d)
			}
			s.add(local)
		}(i)
	}
	secs, cpu := window(ctx, o, s, pid)
	stop()
	wg.Wait()
	return s.figures("remoting", secs, cpu), nil
}
