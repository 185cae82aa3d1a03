package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The request budget: the bytes of requests the server is reading or its
// handlers hold, bounded before a request is read.
//
// grpc-go reads a unary call's request before the method's handler runs,
// and lets the client send the whole of a message once a reader asks for
// it (the stream's window grows to the message's length): a budget
// checked on the decoded request bounds nothing. So every unary method is
// registered with its request read late (RegisterService: the handler
// notes where the request goes, pendingRead), and the chain's
// request-budget interceptor (unary) reads it:
//
//   - with auth on, a call whose signature does not verify is answered
//     UNAUTHORIZED (as authUnary would) without its request being read;
//   - the call reserves three times the receive limit (readFactor: what
//     reading a request of that size holds at most) in the budget, under
//     its key:
//     the user with auth on, else the client's address (an IPv4 address,
//     an IPv6 /64). A key may hold at most half of the budget, so one
//     user cannot take it all from the others. A call that finds no room
//     waits up to readWait (at most maxWaiting calls wait; a waiting
//     call's stream holds at most its 64 KiB window), then is answered
//     TOO_MANY_REQUESTS (MessagingService) or RESOURCE_EXHAUSTED (other
//     services) with nothing read;
//   - once read, the reservation shrinks to the request's size and is
//     kept until the handler returns.
//
// Health checks and reflection, which need no credentials, read in a
// small budget of their own (exempt: four reads, two per address) and wait for room until their deadline, so a flood of
// other calls never fails a probe. A server-streaming call's request is
// read within the same budgets and released once read. Client streams
// (Telemetry) are read by their handlers message by message, each bounded
// by the receive limit; at most maxReflections reflection streams run at
// once. In-process calls (REST) arrive decoded: their size is reserved as
// it is, or refused at once.

const (
	// readWait is how long a call waits for room in the budget before it
	// is refused.
	readWait = time.Second
	// maxWaiting bounds the calls waiting for room at once; past it a
	// call is refused at once.
	maxWaiting = 1024
	// maxReflections bounds the reflection streams at once (their
	// messages are read outside the budget).
	maxReflections = 16
	// readFactor is how many times a request's size reading it takes at
	// most: grpc-go holds the frames as they arrived, assembles them into
	// one buffer for the codec, and the decoded message copies the bytes
	// fields again, before the first two are freed.
	readFactor = 3
)

// readKey is the share a call counts in: a user (auth on), or a client
// address (an IPv4 address, an IPv6 /64; the zero prefix when unknown),
// or the REST API's calls (inProcess).
type readKey struct {
	user      string
	addr      netip.Prefix
	inProcess bool
}

// reads is a server's request budget.
type reads struct {
	main, exempt *admission.Shares[readKey]
	// readCost is what reading one request reserves: readFactor times
	// the receive limit.
	readCost int64
	auth     *auth.Authenticator
	log      *slog.Logger
	// sizer (Options.RequestSize), when set, measures the requests it
	// knows faster than proto.Size's reflection.
	sizer       func(proto.Message) (int, bool)
	waiting     atomic.Int64
	reflections atomic.Int64
}

func newReads(budget int64, recvLimit int, a *auth.Authenticator, log *slog.Logger) *reads {
	rl := readFactor * int64(recvLimit)
	return &reads{main: admission.NewShares[readKey](budget, budget/2), exempt: admission.NewShares[readKey](4*rl, 2*rl),
		readCost: rl, auth: a, log: log}
}

type pendingReadKey struct{}

// pendingRead is a unary call's request not yet read, and the call's
// context carrying it (one allocation): the handler registered through
// RegisterService hands over where the request goes (in) and grpc-go's
// decode function (dec); the request-budget interceptor reads it.
type pendingRead struct {
	context.Context
	dec func(any) error
	in  any
}

func (p *pendingRead) Value(key any) any {
	if key == (pendingReadKey{}) {
		return p
	}
	return p.Context.Value(key)
}

func (p *pendingRead) note(in any) error { p.in = in; return nil }

// lateRead wraps a unary method's handler so that its request is read by
// the request-budget interceptor rather than before the chain.
func lateRead(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		pr := &pendingRead{Context: ctx, dec: dec}
		return h(srv, pr, pr.note, ic)
	}
}

// size is m's encoded size: the sizer's figure, else proto.Size's.
func (r *reads) size(m proto.Message) int {
	if r.sizer != nil {
		if n, ok := r.sizer(m); ok {
			return n
		}
	}
	return proto.Size(m)
}

// busy answers a call refused for the budget.
func busy(fullMethod, msg string) (any, error) {
	if strings.HasPrefix(fullMethod, messagingPrefix) {
		if resp := statusOnlyResponse(fullMethod, &v2.Status{Code: v2.Code_TOO_MANY_REQUESTS, Message: msg}); resp != nil {
			return resp, nil
		}
	}
	return nil, status.Error(codes.ResourceExhausted, msg)
}

// key is the share a call counts in: its user with auth on (an error
// when the signature does not verify), else its client's address.
func (r *reads) key(ctx context.Context, exempt bool) (readKey, error) {
	if r.auth != nil && !exempt {
		u, err := r.auth.V2(lastValue(ctx, "authorization"), lastValue(ctx, "x-mq-date-time"))
		if err != nil {
			return readKey{}, err
		}
		return readKey{user: u.AccessKey}, nil
	}
	return peerKey(ctx), nil
}

