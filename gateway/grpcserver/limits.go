package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// This file holds what keeps the gRPC listener up under oversized,
// unauthenticated or too many requests:
//
//   - the receive limit (RecvLimit): a request larger than one SendMessage
//     of the largest allowed body is refused (RESOURCE_EXHAUSTED) from its
//     5-byte length prefix, before grpc-go reads it;
//   - with auth on, authTap checks the signature in the headers of calls
//     that carry payloads when the stream opens, before any request
//     message is read, so an unsigned caller cannot make the server
//     receive and decode message bodies;
//   - the in-flight budget (budgetUnary): the decoded requests that
//     handlers hold at once are bounded; a call that does not fit is
//     answered TOO_MANY_REQUESTS (42900), which every official client
//     backs off from and retries.

// DefaultMaxBodySize is the message body limit the receive limit is
// computed from when Options.MaxBodySize is 0 (the broker's default).
const DefaultMaxBodySize = 4 << 20

// sendEnvelope is what one message of a SendMessage request carries besides
// its body: topic, user properties (at most 16 KiB), system
// properties (ids, keys, tag, group, trace context) and protobuf framing,
// rounded up.
const sendEnvelope = 64 << 10

// maxSendEnvelopes is how many messages' envelopes the receive limit
// leaves room for: a batch of up to this many messages whose bodies
// together are within the body limit always fits (official clients send
// one message per call; the receive batch size is 32 as well).
const maxSendEnvelopes = 32

// RecvLimit is the largest request message the server accepts for a body
// limit of maxBody bytes: one body at the limit, or a batch whose bodies
// add up to it, plus the envelopes of maxSendEnvelopes messages.
func RecvLimit(maxBody int) int {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodySize
	}
	return maxBody + maxSendEnvelopes*sendEnvelope
}

// MaxRecvMsgSize is RecvLimit of the default body limit (6 MiB).
const MaxRecvMsgSize = DefaultMaxBodySize + maxSendEnvelopes*sendEnvelope

// DefaultMaxInFlightBytes is the in-flight budget when
// Options.MaxInFlightBytes is 0.
const DefaultMaxInFlightBytes = 256 << 20

// authTap authenticates a call from its headers before the server reads
// any of its messages. Health checks and reflection pass (authExempt), as
// in the interceptors, which still authenticate (from a cache: no second
// HMAC) and authorize what the decoded request touches.
//
// A refused call ends with gRPC status UNAUTHENTICATED; its message names
// the v2 code (UNAUTHORIZED, 40100) and the reason. The tap runs on the
// connection's reader goroutine: it does no more than the signature check
// and a rate-limited log line.
func authTap(a *auth.Authenticator, log *slog.Logger) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !tapChecked(info.FullMethodName) {
			return ctx, nil
		}
		_, err := a.V2(lastOf(info.Header, "authorization"), lastOf(info.Header, "x-mq-date-time"))
		if err == nil {
			return ctx, nil
		}
		var addr string
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			addr = p.Addr.String()
		}
		if f := lastOf(info.Header, "x-forwarded-for"); f != "" {
			addr += " (forwarded for " + f + ")"
		}
		a.Refused(ctx, log, auth.Refusal{Listener: "grpc", Peer: addr, Call: info.FullMethodName, Err: err})
		return ctx, status.Error(codes.Unauthenticated, fmt.Sprintf("%s (%d): %v", v2.Code_UNAUTHORIZED, int32(v2.Code_UNAUTHORIZED), err))
	}
}

// tapChecked lists the methods authTap checks: SendMessage, whose request
// carries message bodies, and every method of the other services but
// health checks and reflection (the admin API and the REST API, whose
// refusals are gRPC errors anyway). The other MessagingService methods
// keep answering a refusal in their response's status, as upstream does
// and clients expect (a Telemetry stream gets a status-only command): their
// requests are small, streams are authenticated before their first
// message is read, and a unary one is bounded by the receive limit.
func tapChecked(fullMethod string) bool {
	if strings.HasPrefix(fullMethod, messagingPrefix) {
		return fullMethod == v2.MessagingService_SendMessage_FullMethodName
	}
	return !authExempt(fullMethod)
}

// lastOf is the last value of key in md (headers repeat on client
// retries).
func lastOf(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// budgetUnary reserves each unary request's size in b for as long as its
// handler runs. A request that does not fit is refused at once:
// MessagingService calls get TOO_MANY_REQUESTS in their response's status
// (clients retry with backoff), other services
// RESOURCE_EXHAUSTED. Health checks always pass.
func budgetUnary(b *admission.Budget) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		m, ok := req.(proto.Message)
		if !ok || strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
			return h(ctx, req)
		}
		size, ok := requestSize(ctx, m)
		if !ok {
			size = proto.Size(m)
		}
		n := int64(size)
		if !b.TryAcquire(n) {
			msg := fmt.Sprintf("the server holds %d MiB of requests in flight, its limit; retry later", b.Max()>>20)
			if strings.HasPrefix(info.FullMethod, messagingPrefix) {
				if resp := statusOnlyResponse(info.FullMethod, &v2.Status{Code: v2.Code_TOO_MANY_REQUESTS, Message: msg}); resp != nil {
					return resp, nil
				}
			}
			return nil, status.Error(codes.ResourceExhausted, msg)
		}
		defer b.Release(n)
		return h(ctx, req)
	}
}
