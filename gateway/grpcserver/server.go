package grpcserver

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // clients may compress; harmless to accept
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/internal/telemetry"
)

// Options configure the gRPC server.
type Options struct {
	TLS                   *tls.Config // nil: plaintext only
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	MaxConnectionIdle     time.Duration
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
	// preface and first frame (0: DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	Logger           *slog.Logger
	// MeterProvider receives the call metric rpc.server.call.duration
	// (calltelemetry.go); nil records none.
	MeterProvider metric.MeterProvider
	// AddHistogram, when set, exports the call metric instead: kept in
	// the server and handed to the telemetry's readers at each collection
	// (telemetry.Telemetry.AddHistogram), which costs a call far less than
	// recording through MeterProvider. Server.Close stops it.
	AddHistogram func(telemetry.HistogramSource) (remove func())
	// TracerProvider and Tracing: when Tracing (spans are exported),
	// otelgrpc's stats handler records a server span per call from
	// TracerProvider. Otherwise no stats handler is installed (it costs
	// ~18 % of the server's CPU per send, calltelemetry.go) and the
	// caller's trace context is still continued, for logs and the
	// broker's (non-recording) spans.
	TracerProvider         trace.TracerProvider
	Tracing                bool
	Gate                   *admission.Gate
	ExtraUnaryInterceptors []grpc.UnaryServerInterceptor
	// Sessions, when set, is told about every MessagingService call (a
	// client is alive while it calls).
	Sessions *session.Registry
	// Auth, when set, authenticates every call but health checks and
	// reflection and checks what it touches (auth.go); nil: auth off.
	Auth *auth.Authenticator
	// AdminViews, when set, names the admin API methods any authenticated
	// user may call: the service itself checks what each call touches and
	// answers only what the caller may see (gateway/admin's OpenToUsers).
	// Every other admin method needs an admin user.
	AdminViews func(fullMethod string) bool
	// MaxBodySize is the broker's message body limit; the largest request
	// accepted is RecvLimit of it (0: DefaultMaxBodySize).
	MaxBodySize int
	// MaxInFlightBytes is the request budget: the bytes of requests being
	// read or held by handlers at once (reads.go; 0:
	// DefaultMaxInFlightBytes).
	MaxInFlightBytes int64
	// RequestSize, when set, is the request budget's measure of the
	// requests it knows (ok false: proto.Size measures them): it must
	// give proto.Size's figure, faster.
	RequestSize func(proto.Message) (int, bool)
	// Codec, when set, encodes and decodes every call's messages in place
	// of grpc-go's proto codec (grpc.ForceServerCodecV2); it must write
	// and read the same bytes as that codec.
	Codec encoding.CodecV2
}

// Server wraps a grpc.Server with health state.
type Server struct {
	GRPC   *grpc.Server
	Health *health.Server

	// What in-process calls pass (inprocess.go): the methods registered
	// through RegisterService, the unary interceptor chain, the tap
	// (callInfoTap, then the auth tap when auth is on), the stats handler
	// (nil when not installed) and the receive limit.
	methods   map[string]inProcessMethod
	services  map[string]bool
	unary     grpc.UnaryServerInterceptor
	tap       tap.ServerInHandle
	stats     stats.Handler
	recvLimit int
	reads     *reads
	tel       *callTelemetry
}

// DefaultHandshakeTimeout is Options.HandshakeTimeout when 0.
const DefaultHandshakeTimeout = 10 * time.Second

// Flow control and streams per connection.
const (
	streamWindow = 64 << 10
	connWindow   = 16 << 20 // what grpc-go's dynamic windows grow to at most
	maxStreams   = 1024
)

// ServiceNames whose health is reported; "" is the whole server.
var healthNames = []string{"", "apache.rocketmq.v2.MessagingService", "mqgate.admin.v1.AdminService"}

