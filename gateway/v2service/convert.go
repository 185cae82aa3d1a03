package v2service

import (
	"context"
	"crypto/md5"
	"hash/crc32"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/offset"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// This file is where v2 and domain types meet: the broker never sees a
// protobuf type (docs/architecture.md).

func messageTypeToModel(t v2.MessageType) model.MessageType {
	switch t {
	case v2.MessageType_NORMAL:
		return model.MessageNormal
	case v2.MessageType_FIFO:
		return model.MessageFIFO
	case v2.MessageType_DELAY:
		return model.MessageDelay
	case v2.MessageType_TRANSACTION:
		return model.MessageTransaction
	case v2.MessageType_LITE:
		return model.MessageLite
	}
	return model.MessageUnspecified
}

func messageTypeToV2(t model.MessageType) v2.MessageType {
	switch t {
	case model.MessageNormal:
		return v2.MessageType_NORMAL
	case model.MessageFIFO:
		return v2.MessageType_FIFO
	case model.MessageDelay:
		return v2.MessageType_DELAY
	case model.MessageTransaction:
		return v2.MessageType_TRANSACTION
	case model.MessageLite:
		return v2.MessageType_LITE
	}
	return v2.MessageType_MESSAGE_TYPE_UNSPECIFIED
}

// deliveredToV2 builds a delivered message. topic is the
// Resource the consumer asked for: bare name plus namespace, also for
// messages read from the retry queue.
// dk picks the body digest (see digestFor).
func deliveredToV2(d *model.Delivered, topic *v2.Resource, dk digestKind) *v2.Message {
	return new(deliveredV2).fill(d, topic, dk)
}

// deliveredV2 is a delivered message's v2 form together with the parts it
// points to, so that building one is a single allocation rather than one
// per part. It must not be copied once filled.
type deliveredV2 struct {
	msg       v2.Message
	sp        v2.SystemProperties
	digest    v2.Digest
	born      timestamppb.Timestamp
	stored    timestamppb.Timestamp
	deliver   timestamppb.Timestamp
	invisible durationpb.Duration
	attempt   int32
}

// fill builds d's v2 form in x (zero) and returns its message.
func (x *deliveredV2) fill(d *model.Delivered, topic *v2.Resource, dk digestKind) *v2.Message {
	sp := &x.sp
	sp.Keys = d.Keys
	sp.MessageId = d.ID
	dk.digestInto(&x.digest, d.Body)
	sp.BodyDigest = &x.digest
	sp.BodyEncoding = v2.Encoding_IDENTITY
	sp.BornHost = d.BornHost
	sp.StoreHost = d.StoreHost
	sp.QueueId = d.QueueID
	sp.QueueOffset = &d.QueueOffset
	if d.Tag != "" {
		sp.Tag = &d.Tag
	}
	if d.BodyGzip {
		sp.BodyEncoding = v2.Encoding_GZIP
	}
	mt := d.Type
	if mt == model.MessageUnspecified {
		mt = d.ActualType()
	}
	sp.MessageType = messageTypeToV2(mt)
	if !d.BornTime.IsZero() {
		sp.BornTimestamp = setTimestamp(&x.born, d.BornTime)
	}
	if !d.StoreTime.IsZero() {
		sp.StoreTimestamp = setTimestamp(&x.stored, d.StoreTime)
	}
	if !d.DeliveryTime.IsZero() {
		sp.DeliveryTimestamp = setTimestamp(&x.deliver, d.DeliveryTime)
	}
	if d.ReceiptHandle != "" {
		sp.ReceiptHandle = &d.ReceiptHandle
	}
	if d.InvisibleFor > 0 {
		sp.InvisibleDuration = setDuration(&x.invisible, d.InvisibleFor)
	}
	// MUST be ≥ 1: 0 breaks the Go client's backoff and FIFO
	// attempt counting.
	x.attempt = max(d.Attempt, 1)
	sp.DeliveryAttempt = &x.attempt
	if d.MessageGroup != "" {
		sp.MessageGroup = &d.MessageGroup
	}
	if d.LiteTopic != "" {
		sp.LiteTopic = &d.LiteTopic
	}
	if d.TraceContext != "" {
		sp.TraceContext = &d.TraceContext
	}
	if d.DLQOriginTopic != "" || d.DLQOriginID != "" {
		sp.DeadLetterQueue = &v2.DeadLetterQueue{Topic: d.DLQOriginTopic, MessageId: d.DLQOriginID}
	}
	x.msg.Topic = topic
	x.msg.UserProperties = d.Properties
	x.msg.SystemProperties = sp
	x.msg.Body = d.Body
	return &x.msg
}

// setTimestamp sets ts to t, as timestamppb.New does, and returns it.
func setTimestamp(ts *timestamppb.Timestamp, t time.Time) *timestamppb.Timestamp {
	ts.Seconds, ts.Nanos = t.Unix(), int32(t.Nanosecond())
	return ts
}

// setDuration sets pd to d, as durationpb.New does, and returns it.
func setDuration(pd *durationpb.Duration, d time.Duration) *durationpb.Duration {
	nanos := d.Nanoseconds()
	secs := nanos / 1e9
	pd.Seconds, pd.Nanos = secs, int32(nanos-secs*1e9)
	return pd
}

// digestKind is the body digest a delivery carries. A client checks it
// and treats a mismatch as a corrupted message (the Java push consumer
// sends it to the dead-letter queue), and the official clients disagree on
// how a CRC32 is written as text:
//   - Go (x-mq-language GO), Java (JAVA) and C# (DOTNET): upper-case hex
//     without zero padding (FormatInt, Long.toHexString then upper case,
//     uint.ToString("X"));
//   - C++ (CPP) and Python (PYTHON): upper-case hex, 8 digits (the bytes in
//     network order, format(v, "08X"));
//   - Node.js (which says HTTP): decimal.
//
// CRC32 costs about a fifteenth of MD5 (MD5 of a 1 KiB body was ~2.7 µs,
// an eighth of a receive's server CPU per message), so the clients whose
// form is known get CRC32 in it, and every other caller MD5, which every
// client writes the same way (upper-case hex).
type digestKind uint8

const (
	digestMD5       digestKind = iota
	digestCRC32                // upper-case hex, no zero padding
	digestCRC32Wide            // upper-case hex, 8 digits
)

// digestFor picks the digest for the client of ctx.
func digestFor(ctx context.Context) digestKind {
	v := metadata.ValueFromIncomingContext(ctx, "x-mq-language")
	if len(v) != 1 {
		return digestMD5
	}
	switch v[0] {
	case "GO", "JAVA", "DOTNET":
		return digestCRC32
	case "CPP", "PYTHON":
		return digestCRC32Wide
	}
	return digestMD5
}

func (k digestKind) digest(body []byte) *v2.Digest {
	d := new(v2.Digest)
	k.digestInto(d, body)
	return d
}

// digestInto sets d (zero) to body's digest.
func (k digestKind) digestInto(d *v2.Digest, body []byte) {
	switch k {
	case digestCRC32:
		d.Type, d.Checksum = v2.DigestType_CRC32, crc32Upper(body)
	case digestCRC32Wide:
		d.Type, d.Checksum = v2.DigestType_CRC32, crc32Wide(body)
	default:
		d.Type, d.Checksum = v2.DigestType_MD5, md5Upper(body)
	}
}

// crc32Upper is the IEEE CRC32 of b in upper-case hex without zero
// padding (the Go, Java and C# clients' form).
func crc32Upper(b []byte) string {
	out := crc32Hex(b)
	i := 0
	for i < len(out)-1 && out[i] == '0' {
		i++
	}
	return string(out[i:])
}

// crc32Wide is the IEEE CRC32 of b in upper-case hex, 8 digits (the C++
// and Python clients' form).
func crc32Wide(b []byte) string {
	out := crc32Hex(b)
	return string(out[:])
}

func crc32Hex(b []byte) [8]byte {
	const digits = "0123456789ABCDEF"
	v := crc32.ChecksumIEEE(b)
	var out [8]byte
	for i := 7; i >= 0; i-- {
		out[i] = digits[v&0xf]
		v >>= 4
	}
	return out
}

// md5Upper is the upper-case hex MD5 of b: the digest the official
// clients verify byte for byte.
func md5Upper(b []byte) string {
	const digits = "0123456789ABCDEF"
	sum := md5.Sum(b)
	var out [2 * md5.Size]byte
	for i, c := range sum {
		out[2*i] = digits[c>>4]
		out[2*i+1] = digits[c&0x0f]
	}
	return string(out[:])
}

func clientTypeToSession(t v2.ClientType) session.ClientType {
	switch t {
	case v2.ClientType_PRODUCER:
		return session.ClientProducer
	case v2.ClientType_PUSH_CONSUMER:
		return session.ClientPushConsumer
	case v2.ClientType_SIMPLE_CONSUMER:
		return session.ClientSimpleConsumer
	case v2.ClientType_PULL_CONSUMER:
		return session.ClientPullConsumer
	case v2.ClientType_LITE_PUSH_CONSUMER:
		return session.ClientLitePushConsumer
	case v2.ClientType_LITE_SIMPLE_CONSUMER:
		return session.ClientLiteSimpleConsumer
	}
	return session.ClientUnspecified
}

// settingsToSession converts validated client Settings. groupKey,
// pubTopics and the keys of subs are the resource keys the caller computed
// while validating.
func settingsToSession(in *v2.Settings, groupKey string, pubTopics []string, subs map[string]session.FilterExpression) *session.Settings {
	out := &session.Settings{
		ClientType:       clientTypeToSession(in.GetClientType()),
		Group:            groupKey,
		Subscriptions:    subs,
		PublishingTopics: pubTopics,
		RequestTimeout:   durationOr(in.GetRequestTimeout(), 0),
	}
	if sub := in.GetSubscription(); sub != nil {
		out.LongPollingTimeout = durationOr(sub.GetLongPollingTimeout(), 0)
		out.Names = addName(out.Names, sub.GetGroup())
		for _, e := range sub.GetSubscriptions() {
			out.Names = addName(out.Names, e.GetTopic())
		}
	}
	for _, t := range in.GetPublishing().GetTopics() {
		out.Names = addName(out.Names, t)
	}
	if ua := in.GetUserAgent(); ua != nil {
		out.UserAgent = session.UserAgent{Language: ua.GetLanguage().String(), Version: ua.GetVersion(),
			Platform: ua.GetPlatform(), Hostname: ua.GetHostname()}
	}
	return out
}

// addName records how the client names a namespaced resource (keys
// without a namespace are their own name).
func addName(m map[string]session.Name, r *v2.Resource) map[string]session.Name {
	if r.GetResourceNamespace() == "" {
		return m
	}
	if m == nil {
		m = make(map[string]session.Name, 2)
	}
	m[resourceKey(r.GetResourceNamespace(), r.GetName())] = session.Name{Namespace: r.GetResourceNamespace(), Name: r.GetName()}
	return m
}

func filterTypeToSession(t v2.FilterType) session.FilterType {
	if t == v2.FilterType_SQL {
		return session.FilterSQL
	}
	return session.FilterTag
}

// durationOr converts d, or returns def when d is absent or invalid.
func durationOr(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil || d.CheckValid() != nil {
		return def
	}
	return d.AsDuration()
}

// retryPolicyToV2 is a consumer group's redelivery policy as Settings
// report it: exactly one strategy, always present.
func retryPolicyToV2(g model.Group) *v2.RetryPolicy {
	attempts := g.MaxDeliveryAttempts
	if attempts <= 0 {
		attempts = model.DefaultMaxDeliveryAttempts
	}
	rp := &v2.RetryPolicy{MaxAttempts: attempts}
	switch g.Retry.Kind {
	case model.RetryExponential:
		p := g.Retry
		if p.Initial <= 0 || p.Max <= 0 || p.Multiplier <= 0 {
			p = model.ExponentialRetryPolicy()
		}
		rp.Strategy = &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
			Initial: durationpb.New(p.Initial), Max: durationpb.New(p.Max), Multiplier: float32(p.Multiplier)}}
	default:
		steps := g.Retry.Steps
		if len(steps) == 0 {
			steps = model.DefaultCustomizedSteps
		}
		next := make([]*durationpb.Duration, len(steps))
		for i, d := range steps {
			next[i] = durationpb.New(d)
		}
		rp.Strategy = &v2.RetryPolicy_CustomizedBackoff{CustomizedBackoff: &v2.CustomizedBackoff{Next: next}}
	}
	return rp
}

