package sdk

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// attempt records what one RPC attempt did on the wire, which is what
// decides whether a failed send may have stored its message:
//
//   - sent: the request message was handed to the transport. Before that
//     the server cannot have seen a complete request: nothing happened.
//   - answered: headers or trailers came back from the server, so a
//     gRPC status is the server's own answer (not a broken connection).
type attempt struct {
	sent, answered atomic.Bool
}

type attemptKey struct{}

func withAttempt(ctx context.Context) (context.Context, *attempt) {
	a := &attempt{}
	return context.WithValue(ctx, attemptKey{}, a), a
}

// attemptStats is the connection's stats handler: it marks the attempt
// found in the call's context.
type attemptStats struct{}

func (attemptStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (attemptStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	if a == nil || !s.IsClient() {
		return
	}
	switch s.(type) {
	case *stats.OutPayload:
		a.sent.Store(true)
	case *stats.InHeader, *stats.InTrailer:
		a.answered.Store(true)
	}
}

func (attemptStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (attemptStats) HandleConn(context.Context, stats.ConnStats) {}