// New builds the server. Register services on s.GRPC before Serve.
func New(o Options) *Server {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	gate := o.Gate
	if gate == nil {
		gate = admission.NewGate()
	}
	kasp := keepalive.ServerParameters{
		Time:                  time.Minute,
		Timeout:               20 * time.Second,
		MaxConnectionIdle:     o.MaxConnectionIdle,
		MaxConnectionAge:      o.MaxConnectionAge,
		MaxConnectionAgeGrace: o.MaxConnectionAgeGrace,
	}
	if kasp.MaxConnectionAge > 0 && kasp.MaxConnectionAgeGrace == 0 {
		kasp.MaxConnectionAgeGrace = 30 * time.Second
	}
	// Java clients ping every 300 s even without calls; grpc-go's default
	// policy (5 min, no pings without streams) would GOAWAY them.
	kaep := keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}

	recoverOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in gRPC handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error (logged by the server)")
	})
	// Interceptor order, outermost first: call telemetry (continues the
	// caller's trace context when no stats handler does, records the call
	// metric) → call log (reads the client id
	// once, the request id when needed, then logs the final outcome — including a recovered
	// panic and the v2 status the response carries) → in-flight budget
	// (limits.go; before that, with auth on, authTap refused unsigned calls
	// before their messages were read) → auth, when on (auth.go:
	// the signature, then what the call touches; a refusal is logged with
	// its outcome) → drain admission →
	// client id (MessagingService only: answers CLIENT_ID_REQUIRED as a
	// payload and marks the client seen) → recovery (innermost, so what it
	// returns is what logging and tracing record).
	tel := newCallTelemetry(o.MeterProvider, o.AddHistogram, !o.Tracing)
	inflight := o.MaxInFlightBytes
	if inflight <= 0 {
		inflight = DefaultMaxInFlightBytes
	}
	rd := newReads(inflight, RecvLimit(o.MaxBodySize), o.Auth, log)
	rd.sizer = o.RequestSize
	unary := []grpc.UnaryServerInterceptor{
		tel.unary(),
		callLogUnary(log),
		rd.unary(),
	}
	if o.Auth != nil {
		unary = append(unary, authUnary(o.Auth, o.AdminViews, log))
	}
	unary = append(unary, drainUnary(gate), clientIDUnary(o.Sessions))
	unary = append(unary, o.ExtraUnaryInterceptors...)
	unary = append(unary, recovery.UnaryServerInterceptor(recoverOpt))
	stream := []grpc.StreamServerInterceptor{
		tel.stream(),
		callLogStream(log),
		rd.stream(),
	}
	if o.Auth != nil {
		stream = append(stream, authStream(o.Auth, o.AdminViews, log))
	}
	stream = append(stream, clientIDStream(o.Sessions), recovery.StreamServerInterceptor(recoverOpt))
	srv := &Server{methods: map[string]inProcessMethod{}, services: map[string]bool{},
		unary: chainUnary(unary), recvLimit: RecvLimit(o.MaxBodySize), reads: rd, tel: tel}
	sopts := []grpc.ServerOption{
		grpc.NumStreamWorkers(StreamWorkers()),
		grpc.ConnectionTimeout(cmp.Or(o.HandshakeTimeout, DefaultHandshakeTimeout)),
		// Static windows (no BDP growth): a stream whose request waits
		// for room in the request budget holds at most its window; the
		// connection's window, replenished as data arrives, only paces
		// the connection.
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.MaxConcurrentStreams(maxStreams),
		experimental.BufferPool(BufferPool),
		grpc.MaxRecvMsgSize(RecvLimit(o.MaxBodySize)),
		grpc.KeepaliveParams(kasp),
		grpc.KeepaliveEnforcementPolicy(kaep),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	}
	if o.Tracing && o.TracerProvider != nil {
		// Spans only: the metric comes from tel in every mode.
		srv.stats = otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(o.TracerProvider),
			otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()))
		sopts = append(sopts, grpc.StatsHandler(srv.stats))
	}
	var auth tap.ServerInHandle
	if o.Auth != nil {
		auth = authTap(o.Auth, log)
	}
	srv.tap = callInfoTap(auth)
	sopts = append(sopts, grpc.InTapHandle(srv.tap))
	if o.TLS != nil {
		sopts = append(sopts, grpc.Creds(NewDualCredentials(o.TLS)))
	}
	if o.Codec != nil {
		sopts = append(sopts, grpc.ForceServerCodecV2(o.Codec))
	}
	gs := grpc.NewServer(sopts...)
	hs := health.NewServer()
	for _, n := range healthNames {
		hs.SetServingStatus(n, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	srv.GRPC, srv.Health = gs, hs
	healthpb.RegisterHealthServer(srv, hs) // through RegisterService: its requests are read within the budget
	reflection.Register(gs)
	return srv
}

// chainUnary runs ics in order, outermost first, as
// grpc.ChainUnaryInterceptor does on the server.
func chainUnary(ics []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return ics[0](ctx, req, info, chainNext(ics, 1, info, h))
	}
}

func chainNext(ics []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(ics) {
		return h
	}
	return func(ctx context.Context, req any) (any, error) {
		return ics[i](ctx, req, info, chainNext(ics, i+1, info, h))
	}
}