// producerBackoff is what producers are told: 3 attempts,
// exponential 10 ms → 1 s ×2 (used after TOO_MANY_REQUESTS).
func producerBackoff() *v2.RetryPolicy {
	return &v2.RetryPolicy{MaxAttempts: 3, Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
		Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2}}}
}

func resolutionToTxn(r v2.TransactionResolution) (txn.Resolution, error) {
	switch r {
	case v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED:
		return txn.Unspecified, nil
	case v2.TransactionResolution_COMMIT:
		return txn.Commit, nil
	case v2.TransactionResolution_ROLLBACK:
		return txn.Rollback, nil
	}
	return txn.Unspecified, mqerr.Errorf(mqerr.KindBadRequest, "unknown transaction resolution %d (want COMMIT or ROLLBACK)", int32(r))
}

// queryPolicyToOffset converts a QueryOffset policy; TIMESTAMP needs a
// valid timestamp (BAD_REQUEST otherwise).
func queryPolicyToOffset(p v2.QueryOffsetPolicy, ts *timestamppb.Timestamp) (offset.Policy, time.Time, error) {
	switch p {
	case v2.QueryOffsetPolicy_BEGINNING:
		return offset.Beginning, time.Time{}, nil
	case v2.QueryOffsetPolicy_END:
		return offset.End, time.Time{}, nil
	case v2.QueryOffsetPolicy_TIMESTAMP:
		if ts == nil {
			return 0, time.Time{}, mqerr.Errorf(mqerr.KindBadRequest, "query_offset_policy TIMESTAMP needs a timestamp")
		}
		if err := ts.CheckValid(); err != nil {
			return 0, time.Time{}, mqerr.Errorf(mqerr.KindBadRequest, "timestamp is not a valid time: %v", err)
		}
		return offset.Timestamp, ts.AsTime(), nil
	}
	return 0, time.Time{}, mqerr.Errorf(mqerr.KindBadRequest, "unknown query_offset_policy %d (want BEGINNING, END or TIMESTAMP)", int32(p))
}
