package grpcserver

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

const adminPrefix = "/mqgate.admin.v1.AdminService/"

// authExempt are the methods anyone may call with auth on: a proxy's
// health checks and tooling's reflection carry no credentials.
func authExempt(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// authenticate verifies the call's MQv2-HMAC-SHA1 signature and
// returns ctx carrying the user.
func authenticate(ctx context.Context, a *auth.Authenticator) (context.Context, error) {
	// The last value of each, without copying the whole
	// metadata (metadata.FromIncomingContext would: 3 % of a send's CPU).
	u, err := a.V2(lastValue(ctx, "authorization"), lastValue(ctx, "x-mq-date-time"))
	if err != nil {
		return ctx, err
	}
	return auth.NewContext(ctx, u), nil
}

// denied answers a refused unary call: MessagingService methods get their
// response with only a status (UNAUTHORIZED 40100, as upstream answers both
// authentication and authorization failures); other services a gRPC error.
func denied(fullMethod string, err error, code codes.Code) (any, error) {
	if strings.HasPrefix(fullMethod, messagingPrefix) {
		if resp := statusOnlyResponse(fullMethod, &v2.Status{Code: v2.Code_UNAUTHORIZED, Message: err.Error()}); resp != nil {
			return resp, nil
		}
	}
	return nil, status.Error(code, err.Error())
}

// authUnary authenticates every unary call but health checks, requires an
// admin for the admin API but its views (views; nil: none), and checks what a MessagingService call touches
// (v2Access). REST's service checks its own calls (restmessaging).
func authUnary(a *auth.Authenticator, views func(string) bool, log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if authExempt(info.FullMethod) {
			return h(ctx, req)
		}
		ctx, err := authenticate(ctx, a)
		if err != nil {
			refused(ctx, a, log, info.FullMethod, false, err)
			return denied(info.FullMethod, err, codes.Unauthenticated)
		}
		if err := allow(ctx, a, views, info.FullMethod, req); err != nil {
			refused(ctx, a, log, info.FullMethod, true, err)
			return denied(info.FullMethod, err, codes.PermissionDenied)
		}
		return h(ctx, req)
	}
}

// allow checks the admin API's callers (an admin, but for the views,
// which check what they touch themselves) and what a MessagingService
// request touches.
func allow(ctx context.Context, a *auth.Authenticator, views func(string) bool, fullMethod string, req any) error {
	if strings.HasPrefix(fullMethod, adminPrefix) && (views == nil || !views(fullMethod)) {
		if err := a.Allow(ctx, auth.Access{Admin: true}); err != nil {
			return err
		}
	}
	for _, acc := range v2Access(req) {
		if err := a.Allow(ctx, acc); err != nil {
			return err
		}
	}
	return nil
}

// refused counts and logs a refusal (auth.Refused rate-limits the lines).
func refused(ctx context.Context, a *auth.Authenticator, log *slog.Logger, method string, authorization bool, err error) {
	var addr string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if f := lastValue(ctx, "x-forwarded-for"); f != "" {
		// REST calls arrive in process; grpc-gateway names the HTTP client.
		addr += " (forwarded for " + f + ")"
	}
	a.Refused(ctx, log, auth.Refusal{Listener: "grpc", Peer: addr, Call: method, Authorization: authorization, Err: err})
}

