package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

// The official Go client, configured with only the proxy's address,
// produces, receives and acks through nginx; QueryRoute hands out the
// proxy's address (the access point the client dialed), so every call goes
// through the proxy; REST works through it too.
func TestOfficialClientThroughNginx(t *testing.T) {
	e2e(t)
	p, px, topic, group := behindProxy(t, "mesh-orders", "mesh-billing")

	// Routes echo the access point: asked through the proxy, for the
	// proxy's address, the broker endpoint is the proxy.
	raw := dialRaw(t, px.GRPC, true)
	route, err := raw.QueryRoute(raw.ctx(t, 10*time.Second), &pb.QueryRouteRequest{Topic: res(topic), Endpoints: endpointsOf(t, px.GRPC)})
	if err != nil || route.GetStatus().GetCode() != pb.Code_OK || len(route.GetMessageQueues()) == 0 {
		t.Fatalf("QueryRoute through nginx: %v %v", err, route.GetStatus())
	}
	for _, q := range route.GetMessageQueues() {
		addrs := q.GetBroker().GetEndpoints().GetAddresses()
		if len(addrs) != 1 || fmt.Sprintf("%s:%d", addrs[0].GetHost(), addrs[0].GetPort()) != px.GRPC {
			t.Fatalf("route queue %d hands out %v, want only the proxy %s", q.GetId(), addrs, px.GRPC)
		}
	}

	const n = 20
	pr := newProducer(t, px.GRPC, topic)
	sent := map[string]bool{}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("through nginx %d", i))})
		cancel()
		if err != nil {
			t.Fatalf("send %d through nginx: %v", i, err)
		}
		sent[rs[0].MessageID] = true
	}
	c := newConsumer(t, px.GRPC, group, topic, 5*time.Second)
	got := receiveAll(t, c, sent, 60*time.Second)
	for id := range sent {
		if _, ok := got[id]; !ok {
			t.Errorf("message %s sent through nginx never arrived", id)
		}
	}
	// Every message went through the proxy (the client knows no other
	// address, and the route pointed it back at the proxy).
	px.awaitCalls(t, n, n)

	// REST through the proxy: send, receive (text bodies), ack.
	base := "http://" + px.HTTP
	code, body := httpDo(t, "POST", base+"/v1/topics/"+topic+"/messages", `{"messages":[{"text":"rest through nginx"}]}`)
	if code != 200 {
		t.Fatalf("REST send through nginx: %d %s", code, body)
	}
	restGroup := uniq("mesh-rest")
	cli(t, p.GRPC, "group", "create", restGroup)
	var recv struct {
		Messages []struct{ Text, ReceiptHandle string }
	}
	waitFor(t, 20*time.Second, "the REST message through nginx", func() bool {
		code, body := httpDo(t, "POST", base+"/v1/groups/"+restGroup+"/topics/"+topic+":receive?body=text", `{"maxMessages":32,"waitDuration":"2s"}`)
		if code != 200 {
			t.Fatalf("REST receive through nginx: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &recv); err != nil {
			t.Fatal(err)
		}
		for _, m := range recv.Messages {
			if m.Text == "rest through nginx" {
				code, body := httpDo(t, "POST", base+"/v1/groups/"+restGroup+"/topics/"+topic+":ack",
					`{"receiptHandles":["`+m.ReceiptHandle+`"]}`)
				if code != 200 {
					t.Fatalf("REST ack through nginx: %d %s", code, body)
				}
				return true
			}
			httpDo(t, "POST", base+"/v1/groups/"+restGroup+"/topics/"+topic+":ack", `{"receiptHandles":["`+m.ReceiptHandle+`"]}`)
		}
		return false
	})
	if code, body := httpDo(t, "GET", base+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz through nginx: %d %s", code, body)
	}
}

