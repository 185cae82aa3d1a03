package classic

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/internal/testutil"
)

// BenchmarkSend1KiB16Producers measures send throughput of one mqgate
// process (async flush) with 16 concurrent producers of 1 KiB messages,
// three ways in the same run: the official gRPC client v5.1.3 (the
// baseline), the classic Go client v2.1.2 over remoting, and mqgate's own
// minimal remoting client (the listener without client overhead). Each
// op is one message; the metrics are messages per second per protocol and
// their ratios to the gRPC baseline.
//
//	go test ./internal/e2e/classic -run '^$' -bench Send1KiB -benchtime 20000x
func BenchmarkSend1KiB16Producers(b *testing.B) {
	if testutil.RaceEnabled {
		b.Skip("clients race internally")
	}
	const producers = 16
	p := testutil.Start(b, testutil.StartOptions{Args: []string{"--log-level", "info"}})
	topic := "bench-topic"
	createTopicB(b, p, topic)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}

	// gRPC baseline.
	var grpcProds []rmq.Producer
	for range producers {
		grpcProds = append(grpcProds, grpcProducer(b, p, topic))
	}
	// Classic client.
	var classic []rocketmq.Producer
	for i := range producers {
		pr, err := rocketmq.NewProducer(producer.WithNameServer(ns(p)), producer.WithGroupName("BENCHPG"),
			producer.WithInstanceName(fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano())), producer.WithRetry(0))
		if err != nil {
			b.Fatal(err)
		}
		if err := pr.Start(); err != nil {
			b.Fatal(err)
		}
		defer pr.Shutdown()
		classic = append(classic, pr)
	}
	// mqgate's minimal remoting client.
	var raws []*client.Conn
	for range producers {
		c, err := client.Dial(context.Background(), p.Remoting, codec.JSON)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		raws = append(raws, c)
	}
	var seq atomic.Int64
	phases := []struct {
		name string
		send func(i int) error
	}{
		{"grpc", func(i int) error {
			_, err := grpcProds[i].Send(context.Background(), &rmq.Message{Topic: topic, Body: body})
			return err
		}},
		{"classic", func(i int) error {
			r, err := classic[i].SendSync(context.Background(), primitive.NewMessage(topic, body))
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("status %d", r.Status)
			}
			return err
		}},
		{"raw-remoting", func(i int) error {
			resp, err := raws[i].Invoke(context.Background(), &codec.Command{Code: 10, Body: body, Ext: map[string]string{
				"producerGroup": "PG", "topic": topic, "queueId": fmt.Sprint(i % 8), "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
				"properties": "UNIQ_KEY\x01B" + fmt.Sprint(seq.Add(1)) + "\x02"}})
			if err == nil && resp.Code != 0 {
				err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
			}
			return err
		}},
	}
	// Warm every path (routes, connections) outside the timing.
	for _, ph := range phases {
		for i := range producers {
			if err := ph.send(i); err != nil {
				b.Fatalf("%s warm-up: %v", ph.name, err)
			}
		}
	}
	rates := map[string]float64{}
	b.ResetTimer()
	for _, ph := range phases {
		var next atomic.Int64
		var wg sync.WaitGroup
		var firstErr atomic.Value
		t0 := time.Now()
		for i := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := ph.send(i); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			b.Fatalf("%s: %v", ph.name, err)
		}
		rates[ph.name] = float64(b.N) / time.Since(t0).Seconds()
	}
	b.StopTimer()
	b.ReportMetric(rates["grpc"], "grpc-msgs/s")
	b.ReportMetric(rates["classic"], "classic-msgs/s")
	b.ReportMetric(rates["raw-remoting"], "raw-msgs/s")
	b.ReportMetric(rates["classic"]/rates["grpc"], "classic/grpc")
	b.ReportMetric(rates["raw-remoting"]/rates["grpc"], "raw/grpc")
}

func createTopicB(b *testing.B, p *testutil.Proc, topic string) {
	b.Helper()
	c, err := client.Dial(context.Background(), p.Remoting, codec.JSON)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r, err := c.Invoke(context.Background(), &codec.Command{Code: 17, Ext: map[string]string{"topic": topic, "readQueueNums": "8",
		"writeQueueNums": "8", "perm": "6"}})
	if err != nil || r.Code != 0 {
		b.Fatalf("create topic: %+v %v", r, err)
	}
}
