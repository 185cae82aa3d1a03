package v2service

import (
	"slices"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// ServerCodec is the gRPC codec for a server carrying MessagingService
// (grpcserver.Options.Codec). It is grpc-go's proto codec except for the
// ReceiveMessageResponse frames that carry a message: those are encoded
// here, field by field in field-number order exactly as proto.Marshal
// lays them out (map entries sorted by key, as a deterministic
// proto.Marshal writes them), and the body, the message's last field, is
// handed to the transport as it is instead of being copied into the
// encoded frame. A frame this encoder does not cover byte for byte
// (unknown fields, a string that is not valid UTF-8, which proto.Marshal
// refuses) goes to the proto codec, so the result, error included, is
// what the proto codec gives.
func ServerCodec() encoding.CodecV2 {
	return serverCodec{base: encoding.GetCodecV2(grpcproto.Name)}
}

type serverCodec struct{ base encoding.CodecV2 }

func (c serverCodec) Name() string { return grpcproto.Name }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*v2.ReceiveMessageResponse); ok {
		if out, ok := marshalReceived(r, inlineBodyMax); ok {
			return out, nil
		}
	}
	return c.base.Marshal(v)
}

// inlineBodyMax is the largest body copied into the encoded frame; larger
// ones travel as their own buffer. Below it the copy costs less than the
// allocations a frame in two buffers takes.
const inlineBodyMax = 8 << 10

// marshalReceived encodes a ReceiveMessageResponse carrying a message.
// ok is false when the frame is of another kind or has something the
// encoder leaves to proto.Marshal. Bodies longer than inline are not
// copied: the returned slice refers to them.
func marshalReceived(r *v2.ReceiveMessageResponse, inline int) (mem.BufferSlice, bool) {
	c, ok := r.GetContent().(*v2.ReceiveMessageResponse_Message)
	if !ok || c.Message == nil || !plain(r) || !messageEncodable(c.Message) {
		return nil, false
	}
	m := c.Message
	spSize := 0
	if m.SystemProperties != nil {
		spSize = systemPropertiesSize(m.SystemProperties)
	}
	inner := messageSize(m, spSize)
	body := m.Body
	total := protowire.SizeTag(2) + protowire.SizeBytes(inner)
	head := total
	if len(body) > inline {
		head -= len(body)
	} else {
		body = nil
	}
	// A buffer too small for grpc-go to pool is allocated as it is.
	var pool mem.BufferPool
	var buf *[]byte
	if mem.IsBelowBufferPoolingThreshold(head) {
		b := make([]byte, 0, head)
		buf = &b
	} else {
		pool = mem.DefaultBufferPool()
		buf = pool.Get(head)
	}
	b := protowire.AppendTag((*buf)[:0], 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	b = appendMessage(b, m, spSize, body == nil)
	*buf = b
	if body == nil {
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, true
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool), mem.SliceBuffer(body)}, true
}

// plain reports a message with no unknown fields.
func plain(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 0 }

// timesKnown reports whether sp's timestamps and durations have no
// unknown fields.
func timesKnown(sp *v2.SystemProperties) bool {
	for _, t := range [...]*timestamppb.Timestamp{sp.BornTimestamp, sp.StoreTimestamp, sp.DeliveryTimestamp} {
		if t != nil && !plain(t) {
			return false
		}
	}
	for _, d := range [...]*durationpb.Duration{sp.InvisibleDuration, sp.OrphanedTransactionRecoveryDuration} {
		if d != nil && !plain(d) {
			return false
		}
	}
	return true
}

