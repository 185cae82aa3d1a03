package v2service

import (
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/gateway/errcodes"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

var testNow = time.UnixMilli(1_800_000_000_000)

func okMsg() *v2.Message {
	tag := "tagA"
	return &v2.Message{
		Topic:          &v2.Resource{Name: "orders"},
		UserProperties: map[string]string{"k": "v"},
		SystemProperties: &v2.SystemProperties{
			MessageId:   "0156F7E71C361B21BC024CCDBE00000000",
			Tag:         &tag,
			Keys:        []string{"key1"},
			MessageType: v2.MessageType_NORMAL,
		},
		Body: []byte("hello"),
	}
}

func with(f func(m *v2.Message)) []*v2.Message {
	m := okMsg()
	f(m)
	return []*v2.Message{m}
}

func str(s string) *string { return &s }

// validateSend is what a SendMessage goes through before the topic is
// looked up: the edge's shape checks and conversion, then the broker's
// per-message rules.
func validateSend(msgs []*v2.Message) error {
	_, ms, err := toModelMessages(msgs)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := produce.ValidateMessage(m, testNow, produce.DefaultLimits()); err != nil {
			return err
		}
	}
	return nil
}

var (
	MaxBodySize        = produce.DefaultLimits().MaxBodySize
	MaxUserProperties  = produce.DefaultLimits().MaxProperties
	MaxPropertiesBytes = produce.DefaultLimits().MaxPropertiesSize
	MaxMessageGroup    = produce.DefaultLimits().MaxMessageGroup
)

