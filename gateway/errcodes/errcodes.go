package errcodes

import (
	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker/mqerr"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Mapping is how one mqerr.Kind travels: as a v2 Code (in a response's
// status payload on apache.rocketmq.v2, in a status detail on
// mqgate.rest.v1) and as a gRPC code where a gRPC-level error is the
// contract.
type Mapping struct {
	V2   v2.Code
	GRPC codes.Code
}

// table is THE map from error kinds to wire codes. A Kind
// missing here fails TestTableCoversEveryKind.
var table = [...]Mapping{
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
	// Stored but not yet durable: the record IS in the log.
	mqerr.KindFlushTimeout:     {v2.Code_MASTER_PERSISTENCE_TIMEOUT, codes.DeadlineExceeded},
	mqerr.KindStoreUnavailable: {v2.Code_INTERNAL_SERVER_ERROR, codes.Unavailable},
	mqerr.KindUnavailable:      {v2.Code_INTERNAL_SERVER_ERROR, codes.Unavailable},
	mqerr.KindNotImplemented:   {v2.Code_NOT_IMPLEMENTED, codes.Unimplemented},
	mqerr.KindUnsupported:      {v2.Code_UNSUPPORTED, codes.Unimplemented},
	mqerr.KindCanceled:         {v2.Code_REQUEST_TIMEOUT, codes.Canceled},
	// Replication: not stored as far as this member knows; clients retry.
	mqerr.KindReplicationLost: {v2.Code_SLAVE_PERSISTENCE_TIMEOUT, codes.Unavailable},
	mqerr.KindNoQuorum:        {v2.Code_HA_NOT_AVAILABLE, codes.Unavailable},

	mqerr.KindIllegalLiteTopic:      {v2.Code_ILLEGAL_LITE_TOPIC, codes.InvalidArgument},
	mqerr.KindLiteTopicQuota:        {v2.Code_LITE_TOPIC_QUOTA_EXCEEDED, codes.ResourceExhausted},
	mqerr.KindLiteSubscriptionQuota: {v2.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED, codes.ResourceExhausted},
	// Below the disk reserve: upstream's broker answers its remoting
	// SERVICE_NOT_AVAILABLE, which its proxy passes on as
	// INTERNAL_SERVER_ERROR; gRPC's code for a full file system.
	mqerr.KindDiskFull: {v2.Code_INTERNAL_SERVER_ERROR, codes.ResourceExhausted},
}

// Of returns the table row of k; false for a kind without one.
func Of(k mqerr.Kind) (Mapping, bool) {
	if k < 0 || int(k) >= len(table) || table[k].V2 == v2.Code_CODE_UNSPECIFIED {
		return Mapping{}, false
	}
	return table[k], true
}

// grpcKinds is the kind an error that carries only a gRPC code stands for
// (grpc-gateway's own errors, the admin API's, the drain interceptor's);
// a code missing here stands for KindInternal.
var grpcKinds = map[codes.Code]mqerr.Kind{
	codes.InvalidArgument:    mqerr.KindBadRequest,
	codes.FailedPrecondition: mqerr.KindBadRequest,
	codes.OutOfRange:         mqerr.KindBadRequest,
	codes.AlreadyExists:      mqerr.KindAlreadyExists,
	codes.Unauthenticated:    mqerr.KindUnauthorized,
	codes.PermissionDenied:   mqerr.KindForbidden,
	codes.NotFound:           mqerr.KindNotFound,
	codes.ResourceExhausted:  mqerr.KindTooManyRequests,
	codes.DeadlineExceeded:   mqerr.KindRequestTimeout,
	codes.Canceled:           mqerr.KindCanceled,
	codes.Unimplemented:      mqerr.KindNotImplemented,
	codes.Unavailable:        mqerr.KindUnavailable,
}

// CodeOfGRPC is the v2 code of an error that carries only gRPC code c: the
// table's v2 code for the kind c stands for (INTERNAL_ERROR when none).
func CodeOfGRPC(c codes.Code) v2.Code {
	return table[grpcKinds[c]].V2
}