// messageEncodable reports whether m and what it points to hold only what
// the encoder writes: no unknown fields, every string valid UTF-8.
func messageEncodable(m *v2.Message) bool {
	if !plain(m) {
		return false
	}
	if t := m.Topic; t != nil && (!plain(t) || !utf8.ValidString(t.ResourceNamespace) || !utf8.ValidString(t.Name)) {
		return false
	}
	for k, v := range m.UserProperties {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	sp := m.SystemProperties
	if sp == nil {
		return true
	}
	if !plain(sp) || !validOpt(sp.Tag) || !utf8.ValidString(sp.MessageId) || !utf8.ValidString(sp.BornHost) ||
		!utf8.ValidString(sp.StoreHost) || !validOpt(sp.ReceiptHandle) || !validOpt(sp.MessageGroup) ||
		!validOpt(sp.TraceContext) || !validOpt(sp.LiteTopic) {
		return false
	}
	for _, k := range sp.Keys {
		if !utf8.ValidString(k) {
			return false
		}
	}
	if d := sp.BodyDigest; d != nil && (!plain(d) || !utf8.ValidString(d.Checksum)) {
		return false
	}
	if q := sp.DeadLetterQueue; q != nil && (!plain(q) || !utf8.ValidString(q.Topic) || !utf8.ValidString(q.MessageId)) {
		return false
	}
	return timesKnown(sp)
}

func validOpt(s *string) bool { return s == nil || utf8.ValidString(*s) }

// Sizes. A proto3 scalar without presence is written only when not zero;
// one with presence (a pointer) and a message field whenever set.

func sizeStr(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func sizeOptStr(num protowire.Number, s *string) int {
	if s == nil {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(*s))
}

func sizeInt(num protowire.Number, v int64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(v))
}

func sizeSub(num protowire.Number, n int) int { return protowire.SizeTag(num) + protowire.SizeBytes(n) }

func resourceSize(r *v2.Resource) int {
	return sizeStr(1, r.ResourceNamespace) + sizeStr(2, r.Name)
}

func timestampSize(t *timestamppb.Timestamp) int {
	return sizeInt(1, t.Seconds) + sizeInt(2, int64(t.Nanos))
}

func durationSize(d *durationpb.Duration) int {
	return sizeInt(1, d.Seconds) + sizeInt(2, int64(d.Nanos))
}

func digestSize(d *v2.Digest) int { return sizeInt(1, int64(d.Type)) + sizeStr(2, d.Checksum) }

func dlqSize(q *v2.DeadLetterQueue) int { return sizeStr(1, q.Topic) + sizeStr(2, q.MessageId) }

func mapEntrySize(k, v string) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
}

func systemPropertiesSize(sp *v2.SystemProperties) int {
	n := sizeOptStr(1, sp.Tag)
	for _, k := range sp.Keys {
		n += protowire.SizeTag(2) + protowire.SizeBytes(len(k))
	}
	n += sizeStr(3, sp.MessageId)
	if sp.BodyDigest != nil {
		n += sizeSub(4, digestSize(sp.BodyDigest))
	}
	n += sizeInt(5, int64(sp.BodyEncoding)) + sizeInt(6, int64(sp.MessageType))
	if sp.BornTimestamp != nil {
		n += sizeSub(7, timestampSize(sp.BornTimestamp))
	}
	n += sizeStr(8, sp.BornHost)
	if sp.StoreTimestamp != nil {
		n += sizeSub(9, timestampSize(sp.StoreTimestamp))
	}
	n += sizeStr(10, sp.StoreHost)
	if sp.DeliveryTimestamp != nil {
		n += sizeSub(11, timestampSize(sp.DeliveryTimestamp))
	}
	n += sizeOptStr(12, sp.ReceiptHandle)
	n += sizeInt(13, int64(sp.QueueId))
	if sp.QueueOffset != nil {
		n += protowire.SizeTag(14) + protowire.SizeVarint(uint64(*sp.QueueOffset))
	}
	if sp.InvisibleDuration != nil {
		n += sizeSub(15, durationSize(sp.InvisibleDuration))
	}
	if sp.DeliveryAttempt != nil {
		n += protowire.SizeTag(16) + protowire.SizeVarint(uint64(int64(*sp.DeliveryAttempt)))
	}
	n += sizeOptStr(17, sp.MessageGroup) + sizeOptStr(18, sp.TraceContext)
	if sp.OrphanedTransactionRecoveryDuration != nil {
		n += sizeSub(19, durationSize(sp.OrphanedTransactionRecoveryDuration))
	}
	if sp.DeadLetterQueue != nil {
		n += sizeSub(20, dlqSize(sp.DeadLetterQueue))
	}
	n += sizeOptStr(21, sp.LiteTopic)
	if sp.Priority != nil {
		n += protowire.SizeTag(22) + protowire.SizeVarint(uint64(int64(*sp.Priority)))
	}
	return n
}