// SetServing flips every health name to SERVING or NOT_SERVING.
func (s *Server) SetServing(on bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if on {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, n := range healthNames {
		s.Health.SetServingStatus(n, st)
	}
}

// Close stops exporting the call metric (Options.AddHistogram).
func (s *Server) Close() { s.tel.close() }

// Serve serves lis until Stop. It returns grpc.ErrServerStopped after Stop.
func (s *Server) Serve(lis net.Listener) error { return s.GRPC.Serve(lis) }

// Stop drains: health goes NOT_SERVING, then in-flight calls get until the
// ctx deadline to finish, then the rest are cancelled.
func (s *Server) Stop(ctx context.Context) error {
	s.SetServing(false)
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.GRPC.Stop()
		<-done
		return fmt.Errorf("gRPC calls still running at the deadline were cancelled: %w", ctx.Err())
	}
}

type callInfoKey struct{}

// callInfo is what the outermost interceptor puts in ctx once per call.
type callInfo struct {
	once sync.Once
	// requestID is read (or minted) by id, only when something asks for
	// it: a logged call or an internal error.
	requestID string
	// clientID is the last x-mq-client-id value (headers repeat on client
	// retries).
	clientID string
	// tapped: callInfoTap made it from the call's headers, and
	// traceparent says whether they carry one.
	tapped, traceparent bool
}

// callInfoTap reads what the interceptors need of a call's headers
// straight from the header map the transport decoded (one lookup per key;
// reading incoming metadata from the context copies each value, and an
// absent key costs a scan of every header) and puts the call's callInfo
// in its context, then runs next (the auth tap), if any.
func callInfoTap(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ci := &callInfo{clientID: lastOf(info.Header, "x-mq-client-id"), tapped: true, traceparent: len(info.Header["traceparent"]) > 0}
		ctx = context.WithValue(ctx, callInfoKey{}, ci)
		if next != nil {
			return next(ctx, info)
		}
		return ctx, nil
	}
}

// RequestID returns the call's request id (see callInfo.id).
func RequestID(ctx context.Context) string {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	if ci == nil {
		return ""
	}
	return ci.id(ctx)
}

// ClientID returns the caller's x-mq-client-id (its last value), or "".
func ClientID(ctx context.Context) string {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	if ci == nil {
		return ""
	}
	return ci.clientID
}

// finishesWork lists the unary methods drainUnary lets through.
var finishesWork = map[string]bool{
	"/grpc.health.v1.Health/Check":                                     true,
	v2.MessagingService_AckMessage_FullMethodName:                      true,
	v2.MessagingService_ChangeInvisibleDuration_FullMethodName:         true,
	v2.MessagingService_ForwardMessageToDeadLetterQueue_FullMethodName: true,
	v2.MessagingService_EndTransaction_FullMethodName:                  true,
	v2.MessagingService_Heartbeat_FullMethodName:                       true,
	v2.MessagingService_NotifyClientTermination_FullMethodName:         true,
}

// drainUnary refuses new unary calls once draining starts: UNAVAILABLE
// promises that nothing happened, so clients and proxies retry elsewhere.
// Health checks pass through so probes see NOT_SERVING.
//
// Calls that finish work already handed out — acks, invisibility changes,
// dead-lettering, transaction resolutions, heartbeats and goodbyes — still
// pass while draining: refusing them would only turn messages the client
// has processed into duplicates after the restart.
func drainUnary(g *admission.Gate) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !finishesWork[info.FullMethod] && !g.Admit() {
			return nil, status.Error(codes.Unavailable, "mqgate is draining for shutdown; nothing was done, retry on another instance")
		}
		return h(ctx, req)
	}
}

// StreamWorkers is the size of the server's stream worker pool. Workers
// serve RPCs on goroutines whose stacks have already grown to the depth of
// the interceptor chain (a fresh goroutine per RPC spent ~12% of the CPU
// in stack growth). A worker is held for a stream's whole life, and every
// official client keeps a Telemetry stream open and long-polls
// ReceiveMessage, so the pool is sized for connected clients rather than
// cores: with 4*GOMAXPROCS workers a handful of clients pinned them all
// and every later RPC ran on a fresh goroutine again. Idle workers cost
// only their parked stacks. Above the pool grpc-go still spawns a
// goroutine per stream, so this bounds nothing.
func StreamWorkers() uint32 {
	return uint32(max(64, 16*runtime.GOMAXPROCS(0)))
}
