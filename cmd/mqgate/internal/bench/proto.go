package bench

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
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// benchOtherProtocol runs the produce workload over gRPC and then over
// HTTP/JSON or classic remoting against the same mqgate (srv, which bench
// started), so the two figures come from one run on one server.
func benchOtherProtocol(ctx context.Context, o benchOpts, srv *child, log io.Writer) (Result, error) {
	res := Result{Mode: o.mode, Flush: o.flush}
	pid := srv.cmd.Process.Pid
	g, err := benchProduce(ctx, o, "grpc", srv.addr, pid)
	if err != nil {
		return res, fmt.Errorf("gRPC run: %w", err)
	}
	res.Echo = &g // the baseline column: gRPC on the same server
	var f Figures
	switch o.mode {
	case "http":
		if srv.http == "" {
			return res, fmt.Errorf("http mode needs the HTTP address of the mqgate bench starts")
		}
		fmt.Fprintf(log, "bench: HTTP at %s\n", srv.http)
		f, err = benchProduceHTTP(ctx, o, srv.http, pid)
	case "remoting":
		if srv.remoting == "" {
			return res, fmt.Errorf("remoting mode needs the remoting address of the mqgate bench starts")
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
func benchProduceHTTP(ctx context.Context, o benchOpts, addr string, pid int) (Figures, error) {
	payload, err := json.Marshal(map[string]any{"messages": []map[string]any{{"body": base64.StdEncoding.EncodeToString(make([]byte, o.size))}}})
	if err != nil {
		return Figures{}, err
	}
	url := "http://" + addr + "/v1/topics/" + o.topic + "/messages"
	ops := make([]loopOp, o.producers)
	for i := range ops {
		// One transport (so one keep-alive connection) per producer.
		cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}, Timeout: 10 * time.Second}
		defer cl.CloseIdleConnections()
		ops[i] = func(ctx context.Context) (opCount, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
			if err != nil {
				return opCount{}, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := cl.Do(req)
			if err != nil {
				return opCount{}, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return opCount{}, fmt.Errorf("HTTP status %d", resp.StatusCode)
			}
			return opCount{msgs: 1, calls: 1}, nil
		}
	}
	return closedLoop(ctx, o, "http", pid, ops, nil), nil
}

// benchProduceRemoting sends one message per SEND_MESSAGE request over the
// classic remoting protocol, one connection per producer, round robin over
// the topic's queues like a classic producer.
func benchProduceRemoting(ctx context.Context, o benchOpts, addr string, pid int) (Figures, error) {
	body := make([]byte, o.size)
	ops := make([]loopOp, o.producers)
	for i := range ops {
		c, err := client.Dial(ctx, addr, codec.JSON)
		if err != nil {
			return Figures{}, err
		}
		defer c.Close()
		queue := i
		ops[i] = func(ctx context.Context) (opCount, error) {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := c.Invoke(cctx, &codec.Command{Code: 10, Body: body, Ext: map[string]string{
				"producerGroup": "bench", "topic": o.topic, "queueId": strconv.Itoa(queue % 8), "sysFlag": "0",
				"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
				"properties": "UNIQ_KEY\x01" + fmt.Sprintf("01BENCR%027X", benchSeq.Add(1)) + "\x02"}})
			queue++
			if err == nil && resp.Code != 0 {
				err = fmt.Errorf("remoting code %d: %s", resp.Code, resp.Remark)
			}
			return opCount{msgs: 1, calls: 1}, err
		}
	}
	return closedLoop(ctx, o, "remoting", pid, ops, nil), nil
}
