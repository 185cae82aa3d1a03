package grpcserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// In-process calls: how the node's REST API reaches its own gRPC services.
//
// InProcess returns a grpc.ClientConnInterface whose unary calls run the
// registered handler on the caller's goroutine, with no serialization and
// no HTTP/2: the request and response messages are handed over (a shallow
// copy of their fields), never encoded. Everything else a call from the network passes is kept,
// in the same order:
//
//   - the caller's outgoing metadata becomes the handler's incoming
//     metadata, validated as grpc-go's client validates it (INTERNAL for
//     a key or value it would refuse);
//   - the taps: callInfoTap (server.go), then the auth tap (limits.go)
//     when auth is on;
//   - the stats handler, when spans are recorded (otelgrpc: TagRPC,
//     InHeader, Begin, payloads, End);
//   - the receive limit (RESOURCE_EXHAUSTED above RecvLimit);
//   - the whole unary interceptor chain (server.go);
//   - a transport stream in the context, so grpc.Method, grpc.SetHeader,
//     grpc.SendHeader and grpc.SetTrailer work, the headers and trailers
//     reaching grpc.Header and grpc.Trailer call options;
//   - the server's error conversion: a handler error that is not a status
//     becomes UNKNOWN, a context error CANCELLED or DEADLINE_EXCEEDED.
//
// The handler's context carries the caller's deadline and cancellation
// but none of the caller's other values (as across a connection), and is
// cancelled when the handler returns. Its peer is InProcessAddr. Streaming
// methods are not served in process (NewStream answers UNIMPLEMENTED):
// the services reached this way (mqgate.rest.v1, mqgate.admin.v1) have
// none. Register services through Server.RegisterService for them to be
// reachable in process.

// InProcessAddr is the peer address of in-process calls.
var InProcessAddr = inProcessAddr{}

type inProcessAddr struct{}

func (inProcessAddr) Network() string { return "inprocess" }
func (inProcessAddr) String() string  { return "in-process" }

// maxInProcessMsg bounds a response of an in-process call, as a gRPC
// client's receive limit would: above any receive of 32 messages of the
// largest body.
const maxInProcessMsg = 256 << 20

// inProcessMethod is one registered unary method.
type inProcessMethod struct {
	impl    any
	handler grpc.MethodHandler
}

// RegisterService registers impl on the grpc.Server and for in-process
// calls. Call it before Serve.
//
// The server's unary handlers leave their request to be read by the
// request-budget interceptor (reads.go); in-process calls get the
// method's own handler (their requests arrive decoded).
func (s *Server) RegisterService(sd *grpc.ServiceDesc, impl any) {
	late := *sd
	late.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		late.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: lateRead(m.Handler)}
	}
	s.GRPC.RegisterService(&late, impl)
	for _, m := range sd.Methods {
		s.methods["/"+sd.ServiceName+"/"+m.MethodName] = inProcessMethod{impl: impl, handler: m.Handler}
	}
	s.services[sd.ServiceName] = true
}

// InProcess returns the in-process connection to s (see above).
func (s *Server) InProcess() grpc.ClientConnInterface { return inProcessConn{s} }

type inProcessConn struct{ s *Server }

func (inProcessConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streaming calls are not served in process")
}

func (c inProcessConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	s := c.s
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	req, ok := args.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %T is not a protobuf message", args)
	}
	out, ok := reply.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %T is not a protobuf message", reply)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if err := validateMD(md); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	m, ok := s.methods[method]
	if !ok {
		return unknownMethod(s, method)
	}

	sctx, cancel := serverContext(ctx)
	defer cancel()
	sctx = peer.NewContext(sctx, &peer.Peer{Addr: InProcessAddr, LocalAddr: InProcessAddr})
	if md == nil {
		md = metadata.MD{}
	}
	sctx = metadata.NewIncomingContext(sctx, md)
	if s.tap != nil {
		var err error
		if sctx, err = s.tap(sctx, &tap.Info{FullMethodName: method, Header: md}); err != nil {
			st, ok := status.FromError(err)
			if !ok {
				st = status.New(codes.PermissionDenied, err.Error())
			}
			return st.Err()
		}
	}
	sh := s.stats
	var begin time.Time
	if sh != nil {
		sctx = sh.TagRPC(sctx, &stats.RPCTagInfo{FullMethodName: method})
		sh.HandleRPC(sctx, &stats.InHeader{FullMethod: method, RemoteAddr: InProcessAddr, LocalAddr: InProcessAddr, Header: md})
		begin = time.Now()
		sh.HandleRPC(sctx, &stats.Begin{BeginTime: begin})
	}
	ts := &inProcessStream{method: method}
	sctx = grpc.NewContextWithServerTransportStream(sctx, ts)

	resp, err := s.callHandler(sctx, ts, m, method, req)
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		err = st.Err()
	}
	var n int // the response's size, sized once
	if err == nil {
		n = proto.Size(resp)
	}
	if sh != nil {
		if err == nil {
			sh.HandleRPC(sctx, &stats.OutPayload{Payload: resp, Length: n, WireLength: n + 5, SentTime: time.Now()})
		}
		sh.HandleRPC(sctx, &stats.End{BeginTime: begin, EndTime: time.Now(), Error: err})
	}
	ts.deliver(opts)
	if cerr := ctx.Err(); cerr != nil {
		// The caller stopped waiting: it sees its own context's end.
		return status.FromContextError(cerr).Err()
	}
	if err != nil {
		return err
	}
	if n > maxInProcessMsg {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, maxInProcessMsg)
	}
	move(out, resp)
	return nil
}

