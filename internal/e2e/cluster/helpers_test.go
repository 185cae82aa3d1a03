package cluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
)

// acker acknowledges over the v2 API itself, member by member: the
// official client v5.1.3's Ack returns nil whatever status the server
// answers, so a test that must know an ack was accepted cannot use it.
type acker struct {
	t     *testing.T
	g     *group
	id    string
	conns []pb.MessagingServiceClient // by member index
}

func (g *group) acker() *acker {
	g.t.Helper()
	a := &acker{t: g.t, g: g, id: e2eutil.Uniq("acker")}
	for _, m := range g.members {
		conn, err := grpc.NewClient(m.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			g.t.Fatal(err)
		}
		g.t.Cleanup(func() { conn.Close() })
		a.conns = append(a.conns, pb.NewMessagingServiceClient(conn))
	}
	return a
}

// ackOnce asks member i to acknowledge handle; nil means the server
// answered OK.
func (a *acker) ackOnce(ctx context.Context, i int, group, topic, handle string) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", a.id, "x-mq-language", "GO", "x-mq-protocol", "v2")
	resp, err := a.conns[i].AckMessage(ctx, &pb.AckMessageRequest{Group: &pb.Resource{Name: group}, Topic: &pb.Resource{Name: topic},
		Entries: []*pb.AckMessageEntry{{MessageId: "x", ReceiptHandle: handle}}})
	if err != nil {
		return fmt.Errorf("member %d: %w", i+1, err)
	}
	if len(resp.GetEntries()) != 1 {
		return fmt.Errorf("member %d: ack answered %d entries", i+1, len(resp.GetEntries()))
	}
	if st := resp.GetEntries()[0].GetStatus(); st.GetCode() != pb.Code_OK {
		return fmt.Errorf("member %d: %v: %s", i+1, st.GetCode(), st.GetMessage())
	}
	return nil
}

// ack acknowledges handle through the running members in turn, again and
// again (as a client retries), until one answers OK or by passes. It
// returns the attempts made, and the last refusal when none succeeded.
func (a *acker) ack(by time.Time, group, topic, handle string) (int, error) {
	var last error
	for attempt := 1; ; attempt++ {
		for i, m := range a.g.members {
			if m.proc == nil || !alive(m.proc) {
				continue
			}
			d := time.Now().Add(5 * time.Second)
			if by.Before(d) {
				d = by
			}
			ctx, cancel := context.WithDeadline(context.Background(), d)
			last = a.ackOnce(ctx, i, group, topic, handle)
			cancel()
			if last == nil {
				return attempt, nil
			}
			if time.Now().After(by) {
				return attempt, last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sendOnce sends one NORMAL message with body to member i over the v2
// API, once, and returns the status the server answered (or the gRPC
// error) and the message id it carried.
func (a *acker) sendOnce(ctx context.Context, i int, topic, body string) (string, *pb.Status, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", a.id, "x-mq-language", "GO", "x-mq-protocol", "v2")
	id := fmt.Sprintf("01AABBCCDDEEFF%04X%016X", os.Getpid()&0xffff, rawSeq.Add(1))
	resp, err := a.conns[i].SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{{Topic: &pb.Resource{Name: topic},
		Body: []byte(body), SystemProperties: &pb.SystemProperties{MessageId: id, MessageType: pb.MessageType_NORMAL}}}})
	if err != nil {
		return id, nil, err
	}
	return id, resp.GetStatus(), nil
}

var rawSeq atomic.Int64

// mustAck is ack that fails the test when no member accepted handle
// within d.
func (a *acker) mustAck(d time.Duration, group, topic string, mv *rmq.MessageView) {
	a.t.Helper()
	if _, err := a.ack(time.Now().Add(d), group, topic, mv.GetReceiptHandle()); err != nil {
		a.t.Fatalf("ack of %s (body %q) not accepted within %v: %v", mv.GetMessageId(), mv.GetBody(), d, err)
	}
}

// sendOK sends m, retrying (as an application would) until an attempt
// answers OK or d passes; it fails the test then. It returns the message
// id of the send that was answered OK.
func sendOK(t *testing.T, pr rmq.Producer, m *rmq.Message, d time.Duration) string {
	t.Helper()
	id, _, err := sendRetry(pr, m, d)
	if err != nil {
		t.Fatalf("send %q: no OK within %v: %v", m.Body, d, err)
	}
	return id
}

// sendRetry sends m again and again until an attempt answers OK or d
// passes. It returns the message id answered OK and the attempts made,
// or the last error.
func sendRetry(pr rmq.Producer, m *rmq.Message, d time.Duration) (string, int, error) {
	deadline := time.Now().Add(d)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, m)
		cancel()
		if err == nil {
			return rs[0].MessageID, attempt, nil
		}
		if time.Now().After(deadline) {
			return "", attempt, err
		}
		time.Sleep(100 * time.Millisecond) // the client's own retries may have ended at once
	}
}

// killAll kills every running member with kill -9 at once.
func (g *group) killAll() {
	var wg sync.WaitGroup
	for _, m := range g.members {
		if m.proc != nil && alive(m.proc) {
			wg.Add(1)
			go func() { defer wg.Done(); m.proc.Kill9() }()
		}
	}
	wg.Wait()
}

// startAll restarts every member that is not running, at once (a member
// alone cannot elect a leader, so they must come up together).
func (g *group) startAll() {
	var wg sync.WaitGroup
	for _, m := range g.members {
		if m.proc == nil || !alive(m.proc) {
			wg.Add(1)
			m.proc = nil
			go func() { defer wg.Done(); g.start(m) }()
		}
	}
	wg.Wait()
	g.started()
}

// others are the members other than m.
func (g *group) others(m *member) []*member {
	var out []*member
	for _, o := range g.members {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// drain receives with c until have(got) holds or d passes, recording
// each delivery in got (message id → bodies, one per delivery) and
// acknowledging it through a.
func drain(t *testing.T, c rmq.SimpleConsumer, a *acker, group, topic string, d time.Duration, got map[string][]string, have func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !have() {
		if time.Now().After(deadline) {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(rctx, 32, 30*time.Second)
		cancel()
		if err != nil {
			backoff(err)
			continue
		}
		for _, mv := range mvs {
			got[mv.GetMessageId()] = append(got[mv.GetMessageId()], string(mv.GetBody()))
			a.mustAck(20*time.Second, group, topic, mv)
		}
	}
}

// backoff pauses a receive loop after an error other than "no message"
// (a member down, an election), which may come back at once.
func backoff(err error) {
	if !e2eutil.IsNoMessage(err) {
		time.Sleep(100 * time.Millisecond)
	}
}
