package grpcserver

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker/mqerr"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// codeMapping is how one mqerr.Kind travels on gRPC: as a v2 Code in a
// response's status payload (the normal case, gRPC status OK), and as a
// gRPC code where a gRPC-level error is the contract (Telemetry's settings
// validation, spec §1.6).
type codeMapping struct {
	v2   v2.Code
	grpc codes.Code
}

// kindCodes is THE table from error kinds to wire codes (spec §2.1, §10).
// A Kind missing here fails TestStatusTableCoversEveryKind.
var kindCodes = [...]codeMapping{
	mqerr.KindInternal:             {v2.Code_INTERNAL_ERROR, codes.Internal},
	mqerr.KindBadRequest:           {v2.Code_BAD_REQUEST, codes.InvalidArgument},
	mqerr.KindIllegalTopic:         {v2.Code_ILLEGAL_TOPIC, codes.InvalidArgument},
	mqerr.KindIllegalGroup:         {v2.Code_ILLEGAL_CONSUMER_GROUP, codes.InvalidArgument},
	mqerr.KindIllegalTag:           {v2.Code_ILLEGAL_MESSAGE_TAG, codes.InvalidArgument},
	mqerr.KindIllegalKey:           {v2.Code_ILLEGAL_MESSAGE_KEY, codes.InvalidArgument},
	mqerr.KindIllegalMessageGroup:  {v2.Code_ILLEGAL_MESSAGE_GROUP, codes.InvalidArgument},
	mqerr.KindIllegalPropertyKey:   {v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, codes.InvalidArgument},
	mqerr.KindInvalidTransactionID: {v2.Code_INVALID_TRANSACTION_ID, codes.InvalidArgument},
	mqerr.KindIllegalMessageID:     {v2.Code_ILLEGAL_MESSAGE_ID, codes.InvalidArgument},
	mqerr.KindIllegalFilter:        {v2.Code_ILLEGAL_FILTER_EXPRESSION, codes.InvalidArgument},
	mqerr.KindIllegalInvisibleTime: {v2.Code_ILLEGAL_INVISIBLE_TIME, codes.InvalidArgument},
	mqerr.KindIllegalDeliveryTime:  {v2.Code_ILLEGAL_DELIVERY_TIME, codes.InvalidArgument},
	mqerr.KindInvalidReceiptHandle: {v2.Code_INVALID_RECEIPT_HANDLE, codes.InvalidArgument},
	mqerr.KindMessageTypeConflict:  {v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, codes.InvalidArgument},
	mqerr.KindUnrecognizedClient:   {v2.Code_UNRECOGNIZED_CLIENT_TYPE, codes.InvalidArgument},
	mqerr.KindMessageCorrupted:     {v2.Code_MESSAGE_CORRUPTED, codes.InvalidArgument},
	mqerr.KindClientIDRequired:     {v2.Code_CLIENT_ID_REQUIRED, codes.InvalidArgument},
	mqerr.KindIllegalPollingTime:   {v2.Code_ILLEGAL_POLLING_TIME, codes.InvalidArgument},
	mqerr.KindIllegalOffset:        {v2.Code_ILLEGAL_OFFSET, codes.OutOfRange},
	mqerr.KindUnauthorized:         {v2.Code_UNAUTHORIZED, codes.Unauthenticated},
	mqerr.KindForbidden:            {v2.Code_FORBIDDEN, codes.PermissionDenied},
	mqerr.KindNotFound:             {v2.Code_NOT_FOUND, codes.NotFound},
	mqerr.KindMessageNotFound:      {v2.Code_MESSAGE_NOT_FOUND, codes.NotFound},
	mqerr.KindTopicNotFound:        {v2.Code_TOPIC_NOT_FOUND, codes.NotFound},
	mqerr.KindGroupNotFound:        {v2.Code_CONSUMER_GROUP_NOT_FOUND, codes.NotFound},
	mqerr.KindOffsetNotFound:       {v2.Code_OFFSET_NOT_FOUND, codes.NotFound},
	// v2 has no "already exists"; only the admin API creates things.
	mqerr.KindAlreadyExists:      {v2.Code_BAD_REQUEST, codes.AlreadyExists},
	mqerr.KindRequestTimeout:     {v2.Code_REQUEST_TIMEOUT, codes.DeadlineExceeded},
	mqerr.KindPayloadTooLarge:    {v2.Code_PAYLOAD_TOO_LARGE, codes.InvalidArgument},
	mqerr.KindBodyTooLarge:       {v2.Code_MESSAGE_BODY_TOO_LARGE, codes.InvalidArgument},
	mqerr.KindBodyEmpty:          {v2.Code_MESSAGE_BODY_EMPTY, codes.InvalidArgument},
	mqerr.KindPropertiesTooLarge: {v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, codes.InvalidArgument},
	mqerr.KindTooManyRequests:    {v2.Code_TOO_MANY_REQUESTS, codes.ResourceExhausted},
	// Stored but not yet durable (spec §5.4.3): the record IS in the log.
	mqerr.KindFlushTimeout:     {v2.Code_MASTER_PERSISTENCE_TIMEOUT, codes.DeadlineExceeded},
	mqerr.KindStoreUnavailable: {v2.Code_INTERNAL_SERVER_ERROR, codes.Unavailable},
	mqerr.KindUnavailable:      {v2.Code_INTERNAL_SERVER_ERROR, codes.Unavailable},
	mqerr.KindNotImplemented:   {v2.Code_NOT_IMPLEMENTED, codes.Unimplemented},
	mqerr.KindUnsupported:      {v2.Code_UNSUPPORTED, codes.Unimplemented},
	mqerr.KindCanceled:         {v2.Code_REQUEST_TIMEOUT, codes.Canceled},
}

