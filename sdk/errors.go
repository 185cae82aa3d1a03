package sdk

import (
	"errors"
	"fmt"
	"strings"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Outcome sentinels of a send (see the package documentation).
var (
	// ErrNotStored: the message was not stored.
	ErrNotStored = errors.New("not stored")
	// ErrOutcomeUnknown: the request left the client and no answer says
	// whether the message was stored; it may have been.
	ErrOutcomeUnknown = errors.New("outcome unknown: the message may have been stored")
	// ErrNotDurable: stored, but the server could not confirm the flush
	// in time; it will normally become durable.
	ErrNotDurable = errors.New("stored but not yet durable")
)

// Other sentinels.
var (
	// ErrUnavailable: the server could not be reached (or is draining).
	ErrUnavailable = errors.New("server unavailable")
	// ErrClosed: the client, producer or consumer was closed.
	ErrClosed = errors.New("closed")
	// ErrCorruptBody: a received body does not match the digest the
	// server sent with it. The message is returned all the same (with its
	// receipt handle, to be acked or left to redelivery).
	ErrCorruptBody = errors.New("body does not match its digest")
)

// Code is a RocketMQ v2 status code (apache.rocketmq.v2.Code).
type Code int32

// Codes the SDK and its users commonly test for.
const (
	CodeOK                       Code = Code(v2.Code_OK)
	CodeBadRequest               Code = Code(v2.Code_BAD_REQUEST)
	CodeIllegalTopic             Code = Code(v2.Code_ILLEGAL_TOPIC)
	CodeIllegalConsumerGroup     Code = Code(v2.Code_ILLEGAL_CONSUMER_GROUP)
	CodeInvalidReceiptHandle     Code = Code(v2.Code_INVALID_RECEIPT_HANDLE)
	CodeMessageTypeConflict      Code = Code(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	CodeUnauthorized             Code = Code(v2.Code_UNAUTHORIZED)
	CodeForbidden                Code = Code(v2.Code_FORBIDDEN)
	CodeMessageNotFound          Code = Code(v2.Code_MESSAGE_NOT_FOUND)
	CodeTopicNotFound            Code = Code(v2.Code_TOPIC_NOT_FOUND)
	CodeConsumerGroupNotFound    Code = Code(v2.Code_CONSUMER_GROUP_NOT_FOUND)
	CodeTooManyRequests          Code = Code(v2.Code_TOO_MANY_REQUESTS)
	CodeMasterPersistenceTimeout Code = Code(v2.Code_MASTER_PERSISTENCE_TIMEOUT)
	CodeSlavePersistenceTimeout  Code = Code(v2.Code_SLAVE_PERSISTENCE_TIMEOUT)
	CodeHANotAvailable           Code = Code(v2.Code_HA_NOT_AVAILABLE)
)

func (c Code) String() string { return v2.Code(c).String() }

// codeError is a sentinel matching any *StatusError with its code.
type codeError Code

func (c codeError) Error() string { return Code(c).String() }

// Sentinels matching a *StatusError by code: errors.Is(err, ErrTopicNotFound).
var (
	ErrTopicNotFound        error = codeError(CodeTopicNotFound)
	ErrGroupNotFound        error = codeError(CodeConsumerGroupNotFound)
	ErrInvalidReceiptHandle error = codeError(CodeInvalidReceiptHandle)
	ErrTooManyRequests      error = codeError(CodeTooManyRequests)
	ErrUnauthorized         error = codeError(CodeUnauthorized)
	ErrMessageTypeConflict  error = codeError(CodeMessageTypeConflict)
	ErrIllegalInvisibleTime error = codeError(Code(v2.Code_ILLEGAL_INVISIBLE_TIME))
	ErrForbidden            error = codeError(CodeForbidden)
)

// StatusError is a non-OK status the server answered (the RocketMQ
// payload status; gRPC itself said OK).
type StatusError struct {
	// Op is the RPC, e.g. "SendMessage".
	Op      string
	Code    Code
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Op, e.Code, int32(e.Code))
	}
	return fmt.Sprintf("%s: %s (%s %d)", e.Op, e.Message, e.Code, int32(e.Code))
}

// Is matches the code sentinels (ErrTopicNotFound, ...).
func (e *StatusError) Is(target error) bool {
	c, ok := target.(codeError)
	return ok && Code(c) == e.Code
}

// CodeOf returns the code of the first *StatusError in err's chain, or 0.
func CodeOf(err error) Code {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func statusErr(op string, st *v2.Status) error {
	if st == nil {
		return &StatusError{Op: op, Code: Code(v2.Code_INTERNAL_SERVER_ERROR), Message: "the server sent no status"}
	}
	if st.GetCode() == v2.Code_OK {
		return nil
	}
	return &StatusError{Op: op, Code: Code(st.GetCode()), Message: st.GetMessage()}
}

// SendError is a failed Send or SendBatch. errors.Is tells the outcome
// (ErrNotStored, ErrOutcomeUnknown, ErrNotDurable) and the cause (a
// *StatusError code sentinel, context.DeadlineExceeded, ...).
type SendError struct {
	Topic      string
	MessageIDs []string
	// Attempts made (≥ 1 unless the deadline had passed before the first).
	Attempts int
	// Outcome is ErrNotStored, ErrOutcomeUnknown or ErrNotDurable.
	Outcome error
	// Err is the last attempt's cause.
	Err error
}

func (e *SendError) Error() string {
	ids := strings.Join(e.MessageIDs, ", ")
	if len(e.MessageIDs) > 3 {
		ids = strings.Join(e.MessageIDs[:3], ", ") + fmt.Sprintf(", … (%d messages)", len(e.MessageIDs))
	}
	att := "attempts"
	if e.Attempts == 1 {
		att = "attempt"
	}
	return fmt.Sprintf("send to %q (message id %s, %d %s): %v: %v", e.Topic, ids, e.Attempts, att, e.Outcome, e.Err)
}

// Unwrap exposes both the outcome sentinel and the cause to errors.Is/As.
func (e *SendError) Unwrap() []error { return []error{e.Outcome, e.Err} }

// MayBeStored reports whether the message may be (or is) stored.
func (e *SendError) MayBeStored() bool { return e.Outcome != ErrNotStored }

// CloseError lists what did not stop cleanly in a Close.
type CloseError struct {
	Problems []error
}

func (e *CloseError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return "close: " + strings.Join(parts, "; ")
}

func (e *CloseError) Unwrap() []error { return e.Problems }

func closeErr(problems []error) error {
	var out []error
	for _, p := range problems {
		var ce *CloseError
		if errors.As(p, &ce) {
			out = append(out, ce.Problems...)
		} else if p != nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &CloseError{Problems: out}
}
