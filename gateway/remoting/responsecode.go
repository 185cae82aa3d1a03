package remoting

import (
	"context"
	"log/slog"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// kindCodes is THE table from error kinds to remoting response codes
// (as upstream answers: bad input 29 or 13 for message
// content, missing topic 17, permission 16, disk/shutdown 14, overload 2,
// internal 1). A Kind missing here fails TestResponseCodeTableCoversEveryKind.
var kindCodes = [...]int16{
	mqerr.KindInternal:             codeSystemError,
	mqerr.KindBadRequest:           codeInvalidParameter,
	mqerr.KindIllegalTopic:         codeInvalidParameter,
	mqerr.KindIllegalGroup:         codeInvalidParameter,
	mqerr.KindIllegalTag:           codeMessageIllegal,
	mqerr.KindIllegalKey:           codeMessageIllegal,
	mqerr.KindIllegalMessageGroup:  codeMessageIllegal,
	mqerr.KindIllegalPropertyKey:   codeMessageIllegal,
	mqerr.KindInvalidTransactionID: codeIllegalOperation,
	mqerr.KindIllegalMessageID:     codeMessageIllegal,
	mqerr.KindIllegalFilter:        codeSubscriptionParseFailed,
	mqerr.KindIllegalInvisibleTime: codeInvalidParameter,
	mqerr.KindIllegalDeliveryTime:  codeMessageIllegal,
	mqerr.KindInvalidReceiptHandle: codeInvalidParameter,
	mqerr.KindMessageTypeConflict:  codeMessageIllegal,
	mqerr.KindUnrecognizedClient:   codeInvalidParameter,
	mqerr.KindMessageCorrupted:     codeMessageIllegal,
	mqerr.KindClientIDRequired:     codeInvalidParameter,
	mqerr.KindIllegalPollingTime:   codeInvalidParameter,
	mqerr.KindIllegalOffset:        codeInvalidParameter,
	mqerr.KindUnauthorized:         codeNoPermission,
	mqerr.KindForbidden:            codeNoPermission,
	mqerr.KindNotFound:             codeQueryNotFound,
	mqerr.KindMessageNotFound:      codeQueryNotFound,
	mqerr.KindTopicNotFound:        codeTopicNotExist,
	mqerr.KindGroupNotFound:        codeSubscriptionGroupNotExist,
	mqerr.KindOffsetNotFound:       codeQueryNotFound,
	mqerr.KindAlreadyExists:        codeTopicExistAlready,
	// The server gave up on the request in time: clients retry on 2.
	mqerr.KindRequestTimeout:     codeSystemBusy,
	mqerr.KindPayloadTooLarge:    codeMessageIllegal,
	mqerr.KindBodyTooLarge:       codeMessageIllegal,
	mqerr.KindBodyEmpty:          codeMessageIllegal,
	mqerr.KindPropertiesTooLarge: codeMessageIllegal,
	mqerr.KindTooManyRequests:    codeSystemBusy,
	// Stored but not yet durable: clients count 10 as "stored".
	mqerr.KindFlushTimeout:     codeFlushDiskTimeout,
	mqerr.KindStoreUnavailable: codeServiceNotAvailable,
	mqerr.KindUnavailable:      codeServiceNotAvailable,
	mqerr.KindNotImplemented:   codeRequestCodeNotSupported,
	// e.g. SQL92 filters: upstream answers SYSTEM_ERROR with a remark.
	mqerr.KindUnsupported: codeSystemError,
	mqerr.KindCanceled:    codeServiceNotAvailable,
	// Not stored as far as this member knows: 2 makes clients retry
	// (FLUSH_SLAVE_TIMEOUT would tell them the message is stored).
	mqerr.KindReplicationLost: codeSystemBusy,
	mqerr.KindNoQuorum:        codeSystemBusy,
	// Lite topics are a v2 feature; upstream's codes where it has them.
	mqerr.KindIllegalLiteTopic:      codeInvalidParameter,
	mqerr.KindLiteTopicQuota:        codeLmqQuotaExceeded,
	mqerr.KindLiteSubscriptionQuota: codeLiteSubscriptionQuotaExceeded,
	// Upstream's answer when its disk is full.
	mqerr.KindDiskFull: codeServiceNotAvailable,
}

// codeOfKind returns the table row of k (false when missing).
func codeOfKind(k mqerr.Kind) (int16, bool) {
	if k < 0 || int(k) >= len(kindCodes) || (kindCodes[k] == 0 && k != mqerr.KindInternal) {
		return codeSystemError, false
	}
	return kindCodes[k], true
}

// errorCode converts err into a response code and remark. Unclassified
// and internal errors are logged and answered with a generic remark, so
// internals never reach the client.
func errorCode(ctx context.Context, log *slog.Logger, err error) (int16, string) {
	k := mqerr.KindOf(err)
	code, ok := codeOfKind(k)
	if !ok || k == mqerr.KindInternal {
		if log != nil {
			log.ErrorContext(ctx, "remoting: internal error answered as SYSTEM_ERROR", "err", err.Error(), "kind", k.String())
		}
		return codeSystemError, "internal error (logged by the server)"
	}
	return code, mqerr.Message(err)
}
