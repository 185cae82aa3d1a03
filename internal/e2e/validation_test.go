package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func msg(topic, id, body string) *pb.Message {
	return &pb.Message{Topic: res(topic), Body: []byte(body),
		SystemProperties: &pb.SystemProperties{MessageId: id, MessageType: pb.MessageType_NORMAL}}
}

func strp(s string) *string { return &s }

// Every validation error a send can get, with its code, through a raw client
// (the official one refuses some of these locally).
func TestValidationErrors(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic, fifo, group := uniq("valid"), uniq("fifo"), uniq("g")
	cli(t, p, "topic", "create", topic, "--queues", "2")
	cli(t, p, "topic", "create", fifo, "--type", "FIFO", "--queues", "2")
	cli(t, p, "group", "create", group)
	r := dialRaw(t, p)

	mod := func(f func(m *pb.Message)) []*pb.Message {
		m := msg(topic, "0156F7E71C361B21BC024CCDBE00000001", "body")
		f(m)
		return []*pb.Message{m}
	}
	manyProps := map[string]string{}
	for i := range 129 {
		manyProps[fmt.Sprint("p", i)] = "v"
	}
	sends := []struct {
		name string
		msgs []*pb.Message
		want pb.Code
	}{
		{"no messages", nil, pb.Code_MESSAGE_CORRUPTED},
		{"illegal topic name", mod(func(m *pb.Message) { m.Topic.Name = "bad topic!" }), pb.Code_ILLEGAL_TOPIC},
		{"system topic", mod(func(m *pb.Message) { m.Topic.Name = "RMQ_SYS_TRANS_HALF_TOPIC" }), pb.Code_ILLEGAL_TOPIC},
		{"topics differ in a batch", append(mod(func(*pb.Message) {}), msg("other", "X", "b")), pb.Code_MESSAGE_CORRUPTED},
		{"empty body", mod(func(m *pb.Message) { m.Body = nil }), pb.Code_MESSAGE_BODY_EMPTY},
		{"body over 4 MiB", mod(func(m *pb.Message) { m.Body = make([]byte, 4<<20+1) }), pb.Code_MESSAGE_BODY_TOO_LARGE},
		{"too many properties", mod(func(m *pb.Message) { m.UserProperties = manyProps }), pb.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"reserved property", mod(func(m *pb.Message) { m.UserProperties = map[string]string{"UNIQ_KEY": "x"} }), pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"control char in property", mod(func(m *pb.Message) { m.UserProperties = map[string]string{"k": "a\x00b"} }), pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"properties too large", mod(func(m *pb.Message) { m.UserProperties = map[string]string{"k": strings.Repeat("v", 16385)} }), pb.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"tag with |", mod(func(m *pb.Message) { m.SystemProperties.Tag = strp("a|b") }), pb.Code_ILLEGAL_MESSAGE_TAG},
		{"blank tag", mod(func(m *pb.Message) { m.SystemProperties.Tag = strp("   ") }), pb.Code_ILLEGAL_MESSAGE_TAG},
		{"blank key", mod(func(m *pb.Message) { m.SystemProperties.Keys = []string{"ok", "  "} }), pb.Code_ILLEGAL_MESSAGE_KEY},
		{"control char in key", mod(func(m *pb.Message) { m.SystemProperties.Keys = []string{"a\nb"} }), pb.Code_ILLEGAL_MESSAGE_KEY},
		{"blank message id", mod(func(m *pb.Message) { m.SystemProperties.MessageId = "" }), pb.Code_ILLEGAL_MESSAGE_ID},
		{"delivery over a day ahead", mod(func(m *pb.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(48 * time.Hour))
			m.SystemProperties.MessageType = pb.MessageType_DELAY
		}), pb.Code_ILLEGAL_DELIVERY_TIME},
		{"message group of 64 bytes", mod(func(m *pb.Message) {
			m.SystemProperties.MessageGroup = strp(strings.Repeat("g", 64))
			m.SystemProperties.MessageType = pb.MessageType_FIFO
		}), pb.Code_ILLEGAL_MESSAGE_GROUP},
		{"FIFO message to a NORMAL topic", mod(func(m *pb.Message) {
			m.SystemProperties.MessageGroup = strp("g1")
			m.SystemProperties.MessageType = pb.MessageType_FIFO
		}), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"NORMAL message to a FIFO topic", mod(func(m *pb.Message) { m.Topic.Name = fifo }), pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"unknown topic", mod(func(m *pb.Message) { m.Topic.Name = "no-such-topic" }), pb.Code_TOPIC_NOT_FOUND},
	}
	for _, c := range sends {
		resp, err := r.c.SendMessage(r.ctx(20*time.Second), &pb.SendMessageRequest{Messages: c.msgs})
		if err != nil {
			t.Errorf("%s: gRPC error %v (business errors travel in the status)", c.name, err)
			continue
		}
		if resp.Status.GetCode() != c.want {
			t.Errorf("%s: %v (%q), want %v", c.name, resp.Status.GetCode(), resp.Status.GetMessage(), c.want)
		}
		if len(resp.Entries) != 0 {
			t.Errorf("%s: %d entries on a rejected send", c.name, len(resp.Entries))
		}
	}
	// A valid send still works on the same connection.
	ok, err := r.c.SendMessage(r.ctx(10*time.Second), &pb.SendMessageRequest{Messages: mod(func(*pb.Message) {})})
	if err != nil || ok.Status.Code != pb.Code_OK || ok.Entries[0].MessageId != "0156F7E71C361B21BC024CCDBE00000001" {
		t.Fatalf("valid send: %v %v", ok, err)
	}

	// Missing client id on every kind of RPC.
	sr, _ := r.c.SendMessage(r.ctxAs("", 10*time.Second), &pb.SendMessageRequest{Messages: mod(func(*pb.Message) {})})
	wantCode(t, "send without client id", sr.GetStatus(), pb.Code_CLIENT_ID_REQUIRED)
	st, _ := r.receiveRaw("", recvReq(group, topic, 1, 30*time.Second), 10*time.Second)
	wantCode(t, "receive without client id", st, pb.Code_CLIENT_ID_REQUIRED)
	tel, err := r.c.Telemetry(r.ctxAs("", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = tel.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum()}}})
	tc, err := tel.Recv()
	if err != nil {
		t.Fatalf("telemetry without client id: %v", err)
	}
	wantCode(t, "telemetry without client id", tc.GetStatus(), pb.Code_CLIENT_ID_REQUIRED)
	// Settings without publishing or subscription: gRPC INVALID_ARGUMENT.
	tel2, _ := r.c.Telemetry(r.ctx(10 * time.Second))
	_ = tel2.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum()}}})
	if _, err := tel2.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("settings without pub_sub: %v, want INVALID_ARGUMENT", err)
	}

	// Routes.
	qr, _ := r.c.QueryRoute(r.ctx(10*time.Second), &pb.QueryRouteRequest{Topic: res("bad topic!"), Endpoints: endpointsOf(t, p)})
	wantCode(t, "route of an illegal topic", qr.GetStatus(), pb.Code_ILLEGAL_TOPIC)
	qr, _ = r.c.QueryRoute(r.ctx(10*time.Second), &pb.QueryRouteRequest{Topic: res("no-such-topic"), Endpoints: endpointsOf(t, p)})
	wantCode(t, "route of an unknown topic", qr.GetStatus(), pb.Code_TOPIC_NOT_FOUND)

	// Receives.
	short := recvReq(group, topic, 1, 5*time.Second)
	sql := recvReq(group, topic, 1, 30*time.Second)
	sql.FilterExpression = &pb.FilterExpression{Type: pb.FilterType_SQL, Expression: "a > 'one'"}
	receives := []struct {
		name string
		req  *pb.ReceiveMessageRequest
		want pb.Code
	}{
		{"illegal group", recvReq("bad group!", topic, 1, 30*time.Second), pb.Code_ILLEGAL_CONSUMER_GROUP},
		{"illegal topic", recvReq(group, "bad topic!", 1, 30*time.Second), pb.Code_ILLEGAL_TOPIC},
		{"invisible below 10 s", short, pb.Code_ILLEGAL_INVISIBLE_TIME},
		{"invisible above 12 h", recvReq(group, topic, 1, 13*time.Hour), pb.Code_ILLEGAL_INVISIBLE_TIME},
		{"malformed SQL filter", sql, pb.Code_ILLEGAL_FILTER_EXPRESSION},
		{"unknown topic", recvReq(group, "no-such-topic", 1, 30*time.Second), pb.Code_TOPIC_NOT_FOUND},
		{"unknown group", recvReq("no-such-group", topic, 1, 30*time.Second), pb.Code_CONSUMER_GROUP_NOT_FOUND},
	}
	for _, c := range receives {
		st, msgs := r.receiveRaw(r.id, c.req, 10*time.Second)
		if st.GetCode() != c.want || len(msgs) != 0 {
			t.Errorf("receive %s: %v (%q) with %d messages, want %v", c.name, st.GetCode(), st.GetMessage(), len(msgs), c.want)
		}
	}

	// Ack and change with bad handles or durations.
	wantCode(t, "ack with a garbage handle", r.ack(group, topic, "not-a-handle"), pb.Code_INVALID_RECEIPT_HANDLE)
	ci, err := r.c.ChangeInvisibleDuration(r.ctx(10*time.Second), &pb.ChangeInvisibleDurationRequest{
		Group: res(group), Topic: res(topic), ReceiptHandle: "not-a-handle", InvisibleDuration: durationpb.New(13 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "change to 13 h", ci.Status, pb.Code_ILLEGAL_INVISIBLE_TIME)
	if ci.ReceiptHandle != "not-a-handle" {
		t.Fatalf("failed change answered handle %q, want the request's", ci.ReceiptHandle)
	}

	// The official producer refuses to start on an unknown topic (its
	// route query gets TOPIC_NOT_FOUND).
	pr, err := rmq.NewProducer(config(p, ""), rmq.WithTopics("no-such-topic"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Start(); err == nil || !strings.Contains(err.Error(), "TOPIC_NOT_FOUND") {
		t.Fatalf("producer start on an unknown topic: %v", err)
	}
}

// The CLI reports the server's refusal and exits non-zero.
func TestCLIErrors(t *testing.T) {
	e2e(t)
	p := start(t, startOpts())
	topic := uniq("cli")
	cli(t, p, "topic", "create", topic, "--type", "DELAY", "--queues", "3")
	out, err := cliResult(t, p, "topic", "create", topic)
	if err == nil || !strings.Contains(out, topic) || !strings.Contains(out, "already exists") {
		t.Fatalf("duplicate create: %v %q", err, out)
	}
	out = cli(t, p, "topic", "describe", topic)
	for _, want := range []string{topic, "DELAY", "3", "READ_WRITE"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	if out := cli(t, p, "topic", "list", "--json"); !strings.Contains(out, `"name": "`+topic+`"`) {
		t.Fatalf("list --json:\n%s", out)
	}
	out, err = cliResult(t, p, "group", "describe", "no-such-group")
	if err == nil || !strings.Contains(out, "no-such-group") {
		t.Fatalf("describe unknown group: %v %q", err, out)
	}
	cli(t, p, "topic", "delete", topic)
	if out, err := cliResult(t, p, "topic", "describe", topic); err == nil {
		t.Fatalf("describe after delete succeeded:\n%s", out)
	}
}
