package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The call log is the outermost interceptor. It reads the client id once
// per call (the request id only when needed) and, when the call ends, logs
// its outcome at a level chosen by it: the gRPC code, and for RocketMQ methods the v2
// status the response carries (those travel with gRPC OK, so a log keyed
// on the gRPC code alone would call every rejected send a success).
// Successful calls log at debug; when debug is off a call pays only for
// the level check. (go-grpc-middleware's logging interceptor builds its
// field set on every call whatever the level, which cost more than the
// SendMessage handler itself in profiles; recovery still comes from
// go-grpc-middleware.)

func lastValue(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// withCallInfo returns the call's callInfo: callInfoTap's, or one made
// here from ctx's metadata (a server without the tap: tests).
func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok && ci.tapped {
		return ctx, ci
	}
	ci := &callInfo{clientID: lastValue(ctx, "x-mq-client-id")}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// id returns the request id, reading it from ctx's metadata on first use:
// only a logged call or an internal error needs it, so a successful call
// with debug logging off never looks. One is minted when the client sent
// none (the official clients always send x-mq-request-id; REST echoes its
// own).
func (ci *callInfo) id(ctx context.Context) string {
	ci.once.Do(func() {
		if ci.requestID == "" {
			ci.requestID = lastValue(ctx, "x-mq-request-id")
		}
		if ci.requestID == "" {
			ci.requestID = lastValue(ctx, "x-request-id")
		}
		if ci.requestID == "" || len(ci.requestID) > 128 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			ci.requestID = hex.EncodeToString(b[:])
		}
	})
	return ci.requestID
}

func callLogUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, ci := withCallInfo(ctx)
		start := time.Now()
		resp, err := h(ctx, req)
		logCall(ctx, log, info.FullMethod, ci, start, resp, err)
		return resp, err
	}
}

type callStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c callStream) Context() context.Context { return c.ctx }

func callLogStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, ci := withCallInfo(ss.Context())
		start := time.Now()
		err := h(srv, callStream{ServerStream: ss, ctx: ctx})
		logCall(ctx, log, info.FullMethod, ci, start, nil, err)
		return err
	}
}

type withStatus interface{ GetStatus() *v2.Status }

func logCall(ctx context.Context, log *slog.Logger, method string, ci *callInfo, start time.Time, resp any, err error) {
	code := status.Code(err)
	lvl := grpcCodeLevel(code)
	var v2code v2.Code
	if r, ok := resp.(withStatus); ok && r.GetStatus() != nil {
		v2code = r.GetStatus().GetCode()
		lvl = max(lvl, v2CodeLevel(v2code))
	}
	if !log.Enabled(ctx, lvl) {
		return
	}
	attrs := []slog.Attr{
		slog.String("grpc.method", method),
		slog.String("grpc.code", code.String()),
		slog.Duration("elapsed", time.Since(start)),
		slog.String("request_id", ci.id(ctx)),
	}
	if ci.clientID != "" {
		attrs = append(attrs, slog.String("client_id", ci.clientID))
	}
	if v2code != 0 {
		attrs = append(attrs, slog.String("rocketmq.code", v2code.String()), slog.String("rocketmq.message", resp.(withStatus).GetStatus().GetMessage()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	log.LogAttrs(ctx, lvl, "rpc finished", attrs...)
}

func grpcCodeLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK, codes.Canceled, codes.DeadlineExceeded, codes.NotFound, codes.AlreadyExists,
		codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated, codes.PermissionDenied:
		return slog.LevelDebug
	case codes.Unavailable, codes.ResourceExhausted:
		return slog.LevelInfo
	default:
		return slog.LevelWarn
	}
}

// v2CodeLevel: client mistakes and empty polls are debug noise, server-side
// failures are warnings.
func v2CodeLevel(c v2.Code) slog.Level {
	switch {
	case c >= 50000:
		return slog.LevelWarn
	case c == v2.Code_TOO_MANY_REQUESTS:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