// messageSize is m's encoded size; spSize is its system properties'.
func messageSize(m *v2.Message, spSize int) int {
	n := 0
	if m.Topic != nil {
		n += sizeSub(1, resourceSize(m.Topic))
	}
	for k, v := range m.UserProperties {
		n += sizeSub(2, mapEntrySize(k, v))
	}
	if m.SystemProperties != nil {
		n += sizeSub(3, spSize)
	}
	if len(m.Body) > 0 {
		n += protowire.SizeTag(4) + protowire.SizeBytes(len(m.Body))
	}
	return n
}

// Appends, in the same field order as the sizes.

func appendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return appendAlways(b, num, s)
}

func appendAlways(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendOptStr(b []byte, num protowire.Number, s *string) []byte {
	if s == nil {
		return b
	}
	return appendAlways(b, num, *s)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendVarintField(b, num, v)
}

func appendVarintField(b []byte, num protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendSub(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func appendTimestamp(b []byte, num protowire.Number, t *timestamppb.Timestamp) []byte {
	if t == nil {
		return b
	}
	return appendSecondsNanos(b, num, timestampSize(t), t.Seconds, t.Nanos)
}

func appendDuration(b []byte, num protowire.Number, d *durationpb.Duration) []byte {
	if d == nil {
		return b
	}
	return appendSecondsNanos(b, num, durationSize(d), d.Seconds, d.Nanos)
}

// appendSecondsNanos writes a Timestamp or Duration (the same two fields)
// of encoded size n as field num.
func appendSecondsNanos(b []byte, num protowire.Number, n int, seconds int64, nanos int32) []byte {
	b = appendSub(b, num, n)
	b = appendInt(b, 1, seconds)
	return appendInt(b, 2, int64(nanos))
}

func appendSystemProperties(b []byte, sp *v2.SystemProperties) []byte {
	b = appendOptStr(b, 1, sp.Tag)
	for _, k := range sp.Keys {
		b = appendAlways(b, 2, k)
	}
	b = appendStr(b, 3, sp.MessageId)
	if d := sp.BodyDigest; d != nil {
		b = appendSub(b, 4, digestSize(d))
		b = appendInt(b, 1, int64(d.Type))
		b = appendStr(b, 2, d.Checksum)
	}
	b = appendInt(b, 5, int64(sp.BodyEncoding))
	b = appendInt(b, 6, int64(sp.MessageType))
	b = appendTimestamp(b, 7, sp.BornTimestamp)
	b = appendStr(b, 8, sp.BornHost)
	b = appendTimestamp(b, 9, sp.StoreTimestamp)
	b = appendStr(b, 10, sp.StoreHost)
	b = appendTimestamp(b, 11, sp.DeliveryTimestamp)
	b = appendOptStr(b, 12, sp.ReceiptHandle)
	b = appendInt(b, 13, int64(sp.QueueId))
	if sp.QueueOffset != nil {
		b = appendVarintField(b, 14, *sp.QueueOffset)
	}
	b = appendDuration(b, 15, sp.InvisibleDuration)
	if sp.DeliveryAttempt != nil {
		b = appendVarintField(b, 16, int64(*sp.DeliveryAttempt))
	}
	b = appendOptStr(b, 17, sp.MessageGroup)
	b = appendOptStr(b, 18, sp.TraceContext)
	b = appendDuration(b, 19, sp.OrphanedTransactionRecoveryDuration)
	if q := sp.DeadLetterQueue; q != nil {
		b = appendSub(b, 20, dlqSize(q))
		b = appendStr(b, 1, q.Topic)
		b = appendStr(b, 2, q.MessageId)
	}
	b = appendOptStr(b, 21, sp.LiteTopic)
	if sp.Priority != nil {
		b = appendVarintField(b, 22, int64(*sp.Priority))
	}
	return b
}

// appendMessage appends m's fields (spSize: its system properties' size);
// the body's bytes only when withBody (its tag and length always).
func appendMessage(b []byte, m *v2.Message, spSize int, withBody bool) []byte {
	if t := m.Topic; t != nil {
		b = appendSub(b, 1, resourceSize(t))
		b = appendStr(b, 1, t.ResourceNamespace)
		b = appendStr(b, 2, t.Name)
	}
	switch len(m.UserProperties) {
	case 0:
	case 1:
		for k, v := range m.UserProperties {
			b = appendMapEntry(b, k, v)
		}
	default:
		keys := make([]string, 0, len(m.UserProperties))
		for k := range m.UserProperties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = appendMapEntry(b, k, m.UserProperties[k])
		}
	}
	if sp := m.SystemProperties; sp != nil {
		b = appendSub(b, 3, spSize)
		b = appendSystemProperties(b, sp)
	}
	if len(m.Body) > 0 {
		b = appendSub(b, 4, len(m.Body))
		if withBody {
			b = append(b, m.Body...)
		}
	}
	return b
}

func appendMapEntry(b []byte, k, v string) []byte {
	b = appendSub(b, 2, mapEntrySize(k, v))
	b = appendAlways(b, 1, k)
	return appendAlways(b, 2, v)
}

// RequestSize is the encoded size of a SendMessageRequest or an
// AckMessageRequest, the same as proto.Size's, from the sizes the encoder
// above uses (grpcserver.Options.RequestSize: the request budget keeps it
// while the call's handler runs). ok is false for other requests and for
// a request with unknown fields anywhere, which proto.Size then measures.
func RequestSize(m proto.Message) (int, bool) {
	if a, ok := m.(*v2.AckMessageRequest); ok {
		return ackRequestSize(a)
	}
	r, ok := m.(*v2.SendMessageRequest)
	if !ok || !plain(r) {
		return 0, false
	}
	n := 0
	for _, msg := range r.Messages {
		if msg == nil || !messageKnown(msg) {
			return 0, false
		}
		spSize := 0
		if msg.SystemProperties != nil {
			spSize = systemPropertiesSize(msg.SystemProperties)
		}
		n += sizeSub(1, messageSize(msg, spSize))
	}
	return n, true
}

// messageKnown reports whether m and what it points to have no unknown
// fields (what the sizes above leave out).
func messageKnown(m *v2.Message) bool {
	if !plain(m) || m.Topic != nil && !plain(m.Topic) {
		return false
	}
	sp := m.SystemProperties
	if sp == nil {
		return true
	}
	if !plain(sp) || sp.BodyDigest != nil && !plain(sp.BodyDigest) || sp.DeadLetterQueue != nil && !plain(sp.DeadLetterQueue) {
		return false
	}
	return timesKnown(sp)
}

// ackRequestSize is RequestSize of an AckMessageRequest.
func ackRequestSize(a *v2.AckMessageRequest) (int, bool) {
	if !plain(a) || a.Group != nil && !plain(a.Group) || a.Topic != nil && !plain(a.Topic) {
		return 0, false
	}
	n := 0
	if a.Group != nil {
		n += sizeSub(1, resourceSize(a.Group))
	}
	if a.Topic != nil {
		n += sizeSub(2, resourceSize(a.Topic))
	}
	for _, e := range a.Entries {
		if e == nil || !plain(e) {
			return 0, false
		}
		n += sizeSub(3, sizeStr(1, e.MessageId)+sizeStr(2, e.ReceiptHandle)+sizeOptStr(3, e.LiteTopic))
	}
	return n, true
}