// peerKey is the address share of ctx's peer.
func peerKey(ctx context.Context) readKey {
	p, _ := peer.FromContext(ctx)
	if p == nil || p.Addr == nil {
		return readKey{}
	}
	return readKey{addr: addressPrefix(p.Addr)}
}

// addressPrefix is the address share of a: an IPv4 address, an IPv6 /64
// (the zero prefix for an address that is not IP).
func addressPrefix(a net.Addr) netip.Prefix {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr().Unmap()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr().Unmap()
	} else {
		return netip.Prefix{}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// reserve takes n in pool under key: exempt calls wait until ctx ends,
// others up to readWait. It returns what it reserved (n, or the share
// when n is larger) and false when it could not.
func (r *reads) reserve(ctx context.Context, pool *admission.Shares[readKey], key readKey, n int64, exempt bool) (int64, bool) {
	n = min(n, pool.Share())
	if pool.TryAcquire(key, n) {
		return n, true
	}
	if !exempt {
		if r.waiting.Add(1) > maxWaiting {
			r.waiting.Add(-1)
			return 0, false
		}
		defer r.waiting.Add(-1)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readWait)
		defer cancel()
	}
	if pool.Acquire(ctx, key, n) {
		return n, true
	}
	return 0, false
}

// refusal is the message of a call refused for the budget.
func (r *reads) refusal(pool *admission.Shares[readKey], key readKey) string {
	if pool.Held(key) >= pool.Share() {
		return fmt.Sprintf("your calls hold %d MiB of requests, the most one caller may (half of the server's request budget); retry later", pool.Share()>>20)
	}
	return fmt.Sprintf("the server holds %d MiB of requests, its limit; retry later", pool.Max()>>20)
}

// unary is the request-budget interceptor (see the top of this file).
func (r *reads) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		pr, _ := ctx.Value(pendingReadKey{}).(*pendingRead)
		if pr == nil || pr.in != req || pr.dec == nil {
			return r.decoded(ctx, req, info, h)
		}
		dec := pr.dec
		pr.dec = nil // read once
		exempt := authExempt(info.FullMethod)
		key, err := r.key(ctx, exempt)
		if err != nil {
			refused(ctx, r.auth, r.log, info.FullMethod, false, err)
			return denied(info.FullMethod, err, codes.Unauthenticated)
		}
		pool := r.main
		if exempt {
			pool = r.exempt
		}
		held, ok := r.reserve(ctx, pool, key, r.readCost, exempt)
		if !ok {
			if err := ctx.Err(); err != nil {
				return nil, status.FromContextError(err).Err()
			}
			return busy(info.FullMethod, r.refusal(pool, key))
		}
		if err := dec(req); err != nil {
			pool.Release(key, held)
			return nil, err
		}
		keep := held
		if m, ok := req.(proto.Message); ok {
			keep = min(held, int64(r.size(m)))
		}
		pool.Release(key, held-keep)
		defer pool.Release(key, keep)
		return h(ctx, req)
	}
}

// decoded reserves the size of a request that arrived decoded (an
// in-process call) for as long as its handler runs, or refuses it at
// once. Health checks always pass.
func (r *reads) decoded(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	m, ok := req.(proto.Message)
	if !ok || authExempt(info.FullMethod) {
		return h(ctx, req)
	}
	size, ok := requestSize(ctx, m)
	if !ok {
		size = r.size(m)
	}
	key := readKey{inProcess: true}
	if u := auth.FromContext(ctx); u != nil {
		key = readKey{user: u.AccessKey}
	} else if r.auth != nil {
		if k, err := r.key(ctx, false); err == nil {
			key = k
		}
	}
	n := min(int64(size), r.main.Share())
	if !r.main.TryAcquire(key, n) {
		return busy(info.FullMethod, r.refusal(r.main, key))
	}
	defer r.main.Release(key, n)
	return h(ctx, req)
}

// stream reads the request of a server-streaming call within the budget,
// and bounds the reflection streams.
func (r *reads) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.IsClientStream {
			if !strings.HasPrefix(info.FullMethod, "/grpc.reflection.") {
				return h(srv, ss)
			}
			defer r.reflections.Add(-1)
			if r.reflections.Add(1) > maxReflections {
				return status.Errorf(codes.ResourceExhausted, "%d reflection streams are open, the most the server allows; retry later", maxReflections)
			}
			return h(srv, ss)
		}
		return h(srv, &budgetedStream{ServerStream: ss, r: r, method: info.FullMethod})
	}
}

// budgetedStream reads its first message within the budget.
type budgetedStream struct {
	grpc.ServerStream
	r      *reads
	method string
	read   bool
}

func (s *budgetedStream) RecvMsg(m any) error {
	if s.read {
		return s.ServerStream.RecvMsg(m)
	}
	s.read = true
	ctx := s.Context()
	exempt := authExempt(s.method)
	key, err := s.r.key(ctx, exempt)
	if err != nil {
		key = peerKey(ctx) // authStream refuses such a call before it reads
	}
	pool := s.r.main
	if exempt {
		pool = s.r.exempt
	}
	held, ok := s.r.reserve(ctx, pool, key, s.r.readCost, exempt)
	if !ok {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		return status.Error(codes.ResourceExhausted, s.r.refusal(pool, key))
	}
	defer pool.Release(key, held)
	return s.ServerStream.RecvMsg(m)
}
