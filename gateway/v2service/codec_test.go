package v2service

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// wantBytes is what proto.Marshal gives for r, map entries in key order.
func wantBytes(t testing.TB, r *v2.ReceiveMessageResponse) ([]byte, error) {
	t.Helper()
	return proto.MarshalOptions{Deterministic: true}.Marshal(r)
}

// checkCodec encodes r with ServerCodec and compares the frame with
// proto.Marshal's: the same bytes, or an error from both.
func checkCodec(t testing.TB, r *v2.ReceiveMessageResponse) {
	t.Helper()
	want, werr := wantBytes(t, r)
	for _, inline := range []int{0, 3, inlineBodyMax, 1 << 30} {
		var got []byte
		var err error
		if out, ok := marshalReceived(r, inline); ok {
			got = out.Materialize()
		} else {
			var bs mem.BufferSlice
			bs, err = ServerCodec().Marshal(r)
			if err == nil {
				got = bs.Materialize()
			}
		}
		if (err != nil) != (werr != nil) {
			t.Fatalf("inline %d: codec error %v, proto.Marshal error %v", inline, err, werr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("inline %d: codec bytes differ from proto.Marshal\n got %x\nwant %x\nmessage %v", inline, got, want, r)
		}
	}
	// Through the codec as the server calls it.
	bs, err := ServerCodec().Marshal(r)
	if (err != nil) != (werr != nil) {
		t.Fatalf("codec error %v, proto.Marshal error %v", err, werr)
	}
	if err == nil && !bytes.Equal(bs.Materialize(), want) {
		t.Fatalf("codec bytes differ from proto.Marshal")
	}
	if werr == nil {
		var back v2.ReceiveMessageResponse
		if err := proto.Unmarshal(want, &back); err != nil || !proto.Equal(&back, r) {
			t.Fatalf("round trip: %v", err)
		}
	}
}

func TestServerCodecDeliveredMessages(t *testing.T) {
	topic := &v2.Resource{ResourceNamespace: "ns", Name: "orders"}
	body := bytes.Repeat([]byte("x"), 1024)
	now := time.UnixMilli(1_760_000_000_123)
	cases := map[string]*model.Delivered{
		"plain": {Message: model.Message{Topic: "orders", ID: "01ABCDEF", Body: body, BornHost: "10.0.0.1:1234",
			BornTime: now, Tag: "TagA", Keys: []string{"k1", "k2"}}, QueueID: 3, QueueOffset: 12345,
			StoreTime: now, StoreHost: "127.0.0.1:8081", ReceiptHandle: "r1.handle", InvisibleFor: 30 * time.Second, Attempt: 1},
		"everything": {Message: model.Message{Topic: "orders", ID: "01ABCDEF", Body: body, BornHost: "h", BornTime: now,
			Tag: "", Keys: []string{"", "k"}, Properties: map[string]string{"b": "2", "a": "1", "": "", "c": ""},
			MessageGroup: "g1", TraceContext: "00-abc-def-01", DeliveryTime: now.Add(time.Hour), BodyGzip: true,
			Type: model.MessageFIFO}, DLQOriginTopic: "t", DLQOriginID: "id",
			QueueID: -1, QueueOffset: 0, StoreTime: now, ReceiptHandle: "h", InvisibleFor: 1500 * time.Millisecond, Attempt: 17},
		"one property, small body": {Message: model.Message{Topic: "orders", ID: "x", Body: []byte("hi"),
			Properties: map[string]string{"k": "v"}}, QueueOffset: 1 << 40, Attempt: 0},
		"empty body":  {Message: model.Message{Topic: "orders", ID: "x"}},
		"unicode":     {Message: model.Message{Topic: "orders", ID: "é", Tag: "标签", Body: body, Properties: map[string]string{"ключ": "значение"}}},
		"invalid utf": {Message: model.Message{Topic: "orders", ID: "x", Tag: "\xff", Body: body}},
		"invalid key": {Message: model.Message{Topic: "orders", ID: "x", Properties: map[string]string{"\xc0": "v"}, Body: body}},
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			for _, dk := range []digestKind{digestMD5, digestCRC32, digestCRC32Wide} {
				checkCodec(t, &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: deliveredToV2(d, topic, dk)}})
			}
		})
	}
}

