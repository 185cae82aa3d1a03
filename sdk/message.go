package sdk

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Message is a message to send.
type Message struct {
	// Topic to send to (required; one topic per SendBatch).
	Topic string
	// Body (required, non-empty).
	Body []byte
	// Tag for consumers' filters (optional, no '|').
	Tag string
	// Keys index the message for lookups (`mqgate message show KEY`).
	Keys []string
	// Properties are user properties.
	Properties map[string]string
	// MessageGroup makes the message FIFO: messages of one group are
	// delivered in send order to FIFO consumer groups. The topic must be
	// FIFO (or MIXED).
	MessageGroup string
	// DeliveryTime delays the message until then (at most one day
	// ahead). The topic must be DELAY (or MIXED).
	DeliveryTime time.Time
	// ID is the message id; empty means a fresh one (the usual case). Every
	// attempt of one send uses the same id.
	ID string
}

// SendReceipt is what the server stored for one message.
type SendReceipt struct {
	MessageID string
	// Offset in its queue (for delayed messages: the delay stage's).
	Offset int64
	// RecallHandle cancels a delayed message before its delivery time.
	RecallHandle string
}

// ReceivedMessage is a delivered message.
type ReceivedMessage struct {
	Message
	BornTime  time.Time
	BornHost  string
	StoreTime time.Time
	QueueID   int32
	// QueueOffset is where it was read from.
	QueueOffset int64
	// DeliveryAttempt is 1 on the first delivery, +1 per redelivery.
	DeliveryAttempt int32
	// InvisibleDuration the server granted this delivery.
	InvisibleDuration time.Duration
	// ReceiptHandle identifies this delivery for Ack and
	// ChangeInvisibleDuration (which replaces it).
	ReceiptHandle string
	// DeadLetterTopic and DeadLetterMessageID are set for messages read
	// from a dead-letter topic: where they came from.
	DeadLetterTopic, DeadLetterMessageID string
}

func toV2(m *Message, id string, res *v2.Resource, now time.Time) *v2.Message {
	sp := &v2.SystemProperties{
		MessageId:     id,
		Keys:          m.Keys,
		BodyEncoding:  v2.Encoding_IDENTITY,
		MessageType:   v2.MessageType_NORMAL,
		BornTimestamp: timestamppb.New(now),
	}
	if m.Tag != "" {
		sp.Tag = &m.Tag
	}
	switch {
	case !m.DeliveryTime.IsZero():
		sp.MessageType = v2.MessageType_DELAY
		sp.DeliveryTimestamp = timestamppb.New(m.DeliveryTime)
	case m.MessageGroup != "":
		sp.MessageType = v2.MessageType_FIFO
	}
	if m.MessageGroup != "" {
		sp.MessageGroup = &m.MessageGroup
	}
	return &v2.Message{Topic: res, UserProperties: m.Properties, SystemProperties: sp, Body: m.Body}
}

func fromV2(m *v2.Message) (*ReceivedMessage, error) {
	sp := m.GetSystemProperties()
	r := &ReceivedMessage{Message: Message{
		Topic:        m.GetTopic().GetName(),
		Body:         m.GetBody(),
		Tag:          sp.GetTag(),
		Keys:         sp.GetKeys(),
		Properties:   m.GetUserProperties(),
		MessageGroup: sp.GetMessageGroup(),
		ID:           sp.GetMessageId(),
	},
		BornHost:            sp.GetBornHost(),
		QueueID:             sp.GetQueueId(),
		QueueOffset:         sp.GetQueueOffset(),
		DeliveryAttempt:     sp.GetDeliveryAttempt(),
		ReceiptHandle:       sp.GetReceiptHandle(),
		DeadLetterTopic:     sp.GetDeadLetterQueue().GetTopic(),
		DeadLetterMessageID: sp.GetDeadLetterQueue().GetMessageId(),
	}
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		r.DeliveryTime = ts.AsTime()
	}
	if ts := sp.GetBornTimestamp(); ts != nil {
		r.BornTime = ts.AsTime()
	}
	if ts := sp.GetStoreTimestamp(); ts != nil {
		r.StoreTime = ts.AsTime()
	}
	if d := sp.GetInvisibleDuration(); d != nil {
		r.InvisibleDuration = d.AsDuration()
	}
	if err := checkDigest(sp.GetBodyDigest(), r.Body); err != nil {
		return r, err
	}
	if sp.GetBodyEncoding() == v2.Encoding_GZIP {
		zr, err := gzip.NewReader(bytes.NewReader(r.Body))
		if err != nil {
			return r, err
		}
		body, err := io.ReadAll(io.LimitReader(zr, 64<<20))
		if err != nil {
			return r, err
		}
		r.Body = body
	}
	return r, nil
}

// Message ids: the v1 layout every official client uses, 34
// upper-case hex characters: 01, 6 bytes MAC (random when there is none),
// 2 bytes pid, 4 bytes seconds since 2021-01-01, 4 bytes sequence.
var (
	idPrefix [9]byte // version, MAC, pid
	idSeq    atomic.Uint32
	idEpoch  = time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
)

func init() {
	idPrefix[0] = 1
	mac := hardwareAddr()
	if mac == nil {
		mac = make([]byte, 6)
		_, _ = rand.Read(mac)
	}
	copy(idPrefix[1:7], mac)
	binary.BigEndian.PutUint16(idPrefix[7:9], uint16(os.Getpid()))
	var seq [4]byte
	_, _ = rand.Read(seq[:])
	idSeq.Store(binary.BigEndian.Uint32(seq[:]))
}

func hardwareAddr() []byte {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, i := range ifs {
		if len(i.HardwareAddr) >= 6 && i.Flags&net.FlagLoopback == 0 {
			return i.HardwareAddr[:6]
		}
	}
	return nil
}

// NewMessageID returns a fresh message id.
func NewMessageID() string {
	var b [17]byte
	copy(b[:9], idPrefix[:])
	binary.BigEndian.PutUint32(b[9:13], uint32(time.Since(idEpoch)/time.Second))
	binary.BigEndian.PutUint32(b[13:17], idSeq.Add(1))
	return upperHex(b)
}

// upperHex is b in upper-case hex, in one allocation.
func upperHex(b [17]byte) string {
	const digits = "0123456789ABCDEF"
	var out [34]byte
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0x0f]
	}
	return string(out[:])
}

// checkDigest verifies body (as received, before decompression) against
// the server's digest: CRC32 (IEEE) as hex, MD5 or SHA1 as hex, any case.
// A missing or unspecified digest is not checked.
func checkDigest(d *v2.Digest, body []byte) error {
	var want string
	switch d.GetType() {
	case v2.DigestType_CRC32:
		got, err := strconv.ParseUint(d.GetChecksum(), 16, 32)
		if err == nil && uint32(got) == crc32.ChecksumIEEE(body) {
			return nil
		}
		want = strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 16)
	case v2.DigestType_MD5:
		sum := md5.Sum(body)
		want = hex.EncodeToString(sum[:])
	case v2.DigestType_SHA1:
		sum := sha1.Sum(body)
		want = hex.EncodeToString(sum[:])
	default:
		return nil
	}
	if d.GetType() != v2.DigestType_CRC32 && strings.EqualFold(d.GetChecksum(), want) {
		return nil
	}
	return fmt.Errorf("%w: %s %q, the body's is %q", ErrCorruptBody, d.GetType(), d.GetChecksum(), want)
}