// Upstream's validation order and codes for a send, one case per rule, plus
// cases where two rules are broken at once: the earlier rule wins.
func TestSendValidationOrder(t *testing.T) {
	manyProps := map[string]string{}
	for i := range MaxUserProperties + 1 {
		manyProps[fmt.Sprintf("p%d", i)] = "v"
	}
	cases := []struct {
		name string
		msgs []*v2.Message
		want v2.Code
	}{
		{"1 no messages", nil, v2.Code_MESSAGE_CORRUPTED},
		{"2 blank topic", with(func(m *v2.Message) { m.Topic.Name = "" }), v2.Code_ILLEGAL_TOPIC},
		{"2 nil topic", with(func(m *v2.Message) { m.Topic = nil }), v2.Code_ILLEGAL_TOPIC},
		{"2 bad chars", with(func(m *v2.Message) { m.Topic.Name = "a b" }), v2.Code_ILLEGAL_TOPIC},
		{"2 too long", with(func(m *v2.Message) { m.Topic.Name = strings.Repeat("t", 128) }), v2.Code_ILLEGAL_TOPIC},
		{"2 system topic", with(func(m *v2.Message) { m.Topic.Name = "RMQ_SYS_TRACE_TOPIC" }), v2.Code_ILLEGAL_TOPIC},
		{"2 rmq_sys_ prefix", with(func(m *v2.Message) { m.Topic.Name = "rmq_sys_revive" }), v2.Code_ILLEGAL_TOPIC},
		{"2 before 4", with(func(m *v2.Message) { m.Topic.Name = ""; m.Body = nil }), v2.Code_ILLEGAL_TOPIC},
		{"3 mixed topics", append(with(func(*v2.Message) {}), with(func(m *v2.Message) { m.Topic.Name = "other" })...), v2.Code_MESSAGE_CORRUPTED},
		{"3 mixed namespaces", append(with(func(*v2.Message) {}), with(func(m *v2.Message) { m.Topic.ResourceNamespace = "ns" })...), v2.Code_MESSAGE_CORRUPTED},
		{"4 empty body", with(func(m *v2.Message) { m.Body = nil }), v2.Code_MESSAGE_BODY_EMPTY},
		{"4 body too large", with(func(m *v2.Message) { m.Body = make([]byte, MaxBodySize+1) }), v2.Code_MESSAGE_BODY_TOO_LARGE},
		{"4 before 5", with(func(m *v2.Message) { m.Body = nil; m.UserProperties = map[string]string{"KEYS": "x"} }), v2.Code_MESSAGE_BODY_EMPTY},
		{"5 too many props", with(func(m *v2.Message) { m.UserProperties = manyProps }), v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"5 reserved key", with(func(m *v2.Message) { m.UserProperties = map[string]string{"UNIQ_KEY": "x"} }), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"5 control in key", with(func(m *v2.Message) { m.UserProperties = map[string]string{"a\x01": "x"} }), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"5 C1 control in value", with(func(m *v2.Message) { m.UserProperties = map[string]string{"a": "x\u0085"} }), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"5 before 6", with(func(m *v2.Message) {
			m.UserProperties = map[string]string{"TAGS": "x"}
			m.SystemProperties.Tag = str("a|b")
		}), v2.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"6 tag with bar", with(func(m *v2.Message) { m.SystemProperties.Tag = str("a|b") }), v2.Code_ILLEGAL_MESSAGE_TAG},
		{"6 blank tag", with(func(m *v2.Message) { m.SystemProperties.Tag = str("  ") }), v2.Code_ILLEGAL_MESSAGE_TAG},
		{"6 control tag", with(func(m *v2.Message) { m.SystemProperties.Tag = str("a\tb") }), v2.Code_ILLEGAL_MESSAGE_TAG},
		{"6 before 7", with(func(m *v2.Message) { m.SystemProperties.Tag = str(" "); m.SystemProperties.Keys = []string{" "} }), v2.Code_ILLEGAL_MESSAGE_TAG},
		{"7 blank key", with(func(m *v2.Message) { m.SystemProperties.Keys = []string{"ok", " "} }), v2.Code_ILLEGAL_MESSAGE_KEY},
		{"7 control key", with(func(m *v2.Message) { m.SystemProperties.Keys = []string{"a\nb"} }), v2.Code_ILLEGAL_MESSAGE_KEY},
		{"8 properties too large", with(func(m *v2.Message) {
			m.UserProperties = map[string]string{"big": strings.Repeat("x", MaxPropertiesBytes)}
		}), v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"8 tag and keys count", with(func(m *v2.Message) {
			m.UserProperties = nil
			m.SystemProperties.Keys = []string{strings.Repeat("k", MaxPropertiesBytes-3)}
		}), v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"9 blank id", with(func(m *v2.Message) { m.SystemProperties.MessageId = " " }), v2.Code_ILLEGAL_MESSAGE_ID},
		{"8 before 9", with(func(m *v2.Message) {
			m.UserProperties = map[string]string{"big": strings.Repeat("x", MaxPropertiesBytes)}
			m.SystemProperties.MessageId = ""
		}), v2.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"10 tx recovery too long", with(func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(2 * time.Hour)
		}), v2.Code_BAD_REQUEST},
		{"11 delivery too far", with(func(m *v2.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(testNow.Add(25 * time.Hour))
		}), v2.Code_ILLEGAL_DELIVERY_TIME},
		{"10 before 11", with(func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(2 * time.Hour)
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(testNow.Add(25 * time.Hour))
		}), v2.Code_BAD_REQUEST},
		{"12 group too long", with(func(m *v2.Message) { m.SystemProperties.MessageGroup = str(strings.Repeat("g", MaxMessageGroup)) }), v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"12 blank group", with(func(m *v2.Message) { m.SystemProperties.MessageGroup = str(" ") }), v2.Code_ILLEGAL_MESSAGE_GROUP},
		{"11 before 12", with(func(m *v2.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(testNow.Add(25 * time.Hour))
			m.SystemProperties.MessageGroup = str(" ")
		}), v2.Code_ILLEGAL_DELIVERY_TIME},
		{"13 transaction with group", with(func(m *v2.Message) {
			m.SystemProperties.MessageType = v2.MessageType_TRANSACTION
			m.SystemProperties.MessageGroup = str("g")
		}), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"13 lite without its lite topic", with(func(m *v2.Message) { m.SystemProperties.MessageType = v2.MessageType_LITE }), v2.Code_ILLEGAL_LITE_TOPIC},
		{"13 lite topic with a message group", with(func(m *v2.Message) {
			lt, mg := "conv", "g"
			m.SystemProperties.LiteTopic, m.SystemProperties.MessageGroup = &lt, &mg
		}), v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"13 lite topic badly named", with(func(m *v2.Message) { lt := "a b"; m.SystemProperties.LiteTopic = &lt }), v2.Code_ILLEGAL_LITE_TOPIC},
		{"second message checked too", append(with(func(*v2.Message) {}), with(func(m *v2.Message) { m.Body = nil })...), v2.Code_MESSAGE_BODY_EMPTY},
	}
	for _, c := range cases {
		err := validateSend(c.msgs)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		m, _ := errcodes.Of(mqerr.KindOf(err))
		if m.V2 != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, m.V2, err, c.want)
		}
	}
}