func TestServerCodecOtherFrames(t *testing.T) {
	for _, r := range []*v2.ReceiveMessageResponse{
		{Content: &v2.ReceiveMessageResponse_Status{Status: statusOK}},
		{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}},
		{Content: &v2.ReceiveMessageResponse_Message{}},
		{Content: &v2.ReceiveMessageResponse_Message{Message: &v2.Message{}}},
		{},
	} {
		checkCodec(t, r)
	}
	// Other messages go to the proto codec, both ways.
	req := &v2.AckMessageRequest{Topic: &v2.Resource{Name: "t"}, Entries: []*v2.AckMessageEntry{{MessageId: "m", ReceiptHandle: "h"}}}
	bs, err := ServerCodec().Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(req)
	if !bytes.Equal(bs.Materialize(), want) {
		t.Fatal("AckMessageRequest bytes differ from proto.Marshal")
	}
	var back v2.AckMessageRequest
	if err := ServerCodec().Unmarshal(bs, &back); err != nil || !proto.Equal(&back, req) {
		t.Fatalf("unmarshal: %v", err)
	}
	if ServerCodec().Name() != "proto" {
		t.Fatalf("name %q", ServerCodec().Name())
	}
}

// A frame with unknown fields anywhere is the proto codec's.
func TestServerCodecUnknownFields(t *testing.T) {
	mk := func() *v2.Message {
		return deliveredToV2(&model.Delivered{Message: model.Message{ID: "x", Body: []byte("abc")}, DLQOriginTopic: "d",
			StoreTime: time.Now(), InvisibleFor: time.Second, ReceiptHandle: "h"}, &v2.Resource{Name: "t"}, digestMD5)
	}
	unknown := protoreflect.RawFields{0x98, 0x06, 0x01} // field 99, varint 1
	sets := []func(m *v2.Message){
		func(m *v2.Message) { m.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.Topic.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.SystemProperties.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.SystemProperties.BodyDigest.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.SystemProperties.StoreTimestamp.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.SystemProperties.InvisibleDuration.ProtoReflect().SetUnknown(unknown) },
		func(m *v2.Message) { m.SystemProperties.DeadLetterQueue.ProtoReflect().SetUnknown(unknown) },
	}
	for i, set := range sets {
		m := mk()
		set(m)
		r := &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: m}}
		if _, ok := marshalReceived(r, 0); ok {
			t.Fatalf("case %d: unknown fields encoded by hand", i)
		}
		checkCodec(t, r)
		if _, ok := RequestSize(&v2.SendMessageRequest{Messages: []*v2.Message{mk(), m}}); ok {
			t.Fatalf("case %d: RequestSize measured unknown fields", i)
		}
	}
	r := &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: mk()}}
	r.ProtoReflect().SetUnknown(unknown)
	if _, ok := marshalReceived(r, 0); ok {
		t.Fatal("unknown fields of the response encoded by hand")
	}
	checkCodec(t, r)
}

// The encoder writes every field these messages have; a field added to
// the schema must be added to it (and to randomMessage) too.
func TestServerCodecKnowsEveryField(t *testing.T) {
	want := map[protoreflect.FullName]int{
		"apache.rocketmq.v2.ReceiveMessageResponse": 3,
		"apache.rocketmq.v2.Message":                4,
		"apache.rocketmq.v2.SystemProperties":       22,
		"apache.rocketmq.v2.Resource":               2,
		"apache.rocketmq.v2.Digest":                 2,
		"apache.rocketmq.v2.DeadLetterQueue":        2,
		"google.protobuf.Timestamp":                 2,
		"google.protobuf.Duration":                  2,
	}
	for _, m := range []proto.Message{&v2.ReceiveMessageResponse{}, &v2.Message{}, &v2.SystemProperties{}, &v2.Resource{},
		&v2.Digest{}, &v2.DeadLetterQueue{}, &timestamppb.Timestamp{}, &durationpb.Duration{}} {
		d := m.ProtoReflect().Descriptor()
		if got := d.Fields().Len(); got != want[d.FullName()] {
			t.Errorf("%s has %d fields, the encoder writes %d", d.FullName(), got, want[d.FullName()])
		}
		for i := 0; i < d.Fields().Len(); i++ {
			if f := d.Fields().Get(i); int(f.Number()) != i+1 {
				t.Errorf("%s: field %s is number %d, the encoder expects %d", d.FullName(), f.Name(), f.Number(), i+1)
			}
		}
	}
}