// authStream does the same for streams. A server-streaming
// MessagingService call (ReceiveMessage, PullMessage) sends its request
// first; it is read here, checked, and handed to the handler as the
// stream's first message. Telemetry is authenticated when it opens; the
// topics and group its settings name are not checked there, because every
// call the client makes with them is (a client whose settings name a
// forbidden group starts, and its receives get UNAUTHORIZED, rather than
// hanging in start-up as the Go client does without a settings reply).
func authStream(a *auth.Authenticator, views func(string) bool, log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if authExempt(info.FullMethod) {
			return h(srv, ss)
		}
		ctx, err := authenticate(ss.Context(), a)
		refuse := func(err error, code codes.Code) error {
			refused(ctx, a, log, info.FullMethod, code == codes.PermissionDenied, err)
			if strings.HasPrefix(info.FullMethod, messagingPrefix) {
				return sendStatusOnly(info.FullMethod, ss, &v2.Status{Code: v2.Code_UNAUTHORIZED, Message: err.Error()})
			}
			return status.Error(code, err.Error())
		}
		if err != nil {
			return refuse(err, codes.Unauthenticated)
		}
		if err := allow(ctx, a, views, info.FullMethod, nil); err != nil {
			return refuse(err, codes.PermissionDenied)
		}
		ws := &authedStream{ServerStream: ss, ctx: ctx}
		var first proto.Message
		switch info.FullMethod {
		case v2.MessagingService_ReceiveMessage_FullMethodName:
			first = new(v2.ReceiveMessageRequest)
		case v2.MessagingService_PullMessage_FullMethodName:
			first = new(v2.PullMessageRequest)
		}
		if first != nil {
			if err := ss.RecvMsg(first); err != nil {
				return err
			}
			if err := allow(ctx, a, views, info.FullMethod, first); err != nil {
				return refuse(err, codes.PermissionDenied)
			}
			ws.first = first
		}
		return h(srv, ws)
	}
}

// authedStream carries the authenticated context and replays a request
// already read by authStream.
type authedStream struct {
	grpc.ServerStream
	ctx   context.Context
	first proto.Message
}

func (s *authedStream) Context() context.Context { return s.ctx }

func (s *authedStream) RecvMsg(m any) error {
	if s.first != nil {
		pm, ok := m.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "unexpected request type %T", m)
		}
		proto.Merge(pm, s.first)
		s.first = nil
		return nil
	}
	return s.ServerStream.RecvMsg(m)
}

// v2Access lists what a MessagingService request touches (sends and transaction ends publish; receives, acks, offsets and
// assignments consume a topic as a group; a route is open to whoever may
// publish to or consume its topic).
func v2Access(req any) []auth.Access {
	consume := func(topic *v2.Resource, group *v2.Resource) []auth.Access {
		return []auth.Access{{Subscribe: topic.GetName(), Group: group.GetName()}}
	}
	switch r := req.(type) {
	case *v2.QueryRouteRequest:
		return []auth.Access{{Route: r.GetTopic().GetName()}}
	case *v2.HeartbeatRequest:
		return []auth.Access{{Group: r.GetGroup().GetName()}}
	case *v2.NotifyClientTerminationRequest:
		return []auth.Access{{Group: r.GetGroup().GetName()}}
	case *v2.SendMessageRequest:
		var out []auth.Access
		seen := map[string]bool{}
		for _, m := range r.GetMessages() {
			if t := m.GetTopic().GetName(); !seen[t] {
				seen[t] = true
				out = append(out, auth.Access{Publish: t})
			}
		}
		return out
	case *v2.EndTransactionRequest:
		return []auth.Access{{Publish: r.GetTopic().GetName()}}
	case *v2.RecallMessageRequest:
		return []auth.Access{{Publish: r.GetTopic().GetName()}}
	case *v2.QueryAssignmentRequest:
		return consume(r.GetTopic(), r.GetGroup())
	case *v2.ReceiveMessageRequest:
		return consume(r.GetMessageQueue().GetTopic(), r.GetGroup())
	case *v2.AckMessageRequest:
		return consume(r.GetTopic(), r.GetGroup())
	case *v2.ChangeInvisibleDurationRequest:
		return consume(r.GetTopic(), r.GetGroup())
	case *v2.ForwardMessageToDeadLetterQueueRequest:
		return consume(r.GetTopic(), r.GetGroup())
	case *v2.PullMessageRequest:
		return consume(r.GetMessageQueue().GetTopic(), r.GetGroup())
	case *v2.UpdateOffsetRequest:
		return consume(r.GetMessageQueue().GetTopic(), r.GetGroup())
	case *v2.GetOffsetRequest:
		return consume(r.GetMessageQueue().GetTopic(), r.GetGroup())
	case *v2.QueryOffsetRequest:
		return []auth.Access{{Subscribe: r.GetMessageQueue().GetTopic().GetName()}}
	}
	return nil
}