// move sets dst, a message nobody else holds, to src's fields: a shallow
// copy (lists, maps, messages and bytes are shared, not copied), for a src
// its owner no longer reads or writes. A request is the caller's until
// Invoke returns and then dropped; a response is the handler's result.
// Messages of different types are merged instead.
func move(dst, src proto.Message) {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	if d.Descriptor() != s.Descriptor() {
		proto.Merge(dst, src)
		return
	}
	s.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
	if u := s.GetUnknown(); len(u) > 0 {
		d.SetUnknown(u)
	}
}

// callHandler checks the receive limit and runs the method's handler
// through the interceptor chain; it returns a proto response or an error.
func (s *Server) callHandler(ctx context.Context, ts *inProcessStream, m inProcessMethod, method string, req proto.Message) (proto.Message, error) {
	n := proto.Size(req)
	if n > maxInProcessMsg {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, maxInProcessMsg)
	}
	if n > s.recvLimit {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, s.recvLimit)
	}
	if s.stats != nil {
		s.stats.HandleRPC(ctx, &stats.InPayload{Payload: req, Length: n, CompressedLength: n, WireLength: n + 5, RecvTime: time.Now()})
	}
	dec := func(v any) error {
		pm, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %T is not a protobuf message", v)
		}
		if pm.ProtoReflect().Descriptor() != req.ProtoReflect().Descriptor() {
			return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %s is not %s",
				req.ProtoReflect().Descriptor().FullName(), pm.ProtoReflect().Descriptor().FullName())
		}
		move(pm, req)
		ts.sized, ts.size = pm, n
		return nil
	}
	resp, err := m.handler(m.impl, ctx, dec, s.unary)
	if err != nil {
		return nil, err
	}
	pm, ok := resp.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %s answered %T, not a protobuf message", method, resp)
	}
	return pm, nil
}

// unknownMethod is the server's answer to a method nobody registered.
func unknownMethod(s *Server, method string) error {
	sm, _ := strings.CutPrefix(method, "/")
	pos := strings.LastIndex(sm, "/")
	if pos < 0 {
		return status.Errorf(codes.Unimplemented, "malformed method name: %q", method)
	}
	if s.services[sm[:pos]] {
		return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", sm[pos+1:], sm[:pos])
	}
	return status.Errorf(codes.Unimplemented, "unknown service %v", sm[:pos])
}

// validateMD refuses what grpc-go's client refuses to send: keys outside
// [0-9a-z-_.] and, but for -bin keys, values outside printable ASCII.
func validateMD(md metadata.MD) error {
	for k, vs := range md {
		if k == "" {
			return fmt.Errorf("there is an empty key in the header")
		}
		if k[0] == ':' {
			continue
		}
		for i := 0; i < len(k); i++ {
			r := k[i]
			if !(r >= 'a' && r <= 'z') && !(r >= '0' && r <= '9') && r != '.' && r != '-' && r != '_' {
				return fmt.Errorf("header key %q contains illegal characters not in [0-9a-z-_.]", k)
			}
		}
		if strings.HasSuffix(k, "-bin") {
			continue
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if v[i] < 0x20 || v[i] > 0x7e {
					return fmt.Errorf("header key %q contains value with non-printable ASCII characters", k)
				}
			}
		}
	}
	return nil
}

// serverContext is the handler's context: the caller's deadline and
// cancellation, none of its values, cancelled when the call ends.
func serverContext(caller context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(cancelOnly{caller})
}

// cancelOnly has its caller's deadline, Done and Err and no values.
type cancelOnly struct{ caller context.Context }

func (c cancelOnly) Deadline() (time.Time, bool) { return c.caller.Deadline() }
func (c cancelOnly) Done() <-chan struct{}       { return c.caller.Done() }
func (c cancelOnly) Err() error                  { return c.caller.Err() }
func (cancelOnly) Value(any) any                 { return nil }

// AfterFunc lets context.WithCancel propagate the caller's end without a
// goroutine per call.
func (c cancelOnly) AfterFunc(f func()) func() bool { return context.AfterFunc(c.caller, f) }

// inProcessStream is the grpc.ServerTransportStream of an in-process
// call: it keeps what the handler sets for the caller's grpc.Header and
// grpc.Trailer options.
type inProcessStream struct {
	method string
	// sized is the request the handler received, of size bytes: the
	// budget interceptor need not size it again.
	sized proto.Message
	size  int

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
	sent    bool
}

func (t *inProcessStream) Method() string { return t.method }

func (t *inProcessStream) SetHeader(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	if err := validateMD(md); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	t.header = metadata.Join(t.header, md)
	return nil
}

func (t *inProcessStream) SendHeader(md metadata.MD) error {
	if err := t.SetHeader(md); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent {
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	}
	t.sent = true
	return nil
}

func (t *inProcessStream) SetTrailer(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	if err := validateMD(md); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trailer = metadata.Join(t.trailer, md)
	return nil
}

// requestSize is the size of req when it is the request of an in-process
// call, which sized it already.
func requestSize(ctx context.Context, req proto.Message) (int, bool) {
	if ts, ok := grpc.ServerTransportStreamFromContext(ctx).(*inProcessStream); ok && ts.sized == req {
		return ts.size, true
	}
	return 0, false
}

// deliver hands the headers and trailers to the caller's call options.
func (t *inProcessStream) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent = true
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = t.header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = t.trailer.Copy()
		case grpc.PeerCallOption:
			*o.PeerAddr = peer.Peer{Addr: InProcessAddr, LocalAddr: InProcessAddr}
		}
	}
}