func TestSendConversion(t *testing.T) {
	m := okMsg()
	m.Topic.ResourceNamespace = "tenant"
	m.SystemProperties.Keys = []string{"a", "", "b"}
	m.SystemProperties.BodyEncoding = v2.Encoding_GZIP
	m.SystemProperties.BornHost = "10.1.1.1"
	m.SystemProperties.BornTimestamp = timestamppb.New(testNow.Add(-time.Second))
	m.SystemProperties.DeliveryTimestamp = timestamppb.New(testNow.Add(time.Hour))
	m.SystemProperties.MessageType = v2.MessageType_DELAY
	m.SystemProperties.TraceContext = str("00-abc-01")
	topic, out, err := toModelMessages([]*v2.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0]
	if topic != "tenant%orders" || got.Topic != topic {
		t.Fatalf("topic key %q / %q", topic, got.Topic)
	}
	if got.ID != m.SystemProperties.MessageId || got.Tag != "tagA" || strings.Join(got.Keys, ",") != "a,b" ||
		!got.BodyGzip || got.BornHost != "10.1.1.1" || !got.BornTime.Equal(testNow.Add(-time.Second)) ||
		!got.DeliveryTime.Equal(testNow.Add(time.Hour)) || got.Type != model.MessageDelay || got.TraceContext != "00-abc-01" ||
		got.Properties["k"] != "v" || string(got.Body) != "hello" {
		t.Fatalf("converted %+v", got)
	}
	// A FIFO message with a delivery time (what the Go client builds for
	// a "delayed FIFO" message) passes the edge; the broker judges it.
	m2 := okMsg()
	m2.SystemProperties.MessageGroup = str("g1")
	m2.SystemProperties.MessageType = v2.MessageType_FIFO
	m2.SystemProperties.DeliveryTimestamp = timestamppb.New(testNow.Add(time.Minute))
	if err := validateSend([]*v2.Message{m2}); err != nil {
		t.Fatalf("delayed FIFO refused before the topic check: %v", err)
	}
}

func TestDeliveredConversion(t *testing.T) {
	d := &model.Delivered{
		Message: model.Message{Topic: "ns%orders", ID: "MID", Keys: []string{"k1", "k 2"}, Properties: map[string]string{"a": "b"},
			Body: []byte("hello"), BornTime: testNow, BornHost: "10.0.0.9", MessageGroup: "g", Type: model.MessageFIFO},
		QueueID: 2, QueueOffset: 41, StoreTime: testNow.Add(time.Second), StoreHost: "gw:8081",
		Attempt: 0, ReceiptHandle: "r1.x", InvisibleFor: 30 * time.Second,
		DLQOriginTopic: "orders", DLQOriginID: "MID0",
	}
	topic := &v2.Resource{ResourceNamespace: "ns", Name: "orders"}
	m := deliveredToV2(d, topic, digestMD5)
	sp := m.SystemProperties
	want := &v2.SystemProperties{
		Keys:              []string{"k1", "k 2"},
		MessageId:         "MID",
		BodyDigest:        &v2.Digest{Type: v2.DigestType_MD5, Checksum: "5D41402ABC4B2A76B9719D911017C592"},
		BodyEncoding:      v2.Encoding_IDENTITY,
		MessageType:       v2.MessageType_FIFO,
		BornTimestamp:     timestamppb.New(testNow),
		BornHost:          "10.0.0.9",
		StoreTimestamp:    timestamppb.New(testNow.Add(time.Second)),
		StoreHost:         "gw:8081",
		ReceiptHandle:     str("r1.x"),
		QueueId:           2,
		QueueOffset:       proto.Int64(41),
		InvisibleDuration: durationpb.New(30 * time.Second),
		DeliveryAttempt:   proto.Int32(1), // never 0
		MessageGroup:      str("g"),
		DeadLetterQueue:   &v2.DeadLetterQueue{Topic: "orders", MessageId: "MID0"},
	}
	if !proto.Equal(sp, want) {
		t.Fatalf("system properties\n got %v\nwant %v", sp, want)
	}
	if sp.Tag != nil {
		t.Fatal("tag present for an untagged message")
	}
	if m.Topic.Name != "orders" || m.Topic.ResourceNamespace != "ns" || m.UserProperties["a"] != "b" {
		t.Fatalf("message %v", m)
	}
	d.Tag, d.BodyGzip = "t", true
	m = deliveredToV2(d, topic, digestMD5)
	if m.SystemProperties.GetTag() != "t" || m.SystemProperties.BodyEncoding != v2.Encoding_GZIP {
		t.Fatalf("tag/gzip %v", m.SystemProperties)
	}
}