// randomString is empty, ASCII, multi-byte or (rarely) not UTF-8.
func randomString(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("é", r.IntN(70))
	case 2:
		if r.IntN(4) == 0 {
			return string([]byte{byte(0x80 + r.IntN(0x80))})
		}
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(' ' + r.IntN(95))
	}
	return string(b)
}

func randomInt64(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -r.Int64()
	case 2:
		return int64(r.IntN(300))
	}
	return r.Int64()
}

func randomInt32(r *rand.Rand) int32 { return int32(randomInt64(r)) }

func randomTimestamp(r *rand.Rand) *timestamppb.Timestamp {
	if r.IntN(4) == 0 {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: randomInt64(r), Nanos: randomInt32(r)}
}

func randomDuration(r *rand.Rand) *durationpb.Duration {
	if r.IntN(4) == 0 {
		return nil
	}
	return &durationpb.Duration{Seconds: randomInt64(r), Nanos: randomInt32(r)}
}

func randomOpt[T any](r *rand.Rand, f func(*rand.Rand) T) *T {
	if r.IntN(3) == 0 {
		return nil
	}
	v := f(r)
	return &v
}

// randomMessage fills every field of a Message at random, each one
// sometimes left unset.
func randomMessage(r *rand.Rand) *v2.Message {
	m := &v2.Message{}
	if r.IntN(5) > 0 {
		m.Topic = &v2.Resource{ResourceNamespace: randomString(r), Name: randomString(r)}
	}
	if n := r.IntN(5); n > 0 {
		m.UserProperties = map[string]string{}
		for range n {
			m.UserProperties[randomString(r)] = randomString(r)
		}
	}
	if r.IntN(5) > 0 {
		sp := &v2.SystemProperties{
			Tag: randomOpt(r, randomString), MessageId: randomString(r),
			BodyEncoding: v2.Encoding(r.IntN(3)), MessageType: v2.MessageType(r.IntN(6) - 1),
			BornTimestamp: randomTimestamp(r), BornHost: randomString(r), StoreTimestamp: randomTimestamp(r),
			StoreHost: randomString(r), DeliveryTimestamp: randomTimestamp(r), ReceiptHandle: randomOpt(r, randomString),
			QueueId: randomInt32(r), QueueOffset: randomOpt(r, randomInt64), InvisibleDuration: randomDuration(r),
			DeliveryAttempt: randomOpt(r, randomInt32), MessageGroup: randomOpt(r, randomString),
			TraceContext: randomOpt(r, randomString), OrphanedTransactionRecoveryDuration: randomDuration(r),
			LiteTopic: randomOpt(r, randomString), Priority: randomOpt(r, randomInt32),
		}
		for range r.IntN(4) {
			sp.Keys = append(sp.Keys, randomString(r))
		}
		if r.IntN(4) > 0 {
			sp.BodyDigest = &v2.Digest{Type: v2.DigestType(r.IntN(4)), Checksum: randomString(r)}
		}
		if r.IntN(3) == 0 {
			sp.DeadLetterQueue = &v2.DeadLetterQueue{Topic: randomString(r), MessageId: randomString(r)}
		}
		m.SystemProperties = sp
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		m.Body = []byte{}
	default:
		m.Body = make([]byte, r.IntN(3000))
		for i := range m.Body {
			m.Body[i] = byte(r.Uint32())
		}
	}
	return m
}

func TestServerCodecRandomMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		checkCodec(t, &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: randomMessage(r)}})
		checkRequestSize(t, r)
	}
}

// checkRequestSize compares RequestSize with proto.Size for a send of a
// few random messages.
func checkRequestSize(t testing.TB, r *rand.Rand) {
	t.Helper()
	req := &v2.SendMessageRequest{}
	for range r.IntN(4) {
		req.Messages = append(req.Messages, randomMessage(r))
	}
	want := proto.Size(req)
	got, ok := RequestSize(req)
	if ok && got != want {
		t.Fatalf("RequestSize %d, proto.Size %d, request %v", got, want, req)
	}
	if !ok {
		t.Fatalf("RequestSize declined a request without unknown fields: %v", req)
	}
	ack := &v2.AckMessageRequest{}
	str := func() string { return strings.Repeat("é", r.IntN(3)) + strings.Repeat("h", r.IntN(200)) }
	if r.IntN(2) == 0 {
		ack.Group = &v2.Resource{ResourceNamespace: str(), Name: str()}
	}
	if r.IntN(2) == 0 {
		ack.Topic = &v2.Resource{Name: str()}
	}
	for range r.IntN(40) {
		e := &v2.AckMessageEntry{MessageId: str(), ReceiptHandle: str()}
		if r.IntN(3) == 0 {
			lt := str()
			e.LiteTopic = &lt
		}
		ack.Entries = append(ack.Entries, e)
	}
	if got, ok := RequestSize(ack); !ok || got != proto.Size(ack) {
		t.Fatalf("ack: RequestSize %d (%v), proto.Size %d", got, ok, proto.Size(ack))
	}
	ack.ProtoReflect().SetUnknown(protoreflect.RawFields{0x98, 0x06, 0x01})
	if _, ok := RequestSize(ack); ok {
		t.Fatal("ack: RequestSize measured unknown fields")
	}
}

func FuzzServerCodec(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i, i*7919)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r := rand.New(rand.NewPCG(a, b))
		checkCodec(t, &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: randomMessage(r)}})
		checkRequestSize(t, r)
	})
}

// One delivered 1 KiB message as ReceiveMessage sends it.
func BenchmarkServerCodecMessage(b *testing.B) {
	d := &model.Delivered{Message: model.Message{Topic: "orders", ID: "01ABCDEF0123456789", Body: bytes.Repeat([]byte("x"), 1024),
		BornHost: "10.0.0.1:1234", BornTime: time.Now(), Tag: "TagA"}, QueueID: 3, QueueOffset: 12345,
		StoreTime: time.Now(), StoreHost: "127.0.0.1:8081", ReceiptHandle: strings.Repeat("h", 90), InvisibleFor: 30 * time.Second, Attempt: 1}
	r := &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: deliveredToV2(d, &v2.Resource{Name: "orders"}, digestFor(context.Background()))}}
	c := ServerCodec()
	b.ReportAllocs()
	for b.Loop() {
		bs, err := c.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		bs.Free()
	}
}

// The same frame through grpc-go's proto codec.
func BenchmarkProtoCodecMessage(b *testing.B) {
	d := &model.Delivered{Message: model.Message{Topic: "orders", ID: "01ABCDEF0123456789", Body: bytes.Repeat([]byte("x"), 1024),
		BornHost: "10.0.0.1:1234", BornTime: time.Now(), Tag: "TagA"}, QueueID: 3, QueueOffset: 12345,
		StoreTime: time.Now(), StoreHost: "127.0.0.1:8081", ReceiptHandle: strings.Repeat("h", 90), InvisibleFor: 30 * time.Second, Attempt: 1}
	r := &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Message{Message: deliveredToV2(d, &v2.Resource{Name: "orders"}, digestFor(context.Background()))}}
	c := ServerCodec().(serverCodec).base
	b.ReportAllocs()
	for b.Loop() {
		bs, err := c.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		bs.Free()
	}
}
