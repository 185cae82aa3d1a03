package forwarding

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Key marks a request one member forwarded to another.
const Key = "x-mqgate-forwarded"

// Forwarded reports whether ctx's request was forwarded by a member.
func Forwarded(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, Key)) > 0
}

// Context is ctx for a call forwarding its request: the caller's
// metadata, less what describes the transport, and the mark.
func Context(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out := make(metadata.MD, len(in)+1)
	for k, v := range in {
		switch {
		case strings.HasPrefix(k, ":"), strings.HasPrefix(k, "grpc-"), k == "content-type", k == "user-agent", k == "te":
		default:
			out[k] = v
		}
	}
	out.Set(Key, "1")
	return metadata.NewOutgoingContext(ctx, out)
}

// Call invokes method on the member behind conn with req as the caller
// sent it, under Context(ctx), and returns the member's answer.
func Call[Resp any, P interface {
	*Resp
	proto.Message
}](ctx context.Context, conn grpc.ClientConnInterface, method string, req proto.Message) (P, error) {
	resp := P(new(Resp))
	err := conn.Invoke(Context(ctx), method, req, resp)
	return resp, err
}
