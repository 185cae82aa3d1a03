package restmessaging

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/errcodes"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// statusOK is shared by every successful entry (protobuf marshals it
// read-only).
var statusOK = newStatus(v2.Code_OK, "OK")

func newStatus(c v2.Code, msg string) *restv1.Status {
	return &restv1.Status{Code: int32(c), Name: c.String(), Message: msg}
}

// statusOf maps err through gateway/errcodes's table: the Status to show
// and the gRPC code of a request-level failure. Unclassified and internal
// errors are logged with the request id and answered with a generic
// INTERNAL_ERROR, so internals never reach the client.
func (s *Service) statusOf(ctx context.Context, err error) (*restv1.Status, codes.Code) {
	if err == nil {
		return statusOK, codes.OK
	}
	k := mqerr.KindOf(err)
	m, ok := errcodes.Of(k)
	if !ok || k == mqerr.KindInternal {
		rid := requestID(ctx)
		s.log.ErrorContext(ctx, "internal error answered as INTERNAL_ERROR", "err", err.Error(), "kind", k.String(), "request_id", rid)
		return newStatus(v2.Code_INTERNAL_ERROR, "internal error (logged by the server, request id "+rid+")"), codes.Internal
	}
	return newStatus(m.V2, mqerr.Message(err)), m.GRPC
}

// errorOf is a request-level failure: a gRPC status error with the
// Status as its detail (gateway/httpserver turns it into the HTTP status and
// body).
func (s *Service) errorOf(ctx context.Context, err error) error {
	st, code := s.statusOf(ctx, err)
	gs := status.New(code, st.GetMessage())
	if withDetail, derr := gs.WithDetails(st); derr == nil {
		gs = withDetail
	}
	return gs.Err()
}

// requestID is the id the caller (or gateway/httpserver) sent; the gRPC
// interceptor chain logs every call with it.
func requestID(ctx context.Context) string {
	for _, k := range []string{"x-mq-request-id", "x-request-id"} {
		if v := lastMD(ctx, k); v != "" {
			return v
		}
	}
	return "unknown"
}

// lastMD is the last value of key (headers repeat on client retries).
func lastMD(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// wantsText reports whether the caller asked for text bodies: the
// x-mq-body-format: text header (gateway/httpserver sets it for ?body=text).
func wantsText(ctx context.Context) bool {
	return strings.EqualFold(strings.TrimSpace(lastMD(ctx, BodyFormatHeader)), "text")
}

// BodyFormatHeader is the metadata key that asks for text bodies.
const BodyFormatHeader = "x-mq-body-format"
