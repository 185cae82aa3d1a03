package model

import (
	"fmt"
	"strings"
	"time"
)

// TopicType is the kind of messages a topic accepts.
type TopicType int8

const (
	TopicNormal TopicType = iota + 1
	TopicFIFO
	TopicDelay
	TopicTransaction
	// TopicMixed accepts every message type but LITE.
	TopicMixed
	// TopicLite is the parent of any number of lite topics: it accepts
	// LITE messages only, each naming its lite topic.
	TopicLite
)

var topicTypeNames = map[TopicType]string{
	TopicNormal: "NORMAL", TopicFIFO: "FIFO", TopicDelay: "DELAY", TopicTransaction: "TRANSACTION", TopicMixed: "MIXED",
	TopicLite: "LITE",
}

func (t TopicType) String() string {
	if s, ok := topicTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("TopicType(%d)", int8(t))
}

// ParseTopicType accepts NORMAL, FIFO, DELAY, TRANSACTION, MIXED, LITE (any case);
// empty means NORMAL.
func ParseTopicType(s string) (TopicType, error) {
	if s == "" {
		return TopicNormal, nil
	}
	for t, n := range topicTypeNames {
		if strings.EqualFold(s, n) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown topic type %q (want NORMAL, FIFO, DELAY, TRANSACTION, MIXED or LITE)", s)
}

// Accepts reports whether a topic of type t takes messages of type m.
func (t TopicType) Accepts(m MessageType) bool {
	switch t {
	case TopicMixed:
		return m == MessageNormal || m == MessageFIFO || m == MessageDelay || m == MessageTransaction
	case TopicNormal:
		return m == MessageNormal
	case TopicFIFO:
		return m == MessageFIFO
	case TopicDelay:
		return m == MessageDelay
	case TopicTransaction:
		return m == MessageTransaction
	case TopicLite:
		return m == MessageLite
	}
	return false
}

// AcceptedTypes lists the message types a topic of type t accepts.
func (t TopicType) AcceptedTypes() []MessageType {
	var out []MessageType
	for _, m := range []MessageType{MessageNormal, MessageFIFO, MessageDelay, MessageTransaction, MessageLite} {
		if t.Accepts(m) {
			out = append(out, m)
		}
	}
	return out
}

// Perm is a topic's access rights.
type Perm int8

const (
	PermReadWrite Perm = iota
	PermRead
	PermWrite
	PermNone
)

func (p Perm) String() string {
	switch p {
	case PermRead:
		return "READ"
	case PermWrite:
		return "WRITE"
	case PermNone:
		return "NONE"
	}
	return "READ_WRITE"
}

// Readable reports whether consumers may read.
func (p Perm) Readable() bool { return p == PermReadWrite || p == PermRead }

// Writable reports whether producers may write.
func (p Perm) Writable() bool { return p == PermReadWrite || p == PermWrite }

// Topic is a stored topic.
type Topic struct {
	Name       string
	Type       TopicType
	Queues     int32
	Perm       Perm
	CreateTime time.Time
	// LiteTTL is how long a lite topic of a LITE topic lives after its
	// last message (zero: DefaultLiteTTL; negative: forever).
	LiteTTL time.Duration
}

// DefaultLiteTTL is a LITE topic's lite topic expiry when none is set.
const DefaultLiteTTL = 24 * time.Hour

// LiteExpiry is the effective lite topic expiry of t (0: never).
func (t Topic) LiteExpiry() time.Duration {
	switch {
	case t.LiteTTL < 0:
		return 0
	case t.LiteTTL == 0:
		return DefaultLiteTTL
	}
	return t.LiteTTL
}

// RetryKind selects a group's redelivery backoff.
type RetryKind int8

const (
	// RetryCustomized uses a fixed schedule of delays (upstream's default).
	RetryCustomized RetryKind = iota
	// RetryExponential doubles (by Multiplier) from Initial up to Max.
	RetryExponential
)

// RetryPolicy is a group's backoff between delivery attempts.
type RetryPolicy struct {
	Kind       RetryKind
	Steps      []time.Duration // customized
	Initial    time.Duration   // exponential
	Max        time.Duration
	Multiplier float64
}

// DefaultCustomizedSteps is upstream's default 18-step schedule.
var DefaultCustomizedSteps = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// DefaultRetryPolicy is the customized upstream schedule.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Kind: RetryCustomized, Steps: append([]time.Duration(nil), DefaultCustomizedSteps...)}
}

