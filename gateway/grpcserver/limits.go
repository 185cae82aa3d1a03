package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

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
//   - with auth on, authTap refuses a SendMessage from a user who may
//     publish to no topic at all, before it is read;
//   - the request budget (reads.go): a unary call reserves the receive
//     limit before its request is read, keeps its request's size while
//     its handler runs, and each user (each client address with auth
//     off) may hold at most half of the budget; a call that finds no room
//     within a second is answered TOO_MANY_REQUESTS (42900), which every
//     official client backs off from and retries. The streams' first
//     requests are read within the same budget;
//   - flow control (server.go): a stream's window is a static 64 KiB, so
//     a request waiting for room in the budget holds at most that much.

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
// any of its messages, and refuses a SendMessage from a user who may
// publish to no topic (a consume-only user). Health checks and reflection
// pass (authExempt), as in the interceptors, which still authenticate
// (from a cache: no second HMAC) and authorize what the decoded request
// touches.
//
// A refused call ends with gRPC status UNAUTHENTICATED (PERMISSION_DENIED
// for a user without a publish right); its message names the v2 code
// (UNAUTHORIZED, 40100) and the reason. The tap runs on the
// connection's reader goroutine: it does no more than the signature check
// and a rate-limited log line.
func authTap(a *auth.Authenticator, log *slog.Logger) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !tapChecked(info.FullMethodName) {
			return ctx, nil
		}
		u, err := a.V2(lastOf(info.Header, "authorization"), lastOf(info.Header, "x-mq-date-time"))
		code := codes.Unauthenticated
		if err == nil {
			if info.FullMethodName != v2.MessagingService_SendMessage_FullMethodName || u.MayPublish() {
				return ctx, nil
			}
			code, err = codes.PermissionDenied, auth.NoPublishRight(u)
		}
		var addr string
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			addr = p.Addr.String()
		}
		if f := lastOf(info.Header, "x-forwarded-for"); f != "" {
			addr += " (forwarded for " + f + ")"
		}
		a.Refused(ctx, log, auth.Refusal{Listener: "grpc", Peer: addr, Call: info.FullMethodName, Authorization: code == codes.PermissionDenied, Err: err})
		return ctx, status.Error(code, fmt.Sprintf("%s (%d): %v", v2.Code_UNAUTHORIZED, int32(v2.Code_UNAUTHORIZED), err))
	}
}

// tapChecked lists the methods authTap checks: SendMessage, whose request
// carries message bodies, and every method of the other services but
// health checks and reflection (the admin API and the REST API, whose
// refusals are gRPC errors anyway). The other MessagingService methods
// keep answering a refusal in their response's status, as upstream does
// and clients expect (a Telemetry stream gets a status-only command):
// streams are authenticated before their first message is read, and an
// unsigned unary call is answered before its request is read (reads.go).
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
