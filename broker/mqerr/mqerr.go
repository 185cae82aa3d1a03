package mqerr

import (
	"context"
	"errors"
	"fmt"
)

// Kind classifies an error by what the caller should do about it. The
// names follow the RocketMQ v2 codes they map to most directly.
type Kind int

const (
	// KindInternal is the default for errors nobody classified: a bug or
	// an unexpected failure below. It is never the client's fault.
	KindInternal Kind = iota
	KindBadRequest
	KindIllegalTopic
	KindIllegalGroup
	KindIllegalTag
	KindIllegalKey
	KindIllegalMessageGroup
	KindIllegalPropertyKey
	KindInvalidTransactionID
	KindIllegalMessageID
	KindIllegalFilter
	KindIllegalInvisibleTime
	KindIllegalDeliveryTime
	KindInvalidReceiptHandle
	KindMessageTypeConflict
	KindUnrecognizedClient
	KindMessageCorrupted
	KindClientIDRequired
	KindIllegalPollingTime
	KindIllegalOffset
	KindUnauthorized
	KindForbidden
	KindNotFound
	KindMessageNotFound
	KindTopicNotFound
	KindGroupNotFound
	KindOffsetNotFound
	KindAlreadyExists
	KindRequestTimeout
	KindPayloadTooLarge
	KindBodyTooLarge
	KindBodyEmpty
	KindPropertiesTooLarge
	KindTooManyRequests
	KindFlushTimeout
	KindStoreUnavailable
	KindUnavailable
	KindNotImplemented
	KindUnsupported
	KindCanceled
	// KindReplicationLost: this member stopped leading its replica group
	// before the write was committed; it may still commit under the next
	// leader, or not at all. Never reported as stored.
	KindReplicationLost
	// KindNoQuorum: no majority of the replica group stored the write in
	// time (members down or unreachable). Never reported as stored; the
	// write may still commit once a majority is back.
	KindNoQuorum
	// KindIllegalLiteTopic: a lite topic name is blank, too long or has
	// characters outside the allowed set, or names no lite topic of a
	// LITE parent where one is required.
	KindIllegalLiteTopic
	// KindLiteTopicQuota: a send would create a lite topic past the
	// parent topic's quota.
	KindLiteTopicQuota
	// KindLiteSubscriptionQuota: a subscription change would give a
	// client more lite topics than its quota.
	KindLiteSubscriptionQuota
	// KindDiskFull: the store's disk has less free space than its
	// reserve (or none at all): new messages are refused, nothing of the
	// request was stored; consumers can still drain what is stored.
	KindDiskFull

	kindCount // sentinel: keep last
)

var kindNames = [...]string{
	KindInternal:              "internal",
	KindBadRequest:            "bad-request",
	KindIllegalTopic:          "illegal-topic",
	KindIllegalGroup:          "illegal-group",
	KindIllegalTag:            "illegal-tag",
	KindIllegalKey:            "illegal-key",
	KindIllegalMessageGroup:   "illegal-message-group",
	KindIllegalPropertyKey:    "illegal-property-key",
	KindInvalidTransactionID:  "invalid-transaction-id",
	KindIllegalMessageID:      "illegal-message-id",
	KindIllegalFilter:         "illegal-filter",
	KindIllegalInvisibleTime:  "illegal-invisible-time",
	KindIllegalDeliveryTime:   "illegal-delivery-time",
	KindInvalidReceiptHandle:  "invalid-receipt-handle",
	KindMessageTypeConflict:   "message-type-conflict",
	KindUnrecognizedClient:    "unrecognized-client",
	KindMessageCorrupted:      "message-corrupted",
	KindClientIDRequired:      "client-id-required",
	KindIllegalPollingTime:    "illegal-polling-time",
	KindIllegalOffset:         "illegal-offset",
	KindUnauthorized:          "unauthorized",
	KindForbidden:             "forbidden",
	KindNotFound:              "not-found",
	KindMessageNotFound:       "message-not-found",
	KindTopicNotFound:         "topic-not-found",
	KindGroupNotFound:         "group-not-found",
	KindOffsetNotFound:        "offset-not-found",
	KindAlreadyExists:         "already-exists",
	KindRequestTimeout:        "request-timeout",
	KindPayloadTooLarge:       "payload-too-large",
	KindBodyTooLarge:          "body-too-large",
	KindBodyEmpty:             "body-empty",
	KindPropertiesTooLarge:    "properties-too-large",
	KindTooManyRequests:       "too-many-requests",
	KindFlushTimeout:          "flush-timeout",
	KindStoreUnavailable:      "store-unavailable",
	KindUnavailable:           "unavailable",
	KindNotImplemented:        "not-implemented",
	KindUnsupported:           "unsupported",
	KindCanceled:              "canceled",
	KindReplicationLost:       "replication-lost",
	KindNoQuorum:              "no-quorum",
	KindIllegalLiteTopic:      "illegal-lite-topic",
	KindLiteTopicQuota:        "lite-topic-quota-exceeded",
	KindLiteSubscriptionQuota: "lite-subscription-quota-exceeded",
	KindDiskFull:              "disk-full",
}

// String names the kind.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Kinds lists every defined kind, for exhaustive mapping tests.
func Kinds() []Kind {
	out := make([]Kind, 0, kindCount)
	for k := Kind(0); k < kindCount; k++ {
		out = append(out, k)
	}
	return out
}

// Error is a classified error.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg == "" && e.Err == nil:
		return e.Kind.String()
	case e.Err == nil || e.Err.Error() == "":
		return e.Msg
	case e.Msg == "":
		return e.Err.Error()
	default:
		return e.Msg + ": " + e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, mqerr.New(kind, "")) true for any error of that kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Kind == e.Kind
}

// Errorf builds a classified error; %w in format wraps as fmt.Errorf does.
func Errorf(kind Kind, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if u := errors.Unwrap(err); u != nil {
		return &Error{Kind: kind, Msg: err.Error(), Err: &hidden{u}}
	}
	return &Error{Kind: kind, Msg: err.Error()}
}

// hidden keeps a wrapped cause reachable for errors.Is/As without printing
// it twice (Errorf's message already contains it).
type hidden struct{ err error }

func (h *hidden) Error() string { return "" }
func (h *hidden) Unwrap() error { return h.err }

// Wrap classifies err with kind and a message prefix. It returns nil for a
// nil err.
func Wrap(kind Kind, err error, msg string) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Msg: msg, Err: err}
}

// Sentinel returns a comparable error of a kind for errors.Is checks.
func Sentinel(kind Kind) error { return &Error{Kind: kind} }

// KindOf returns the kind of the first classified error in err's chain.
// Context cancellation and deadlines are recognised; anything else
// unclassified is KindInternal.
func KindOf(err error) Kind {
	if err == nil {
		return KindInternal
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return KindRequestTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	}
	return KindInternal
}

// Message returns the text to show a client: the classified error's own
// message chain. For unclassified errors it returns a generic text, so
// internal details are logged, not sent.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		msg := e.Error()
		if msg == "" {
			return e.Kind.String()
		}
		return msg
	}
	switch KindOf(err) {
	case KindRequestTimeout:
		return "request deadline exceeded"
	case KindCanceled:
		return "request canceled"
	}
	return "internal error"
}

// Classified reports whether err carries a Kind already (an *Error in its
// chain), so a caller's own classification should leave it as it is.
func Classified(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