// ExponentialRetryPolicy is upstream's exponential default: 5 s doubling to 2 h.
func ExponentialRetryPolicy() RetryPolicy {
	return RetryPolicy{Kind: RetryExponential, Initial: 5 * time.Second, Max: 2 * time.Hour, Multiplier: 2}
}

// Delay returns the backoff before delivery attempt+1 after attempt failed
// (attempt ≥ 1).
func (p RetryPolicy) Delay(attempt int32) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	switch p.Kind {
	case RetryExponential:
		d := float64(p.Initial)
		for i := int32(1); i < attempt && d < float64(p.Max); i++ {
			d *= p.Multiplier
		}
		return min(time.Duration(d), p.Max)
	default:
		steps := p.Steps
		if len(steps) == 0 {
			steps = DefaultCustomizedSteps
		}
		return steps[min(int(attempt), len(steps))-1]
	}
}

// String names the policy kind as the CLI and admin API spell it.
func (k RetryKind) String() string {
	if k == RetryExponential {
		return "exponential"
	}
	return "customized"
}

// ParseRetryPolicy accepts "customized" (or empty) and "exponential".
func ParseRetryPolicy(s string) (RetryPolicy, error) {
	switch strings.ToLower(s) {
	case "", "customized":
		return DefaultRetryPolicy(), nil
	case "exponential":
		return ExponentialRetryPolicy(), nil
	}
	return RetryPolicy{}, fmt.Errorf("unknown retry policy %q (want customized or exponential)", s)
}

// DefaultMaxDeliveryAttempts is upstream's retryMaxTimes (16) + 1.
const DefaultMaxDeliveryAttempts = 17

// Group is a stored consumer group.
type Group struct {
	Name                string
	FIFO                bool
	MaxDeliveryAttempts int32
	Retry               RetryPolicy
	CreateTime          time.Time
}

// MessageType is the type a producer gives a message.
type MessageType int8

const (
	MessageUnspecified MessageType = iota
	MessageNormal
	MessageFIFO
	MessageDelay
	MessageTransaction
	// MessageLite is a message of a lite topic of a LITE topic.
	MessageLite
)

func (m MessageType) String() string {
	switch m {
	case MessageNormal:
		return "NORMAL"
	case MessageFIFO:
		return "FIFO"
	case MessageDelay:
		return "DELAY"
	case MessageTransaction:
		return "TRANSACTION"
	case MessageLite:
		return "LITE"
	}
	return "UNSPECIFIED"
}

// Message is a message as a producer sends it.
type Message struct {
	Topic string
	// ID is the client-generated message id, stored and echoed verbatim.
	ID   string
	Tag  string
	Keys []string
	// MessageGroup orders FIFO messages.
	MessageGroup string
	// LiteTopic names the lite topic of a LITE message (its Topic is the
	// LITE parent).
	LiteTopic string
	// DeliveryTime delays visibility until then (zero: immediate).
	DeliveryTime time.Time
	// Transactional messages stay invisible until committed.
	Transactional bool
	// Type is what the producer declared (MessageUnspecified: derive).
	Type MessageType
	// Properties are user properties only.
	Properties map[string]string
	Body       []byte
	// BodyGzip: the body is gzip-compressed and delivered as such.
	BodyGzip     bool
	BornTime     time.Time
	BornHost     string
	TraceContext string
	// TxRecovery is how long after the send mqgate waits before asking a
	// producer about an unfinished transaction (zero: default).
	TxRecovery time.Duration
	// ReconsumeTimes is carried for remoting send-back and DLQ copies.
	ReconsumeTimes int32
}

