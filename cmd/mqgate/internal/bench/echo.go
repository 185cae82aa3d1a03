package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// echoServer is the benchmark's ceiling: a plain gRPC server answering the
// same MessagingService calls with the same payload shapes, doing no work.
// Whatever mqgate costs beyond it is mqgate's own.
type echoServer struct {
	v2.UnimplementedMessagingServiceServer
	batch []*v2.Message
	// relay, when set (the e2e ceiling), carries each sent message to a
	// receive: the least a broker must do to get a message from a
	// producer to a long-polling consumer, with the same calls.
	relay chan *v2.Message
}

// relayCap bounds the relay; a send finding it full is refused
// (RESOURCE_EXHAUSTED), as a broker's would be with no room left.
const relayCap = 1 << 16

func newEchoServer(size int) *echoServer {
	body := make([]byte, size)
	e := &echoServer{}
	for i := 0; i < 32; i++ {
		e.batch = append(e.batch, &v2.Message{
			Topic: &v2.Resource{Name: "bench"},
			SystemProperties: &v2.SystemProperties{
				MessageId: fmt.Sprintf("ECHO%030d", i), BodyDigest: &v2.Digest{Type: v2.DigestType_MD5, Checksum: "0"},
				BodyEncoding: v2.Encoding_IDENTITY, MessageType: v2.MessageType_NORMAL, BornTimestamp: timestamppb.Now(),
				BornHost: "bench", StoreTimestamp: timestamppb.Now(), StoreHost: "bench", QueueId: 0, QueueOffset: ptr(int64(i)),
				ReceiptHandle:   ptr("r1.AQAAAAAAAAAAAAAAAAAAAQAAAAAAAAGMXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
				DeliveryAttempt: ptr(int32(1)),
			},
			Body: body,
		})
	}
	return e
}

func ptr[T any](v T) *T { return &v }

var okStatus = &v2.Status{Code: v2.Code_OK, Message: "OK"}

func (e *echoServer) SendMessage(_ context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	out := &v2.SendMessageResponse{Status: okStatus}
	for i, m := range req.Messages {
		if e.relay != nil {
			select {
			case e.relay <- m:
			default:
				return nil, status.Error(codes.ResourceExhausted, "echo relay full")
			}
		}
		out.Entries = append(out.Entries, &v2.SendResultEntry{Status: okStatus, MessageId: m.GetSystemProperties().GetMessageId(), Offset: int64(i)})
	}
	return out, nil
}

func (e *echoServer) ReceiveMessage(req *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	if e.relay != nil {
		return e.relayReceive(req, stream)
	}
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: okStatus}}); err != nil {
		return err
	}
	n := min(int(req.GetBatchSize()), len(e.batch))
	for _, m := range e.batch[:n] {
		if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			return err
		}
	}
	return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
}

// relayReceive long-polls the relay like mqgate's receive: it waits for a
// first message up to the request's polling timeout (ending before the
// caller's deadline), then takes what else is there, up to the batch size.
func (e *echoServer) relayReceive(req *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	ctx := stream.Context()
	wait := req.GetLongPollingTimeout().AsDuration()
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-100*time.Millisecond)
	}
	var got []*v2.Message
	t := time.NewTimer(max(wait, 0))
	select {
	case m := <-e.relay:
		got = append(got, m)
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	for len(got) > 0 && len(got) < int(max(req.GetBatchSize(), 1)) {
		select {
		case m := <-e.relay:
			got = append(got, m)
			continue
		default:
		}
		break
	}
	if len(got) == 0 {
		if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: &v2.Status{Code: v2.Code_MESSAGE_NOT_FOUND, Message: "no new message"}}}); err != nil {
			return err
		}
		return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
	}
	if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: okStatus}}); err != nil {
		return err
	}
	now := timestamppb.Now()
	for i, m := range got {
		// What a broker adds to a delivered message, so the frames are
		// the size of mqgate's.
		sp := m.GetSystemProperties()
		if sp == nil {
			sp = &v2.SystemProperties{}
			m.SystemProperties = sp
		}
		tmpl := e.batch[i%len(e.batch)].SystemProperties
		sp.BodyDigest, sp.StoreTimestamp, sp.StoreHost = tmpl.BodyDigest, now, tmpl.StoreHost
		sp.QueueOffset, sp.ReceiptHandle, sp.DeliveryAttempt = tmpl.QueueOffset, tmpl.ReceiptHandle, tmpl.DeliveryAttempt
		if err := stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			return err
		}
	}
	return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: now}})
}

func (e *echoServer) AckMessage(_ context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	out := &v2.AckMessageResponse{Status: okStatus}
	for _, en := range req.Entries {
		out.Entries = append(out.Entries, &v2.AckMessageResultEntry{MessageId: en.MessageId, ReceiptHandle: en.ReceiptHandle, Status: okStatus})
	}
	return out, nil
}

func (e *echoServer) QueryRoute(_ context.Context, req *v2.QueryRouteRequest) (*v2.QueryRouteResponse, error) {
	return &v2.QueryRouteResponse{Status: okStatus}, nil
}

// Telemetry answers every Settings command with the same settings, the
// least the SDK's producers (bench produce --sdk-linger) need to start.
func (e *echoServer) Telemetry(stream grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]) error {
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return nil
		}
		if s := cmd.GetSettings(); s != nil {
			if err := stream.Send(&v2.TelemetryCommand{Status: okStatus, Command: &v2.TelemetryCommand_Settings{Settings: s}}); err != nil {
				return err
			}
		}
	}
}