// A graceful shutdown of mqgate behind the proxy loses no acknowledged
// message: a producer sends through nginx without pause while mqgate is
// stopped with SIGTERM and restarted on the same data dir and ports;
// afterwards every send that was acknowledged is received.
func TestGracefulShutdownBehindProxyLosesNothing(t *testing.T) {
	e2e(t)
	dataDir := t.TempDir()
	p := start(t, testutil.StartOptions{DataDir: dataDir, Args: []string{"--shutdown-timeout", "20s", "--drain-notice", "1s"}})
	px := startProxy(t, p.GRPC, p.HTTP)
	topic, group := uniq("mesh-durable"), uniq("mesh-reader")
	cli(t, p.GRPC, "topic", "create", topic)
	cli(t, p.GRPC, "group", "create", group)

	pr := newProducer(t, px.GRPC, topic)
	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		failed int
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rs, err := pr.Send(ctx, &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("m-%d", i))})
			cancel()
			mu.Lock()
			if err == nil {
				acked[rs[0].MessageID] = true
			} else {
				failed++
			}
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	waitFor(t, 30*time.Second, "sends through nginx before the shutdown", func() bool { return count() >= 100 })
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(30 * time.Second); code != 0 {
		t.Fatalf("mqgate exit status %d after SIGTERM behind the proxy (want 0):\n%s", code, p.Log())
	}
	before := count()
	// Same data dir, same ports: nginx's upstreams find it again.
	p2 := start(t, testutil.StartOptions{DataDir: dataDir, Args: []string{"--grpc-addr", p.GRPC, "--http-addr", p.HTTP}})
	waitFor(t, 60*time.Second, "sends through nginx after the restart", func() bool { return count() >= before+100 })
	close(stop)
	<-done
	mu.Lock()
	want := acked
	t.Logf("%d sends acknowledged, %d failed while mqgate was draining or down", len(want), failed)
	mu.Unlock()

	c := newConsumer(t, px.GRPC, group, topic, 5*time.Second)
	got := receiveAll(t, c, want, 120*time.Second)
	lost := 0
	for id := range want {
		if _, ok := got[id]; !ok {
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged message %s was lost", id)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged messages lost across a graceful shutdown behind nginx", lost, len(want))
	}
	p2.Stop(30 * time.Second)
}

// The official Node.js client works through nginx too, over TLS (the
// proxy's self-signed certificate given to grpc-js as its roots): sends
// with tags, keys and properties, a tag-filtered receive and acks, every
// call through the proxy.
func TestNodeClientThroughNginx(t *testing.T) {
	e2e(t)
	_, px, topic, group := behindProxy(t, "mesh-node", "mesh-node-g")
	const n = 10
	var res struct {
		Sent     []struct{ ID, Tag, Body string } `json:"sent"`
		Received []struct {
			ID, Tag, Body string
			Corrupted     bool
		} `json:"received"`
		Extra []json.RawMessage `json:"extra"`
	}
	e2eutil.RunNode(t, e2eutil.NodeRun{Scenario: "normal", Endpoint: px.GRPC, Env: []string{
		"MQ_TOPIC=" + topic, "MQ_GROUP=" + group, fmt.Sprintf("MQ_N=%d", n),
		"MQ_SSL=1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=" + filepath.Join(px.dir, "tls", "tls.crt"),
	}}, &res)
	want := map[string]string{}
	for _, s := range res.Sent {
		if s.Tag == "tagA" {
			want[s.ID] = s.Body
		}
	}
	if len(res.Sent) != n || len(res.Received) != len(want) {
		t.Fatalf("sent %d, received %d, want %d tagA messages: %+v", len(res.Sent), len(res.Received), len(want), res.Received)
	}
	for _, m := range res.Received {
		if body, ok := want[m.ID]; !ok || body != m.Body || m.Tag != "tagA" || m.Corrupted {
			t.Errorf("received %+v through nginx, not a tagA message sent intact", m)
		}
	}
	if len(res.Extra) != 0 {
		t.Errorf("after every tagA message was acked a receive still found %d", len(res.Extra))
	}
	px.awaitCalls(t, n, len(want))
}