// ActualType derives the type from content: LITE if a lite topic is set,
// else TRANSACTION if transactional, else DELAY if a delivery time is set,
// else FIFO if a message group is set, else NORMAL.
func (m *Message) ActualType() MessageType {
	switch {
	case m.LiteTopic != "":
		return MessageLite
	case m.Transactional:
		return MessageTransaction
	case !m.DeliveryTime.IsZero():
		return MessageDelay
	case m.MessageGroup != "":
		return MessageFIFO
	}
	return MessageNormal
}

// Producer identifies who sent a message.
type Producer struct {
	ClientID string
	Host     string
}

// SendResult is the outcome of one message of a send.
type SendResult struct {
	MessageID     string
	QueueID       int32
	Offset        int64
	TransactionID string
	RecallHandle  string
	// Err is nil when stored with the promised durability; a flush timeout
	// (mqerr.KindFlushTimeout) means stored but not yet durable.
	Err error
}

// Delivered is a message as a consumer receives it.
type Delivered struct {
	Message
	QueueID     int32
	QueueOffset int64
	StoreTime   time.Time
	StoreHost   string
	// Attempt is the delivery attempt (1 on first delivery).
	Attempt int32
	// ReceiptHandle is empty for pulled (non-POP) messages.
	ReceiptHandle string
	// InvisibleFor is the invisibility granted with this delivery.
	InvisibleFor time.Duration
	// DLQOriginTopic and DLQOriginID are set for messages read from a
	// dead-letter topic.
	DLQOriginTopic, DLQOriginID string
}

// Filter selects messages by tag or, when SQL is set, by an SQL92
// expression over their properties. The zero Filter (no Tags, no SQL)
// means all ("*").
type Filter struct {
	Tags map[string]struct{}
	// SQL is a compiled SQL92 expression (broker.SQLFilter builds one);
	// Tags is empty then.
	SQL Matcher
}

// Properties is what a filter reads of a stored message
// (*message.Message is one): its properties by name, system ones such as
// TAGS and KEYS included. An alias of the unnamed interface, so that
// broker/sqlfilter's compiled expression is a Matcher as it is.
type Properties = interface {
	Get(key string) (string, bool)
}

// Matcher is a compiled property filter (*sqlfilter.Expr is one).
type Matcher interface {
	// Match reports whether the message's properties satisfy it.
	Match(p Properties) bool
}

// ParseTagFilter parses "*", "" or "a||b||c". Empty members are dropped;
// a member with control characters is an error.
func ParseTagFilter(expr string) (Filter, error) {
	e := strings.TrimSpace(expr)
	if e == "" || e == "*" {
		return Filter{}, nil
	}
	tags := map[string]struct{}{}
	for _, part := range strings.Split(e, "||") {
		p := strings.TrimSpace(part)
		if p == "" {
			continue
		}
		if p == "*" {
			return Filter{}, nil
		}
		for _, r := range p {
			if isControl(r) {
				return Filter{}, fmt.Errorf("tag filter %q has a control character", expr)
			}
		}
		tags[p] = struct{}{}
	}
	if len(tags) == 0 {
		return Filter{}, nil
	}
	return Filter{Tags: tags}, nil
}

// All reports whether the filter matches everything.
func (f Filter) All() bool { return len(f.Tags) == 0 && f.SQL == nil }

// ByTag reports whether the filter is a tag set: a consume queue entry's
// tag hash can rule a message out before it is read.
func (f Filter) ByTag() bool { return len(f.Tags) > 0 }

// Match reports whether a message with tag and properties p matches;
// untagged messages match a tag filter only when it is "*".
func (f Filter) Match(tag string, p Properties) bool {
	if f.SQL != nil {
		return f.SQL.Match(p)
	}
	if len(f.Tags) == 0 {
		return true
	}
	_, ok := f.Tags[tag]
	return ok
}

func isControl(r rune) bool { return r <= 0x1f || (r >= 0x7f && r <= 0x9f) }