func (e *echoServer) Heartbeat(context.Context, *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	return &v2.HeartbeatResponse{Status: okStatus}, nil
}

func (e *echoServer) NotifyClientTermination(context.Context, *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	return &v2.NotifyClientTerminationResponse{Status: okStatus}, nil
}

// The plain echo (echo-server --plain) is the floor of a gRPC call on
// this machine: a server with the same transport options that neither
// decodes a request nor encodes a response. Its handlers take each request
// as bytes they drop and answer with responses encoded once at start, of
// the v2 echo's shapes and sizes: a send of --batch messages gets as many
// entries, an ack of --ack-batch handles as many, a receive the status,
// 32 messages and the delivery timestamp. What mqgate costs above it is
// all of mqgate's own work, decoding and encoding included (the v2 echo
// above does those).

// rawFrame is a message the plain echo's codec neither decodes nor
// encodes.
type rawFrame struct{ b []byte }

// rawCodec drops what it reads and writes a rawFrame's bytes as they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*rawFrame)
	if !ok {
		return nil, fmt.Errorf("plain echo: cannot encode %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

// plainEcho holds the encoded responses.
type plainEcho struct {
	send, ack, route *rawFrame
	receive          []*rawFrame
}

func mustFrame(m proto.Message) *rawFrame {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return &rawFrame{b: b}
}

func newPlainEcho(size, batch, ackBatch int) *plainEcho {
	e := newEchoServer(size)
	p := &plainEcho{route: mustFrame(&v2.QueryRouteResponse{Status: okStatus})}
	send := &v2.SendMessageResponse{Status: okStatus}
	for i := range batch {
		send.Entries = append(send.Entries, &v2.SendResultEntry{Status: okStatus, MessageId: fmt.Sprintf("01BENC%028X", i), Offset: int64(i)})
	}
	p.send = mustFrame(send)
	ack := &v2.AckMessageResponse{Status: okStatus}
	for _, m := range e.batch[:min(ackBatch, len(e.batch))] {
		ack.Entries = append(ack.Entries, &v2.AckMessageResultEntry{MessageId: m.SystemProperties.MessageId, ReceiptHandle: m.SystemProperties.GetReceiptHandle(), Status: okStatus})
	}
	p.ack = mustFrame(ack)
	p.receive = append(p.receive, mustFrame(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: okStatus}}))
	for _, m := range e.batch {
		p.receive = append(p.receive, mustFrame(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}}))
	}
	p.receive = append(p.receive, mustFrame(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}}))
	return p
}

func (p *plainEcho) unary(out *rawFrame) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(&rawFrame{}); err != nil {
			return nil, err
		}
		return out, nil
	}
}

func (p *plainEcho) receiveMessage(_ any, stream grpc.ServerStream) error {
	if err := stream.RecvMsg(&rawFrame{}); err != nil {
		return err
	}
	for _, f := range p.receive {
		if err := stream.SendMsg(f); err != nil {
			return err
		}
	}
	return nil
}

func (p *plainEcho) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "apache.rocketmq.v2.MessagingService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "SendMessage", Handler: p.unary(p.send)},
			{MethodName: "AckMessage", Handler: p.unary(p.ack)},
			{MethodName: "QueryRoute", Handler: p.unary(p.route)},
		},
		Streams: []grpc.StreamDesc{{StreamName: "ReceiveMessage", Handler: p.receiveMessage, ServerStreams: true}},
	}
}

// benchEchoServer runs the echo server until SIGTERM/SIGINT, printing its
// address as the first stdout line (hidden subcommand used by `bench`).
func benchEchoServer(args []string, stdout, stderr io.Writer) int {
	addr, size, relay, plain, batch, ackBatch := "127.0.0.1:0", 1024, false, false, 1, receiveBatchSize
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--relay":
			relay = true
		case args[i] == "--plain":
			plain = true
		case args[i] == "--batch" && i+1 < len(args):
			i++
			fmt.Sscan(args[i], &batch)
		case args[i] == "--ack-batch" && i+1 < len(args):
			i++
			fmt.Sscan(args[i], &ackBatch)
		case args[i] == "--addr" && i+1 < len(args):
			i++
			addr = args[i]
		case args[i] == "--size" && i+1 < len(args):
			i++
			fmt.Sscan(args[i], &size)
		}
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "echo server:", err)
		return 1
	}
	// The same transport options mqgate's server uses, so the difference
	// measured is mqgate's work, not server tuning.
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(grpcserver.MaxRecvMsgSize), grpc.NumStreamWorkers(grpcserver.StreamWorkers()),
		experimental.BufferPool(grpcserver.BufferPool)}
	if plain {
		sopts = append(sopts, grpc.ForceServerCodecV2(rawCodec{}))
	}
	s := grpc.NewServer(sopts...)
	if plain {
		p := newPlainEcho(size, batch, ackBatch)
		s.RegisterService(p.desc(), p)
	} else {
		e := newEchoServer(size)
		if relay {
			e.relay = make(chan *v2.Message, relayCap)
		}
		v2.RegisterMessagingServiceServer(s, e)
	}
	fmt.Fprintln(stdout, lis.Addr().String())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; s.Stop() }()
	// The same diagnostic hook as serve's: profile the echo's whole run.
	if path := os.Getenv("MQGATE_TEST_ECHO_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	_ = s.Serve(lis)
	return 0
}
