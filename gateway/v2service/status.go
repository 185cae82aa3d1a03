package v2service

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/errcodes"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Errors are mapped through THE Kind → code table, gateway/errcodes (the
// REST edge, gateway/restmessaging, maps the same way): the v2 Code goes in a
// response's status payload (the normal case, gRPC status OK), the gRPC
// code where a gRPC-level error is the contract (Telemetry's settings
// validation).

// Shared immutable statuses (protobuf marshals them read-only, so one
// value serves every response).
var (
	statusOK         = &v2.Status{Code: v2.Code_OK, Message: "OK"}
	statusNoMessage  = &v2.Status{Code: v2.Code_MESSAGE_NOT_FOUND, Message: "no new message"}
	statusMultiple   = &v2.Status{Code: v2.Code_MULTIPLE_RESULTS, Message: "entries have different results; check each entry"}
	statusNotYet     = &v2.Status{Code: v2.Code_NOT_IMPLEMENTED, Message: "not implemented by this mqgate version"}
	statusNoEntries  = &v2.Status{Code: v2.Code_INTERNAL_SERVER_ERROR, Message: "the server produced no result entries"}
	statusNoHandle   = &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE, Message: "receipt handle is empty"}
	statusNoEndpoint = &v2.Status{Code: v2.Code_ILLEGAL_ACCESS_POINT, Message: "cannot tell which address to advertise: set --advertise-addr or send the access point in the request"}
)

// statusOf converts err into the status payload. Unclassified and
// internal errors are logged with the request id and answered with a
// generic INTERNAL_ERROR, so internals never reach the client.
func statusOf(ctx context.Context, log *slog.Logger, err error) *v2.Status {
	if err == nil {
		return statusOK
	}
	k := mqerr.KindOf(err)
	m, ok := errcodes.Of(k)
	if !ok || k == mqerr.KindInternal {
		rid := grpcserver.RequestID(ctx)
		if log != nil {
			log.ErrorContext(ctx, "internal error answered as INTERNAL_ERROR", "err", err.Error(), "kind", k.String(), "request_id", rid)
		}
		return &v2.Status{Code: v2.Code_INTERNAL_ERROR, Message: "internal error (logged by the server, request id " + rid + ")"}
	}
	return &v2.Status{Code: m.V2, Message: mqerr.Message(err)}
}

// grpcCodeOf is the gRPC code for err where a gRPC-level error is the
// contract.
func grpcCodeOf(err error) codes.Code {
	if m, ok := errcodes.Of(mqerr.KindOf(err)); ok {
		return m.GRPC
	}
	return codes.Internal
}

// combine folds the statuses of result entries into the top-level one:
// the common status when every entry agrees, MULTIPLE_RESULTS otherwise.
func combine[E interface{ GetStatus() *v2.Status }](es []E) *v2.Status {
	if len(es) == 0 {
		return statusNoEntries
	}
	first := es[0].GetStatus()
	for _, e := range es[1:] {
		if e.GetStatus().GetCode() != first.GetCode() {
			return statusMultiple
		}
	}
	return first
}