func TestRetryPolicyToV2(t *testing.T) {
	rp := retryPolicyToV2(model.Group{MaxDeliveryAttempts: 0, Retry: model.RetryPolicy{}})
	if rp.MaxAttempts != model.DefaultMaxDeliveryAttempts || len(rp.GetCustomizedBackoff().GetNext()) != 18 ||
		rp.GetCustomizedBackoff().GetNext()[0].AsDuration() != time.Second {
		t.Fatalf("default: %v", rp)
	}
	rp = retryPolicyToV2(model.Group{MaxDeliveryAttempts: 2, Retry: model.ExponentialRetryPolicy()})
	e := rp.GetExponentialBackoff()
	if rp.MaxAttempts != 2 || e.GetInitial().AsDuration() != 5*time.Second || e.GetMax().AsDuration() != 2*time.Hour || e.GetMultiplier() != 2 {
		t.Fatalf("exponential: %v", rp)
	}
}

func TestFilterOf(t *testing.T) {
	f, err := filterOf(&v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "a || b"})
	if err != nil || !f.Match("a", nil) || !f.Match("b", nil) || f.Match("c", nil) || f.Match("", nil) {
		t.Fatalf("a||b: %v %v", f, err)
	}
	if f, err := filterOf(nil); err != nil || !f.All() {
		t.Fatalf("nil: %v %v", f, err)
	}
	f, err = filterOf(&v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a > 1 AND TAGS = 'x'"})
	if err != nil || f.All() || f.ByTag() || !f.Match("x", props{"a": "2", "TAGS": "x"}) || f.Match("x", props{"a": "1", "TAGS": "x"}) {
		t.Fatalf("sql: %v %v", f, err)
	}
	_, err = filterOf(&v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a >"})
	if mqerr.KindOf(err) != mqerr.KindIllegalFilter || !strings.Contains(err.Error(), "SQL92") {
		t.Fatalf("malformed sql: %v", err)
	}
	if _, err := filterOf(&v2.FilterExpression{Expression: "a||b\x01"}); mqerr.KindOf(err) != mqerr.KindIllegalFilter {
		t.Fatalf("control: %v", err)
	}
}

// The official clients whose CRC32 text form is known get CRC32 in that
// form (Go, Java, C#: upper-case hex without padding; C++, Python: 8
// upper-case hex digits); everyone else MD5.
func TestDigestPerClientLanguage(t *testing.T) {
	body := []byte("hello") // CRC32 IEEE 0x3610A686
	zero := []byte("m21")   // CRC32 IEEE 0x03E0D52A: a leading zero nibble
	if crc32.ChecksumIEEE(zero)>>28 != 0 {
		t.Fatalf("test body %q: CRC32 %08X has no leading zero", zero, crc32.ChecksumIEEE(zero))
	}
	const md5Hello = "5D41402ABC4B2A76B9719D911017C592"
	for _, c := range []struct {
		md        metadata.MD
		kind      v2.DigestType
		sum, sumZ string
	}{
		{metadata.Pairs("x-mq-language", "GO"), v2.DigestType_CRC32, "3610A686", "3E0D52A"},
		{metadata.Pairs("x-mq-language", "JAVA"), v2.DigestType_CRC32, "3610A686", "3E0D52A"},
		{metadata.Pairs("x-mq-language", "DOTNET"), v2.DigestType_CRC32, "3610A686", "3E0D52A"},
		{metadata.Pairs("x-mq-language", "CPP"), v2.DigestType_CRC32, "3610A686", "03E0D52A"},
		{metadata.Pairs("x-mq-language", "PYTHON"), v2.DigestType_CRC32, "3610A686", "03E0D52A"},
		{metadata.Pairs("x-mq-language", "HTTP"), v2.DigestType_MD5, md5Hello, ""}, // the Node.js client
		{metadata.Pairs("x-mq-language", "RUST"), v2.DigestType_MD5, md5Hello, ""},
		{nil, v2.DigestType_MD5, md5Hello, ""},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), c.md)
		dk := digestFor(ctx)
		if d := dk.digest(body); d.Type != c.kind || d.Checksum != c.sum {
			t.Errorf("%v: digest %v %s, want %v %s", c.md, d.Type, d.Checksum, c.kind, c.sum)
		}
		if c.sumZ != "" {
			if d := dk.digest(zero); d.Checksum != c.sumZ {
				t.Errorf("%v: digest of %q %s, want %s", c.md, zero, d.Checksum, c.sumZ)
			}
		}
	}
}

// props is a message's properties for a filter.
type props map[string]string

func (p props) Get(k string) (string, bool) { v, ok := p[k]; return v, ok }