// mappingOf returns the table row of k.
func mappingOf(k mqerr.Kind) (codeMapping, bool) {
	if k < 0 || int(k) >= len(kindCodes) || kindCodes[k].v2 == v2.Code_CODE_UNSPECIFIED {
		return codeMapping{}, false
	}
	return kindCodes[k], true
}

// Shared immutable statuses (protobuf marshals them read-only, so one
// value serves every response).
var (
	statusOK         = &v2.Status{Code: v2.Code_OK, Message: "OK"}
	statusNoMessage  = &v2.Status{Code: v2.Code_MESSAGE_NOT_FOUND, Message: "no new message"}
	statusMultiple   = &v2.Status{Code: v2.Code_MULTIPLE_RESULTS, Message: "entries have different results; check each entry"}
	statusClientID   = &v2.Status{Code: v2.Code_CLIENT_ID_REQUIRED, Message: "the x-mq-client-id header is required"}
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
	m, ok := mappingOf(k)
	if !ok || k == mqerr.KindInternal {
		rid := RequestID(ctx)
		if log != nil {
			log.ErrorContext(ctx, "internal error answered as INTERNAL_ERROR", "err", err.Error(), "kind", k.String(), "request_id", rid)
		}
		return &v2.Status{Code: v2.Code_INTERNAL_ERROR, Message: "internal error (logged by the server, request id " + rid + ")"}
	}
	return &v2.Status{Code: m.v2, Message: mqerr.Message(err)}
}

// grpcCodeOf is the gRPC code for err where a gRPC-level error is the
// contract.
func grpcCodeOf(err error) codes.Code {
	if m, ok := mappingOf(mqerr.KindOf(err)); ok {
		return m.grpc
	}
	return codes.Internal
}

// combine folds per-entry statuses into the top-level one: the common
// status when every entry agrees, MULTIPLE_RESULTS otherwise (spec
// §5.4.3, §5.9).
func combine(sts []*v2.Status) *v2.Status {
	if len(sts) == 0 {
		return statusNoEntries
	}
	first := sts[0]
	for _, s := range sts[1:] {
		if s.GetCode() != first.GetCode() {
			return statusMultiple
		}
	}
	return first
}
