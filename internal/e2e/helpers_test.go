package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

func TestMain(m *testing.M) { e2eutil.Main(m) }

// Shared with the other end-to-end packages (internal/e2e/e2eutil).
var (
	uniq        = e2eutil.Uniq
	start       = e2eutil.Start // without the remoting listener
	rpcCode     = e2eutil.RPCCode
	isNoMessage = e2eutil.IsNoMessage
)

// e2e skips in -short mode and under -race and marks the test parallel
// (e2eutil.Begin).
func e2e(t *testing.T) {
	t.Helper()
	e2eutil.Begin(t)
}

func startOpts() testutil.StartOptions { return testutil.StartOptions{} }

// endpointsOf is the access point a client of p sends in QueryRoute.
func endpointsOf(t *testing.T, p *testutil.Proc) *pb.Endpoints { return e2eutil.Endpoints(t, p.GRPC) }

// cli runs `mqgate <args> --server <p.GRPC>` and fails the test unless it
// exits 0.
func cli(t *testing.T, p *testutil.Proc, args ...string) string {
	t.Helper()
	return e2eutil.CLI(t, p.GRPC, args...)
}

func cliResult(t *testing.T, p *testutil.Proc, args ...string) (string, error) {
	t.Helper()
	return e2eutil.CLIResult(t, p.GRPC, args...)
}

func config(p *testutil.Proc, group string) *rmq.Config { return e2eutil.Config(p.GRPC, group) }

func newProducer(t *testing.T, p *testutil.Proc, topics ...string) rmq.Producer {
	t.Helper()
	return e2eutil.StartProducer(t, config(p, ""), rmq.WithTopics(topics...))
}

// newConsumer starts a SimpleConsumer. await 0 is the Go client's default:
// the server then polls for what fits in the client's 3 s deadline.
func newConsumer(t *testing.T, p *testutil.Proc, group string, await time.Duration, subs map[string]*rmq.FilterExpression) rmq.SimpleConsumer {
	t.Helper()
	return e2eutil.StartSimpleConsumer(t, config(p, group), rmq.WithSimpleAwaitDuration(await), rmq.WithSimpleSubscriptionExpressions(subs))
}

func all(topic string) map[string]*rmq.FilterExpression {
	return map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}
}

// receive is one Receive; "no message" is an empty result, anything else a
// test failure.
func receive(t *testing.T, c rmq.SimpleConsumer, max int32, invisible time.Duration) []*rmq.MessageView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mvs, err := c.Receive(ctx, max, invisible)
	if isNoMessage(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return mvs
}

// collect receives until want distinct messages arrived or timeout; it
// returns them in arrival order (duplicates included) so callers can check
// attempts and duplicates.
func collect(t *testing.T, c rmq.SimpleConsumer, want int, invisible, timeout time.Duration, each func(mv *rmq.MessageView)) []*rmq.MessageView {
	t.Helper()
	var got []*rmq.MessageView
	seen := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("received %d distinct messages within %s, want %d", len(seen), timeout, want)
		}
		for _, mv := range receive(t, c, int32(min(32, want-len(seen))), invisible) {
			got = append(got, mv)
			seen[mv.GetMessageId()] = true
			if each != nil {
				each(mv)
			}
		}
	}
	return got
}

func ids(mvs []*rmq.MessageView) []string {
	out := make([]string, len(mvs))
	for i, mv := range mvs {
		out[i] = mv.GetMessageId()
	}
	return out
}

// raw is a plain gRPC client built on the official client's generated
// protocol package, for requests the official client will not send and
// statuses it hides.
type raw struct {
	t  *testing.T
	c  pb.MessagingServiceClient
	id string
}

func dialRaw(t *testing.T, p *testutil.Proc) *raw {
	t.Helper()
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &raw{t: t, c: pb.NewMessagingServiceClient(conn), id: uniq("raw-client")}
}

func (r *raw) ctx(d time.Duration) context.Context {
	return r.ctxAs(r.id, d)
}

// ctxAs is a call context with the given client id ("" sends none).
func (r *raw) ctxAs(clientID string, d time.Duration) context.Context {
	ctx := testutil.Context(r.t, d)
	if clientID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID, "x-mq-language", "GO", "x-mq-protocol", "v2")
	}
	return ctx
}

func res(name string) *pb.Resource { return &pb.Resource{Name: name} }

// receiveRaw runs ReceiveMessage and returns the status frame's code and
// the messages; it checks the frame shape (status first, timestamp last,
// gRPC OK).
func (r *raw) receiveRaw(clientID string, req *pb.ReceiveMessageRequest, d time.Duration) (*pb.Status, []*pb.Message) {
	r.t.Helper()
	stream, err := r.c.ReceiveMessage(r.ctxAs(clientID, d), req)
	if err != nil {
		r.t.Fatal(err)
	}
	var frames []*pb.ReceiveMessageResponse
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.t.Fatalf("ReceiveMessage ended with %v, want gRPC OK", err)
		}
		frames = append(frames, f)
	}
	if len(frames) < 2 || frames[0].GetStatus() == nil || frames[len(frames)-1].GetDeliveryTimestamp() == nil {
		r.t.Fatalf("bad ReceiveMessage frames %v", frames)
	}
	var msgs []*pb.Message
	for _, f := range frames[1 : len(frames)-1] {
		if f.GetMessage() == nil {
			r.t.Fatalf("frame %v between status and timestamp", f)
		}
		msgs = append(msgs, f.GetMessage())
	}
	return frames[0].GetStatus(), msgs
}

func recvReq(group, topic string, batch int32, invisible time.Duration) *pb.ReceiveMessageRequest {
	return &pb.ReceiveMessageRequest{
		Group:             res(group),
		MessageQueue:      &pb.MessageQueue{Topic: res(topic), Id: 0, Broker: &pb.Broker{Name: "mqgate-0"}},
		FilterExpression:  &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"},
		BatchSize:         batch,
		InvisibleDuration: durationpb.New(invisible),
	}
}

func (r *raw) ack(group, topic, handle string) *pb.Status {
	r.t.Helper()
	resp, err := r.c.AckMessage(r.ctx(10*time.Second), &pb.AckMessageRequest{Group: res(group), Topic: res(topic),
		Entries: []*pb.AckMessageEntry{{MessageId: "x", ReceiptHandle: handle}}})
	if err != nil {
		r.t.Fatal(err)
	}
	if len(resp.Entries) != 1 {
		r.t.Fatalf("ack answered %d entries", len(resp.Entries))
	}
	return resp.Entries[0].Status
}

func wantCode(t *testing.T, what string, st *pb.Status, want pb.Code) {
	t.Helper()
	if st.GetCode() != want {
		t.Fatalf("%s: %v (%q), want %v", what, st.GetCode(), st.GetMessage(), want)
	}
}

// sendBodies sends n messages with the official producer and returns
// message id → body.
func sendBodies(t *testing.T, pr rmq.Producer, topic string, n int, tag string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range n {
		body := fmt.Sprintf("%s-%s-%d", topic, tag, i)
		m := &rmq.Message{Topic: topic, Body: []byte(body)}
		if tag != "" {
			m.SetTag(tag)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, m)
		cancel()
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		out[rs[0].MessageID] = body
	}
	return out
}
