package v2service

// Component tests of the message model beyond plain POP: transactions and
// their check-back over Telemetry, recall of delayed messages, push
// consumer assignments, pull and offsets. Same harness as
// component_test.go: bufconn, the real interceptor chain, the real broker
// on an in-memory store, a fake clock.

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker/model"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func txMsg(topic *v2.Resource, id string) *v2.Message {
	return &v2.Message{Topic: topic, Body: []byte("tx-" + id),
		SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_TRANSACTION}}
}

// sendOne sends one message as client id and requires an OK entry.
func (h *harness) sendOne(clientID string, m *v2.Message) *v2.SendResultEntry {
	h.t.Helper()
	resp, err := h.c.SendMessage(h.ctx(clientID, 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{m}})
	if err != nil {
		h.t.Fatal(err)
	}
	code(h.t, resp.Status, v2.Code_OK)
	h.dispatched()
	return resp.Entries[0]
}

func (h *harness) endTx(req *v2.EndTransactionRequest) *v2.Status {
	h.t.Helper()
	resp, err := h.c.EndTransaction(h.ctx("producer-1", 5*time.Second), req)
	if err != nil {
		h.t.Fatalf("EndTransaction: gRPC error %v", err)
	}
	return resp.Status
}

// receiveIDs drains what a group can receive now (non-blocking) and
// returns the message ids, acking each.
func (h *harness) receiveIDs(group, topic string) []string {
	h.t.Helper()
	var got []string
	for {
		r := h.receive(recvReq(group, topic, 32, 30*time.Second, "*"), nonBlocking)
		if r.status.Code == v2.Code_MESSAGE_NOT_FOUND {
			return got
		}
		code(h.t, r.status, v2.Code_OK)
		for _, m := range r.msgs {
			got = append(got, m.SystemProperties.MessageId)
			code(h.t, h.ack(group, topic, handleOf(m)).Status, v2.Code_OK)
		}
	}
}

func TestComponentEndTransaction(t *testing.T) {
	h := newHarness(t)
	h.topic("tx", model.TopicTransaction, 2)
	h.topic("other-tx", model.TopicTransaction, 1)
	h.group(model.Group{Name: "g"})
	c := h.sendOne("producer-1", txMsg(res("tx"), "C"))
	r := h.sendOne("producer-1", txMsg(res("tx"), "R"))
	if c.TransactionId == "" || r.TransactionId == "" || c.TransactionId == r.TransactionId {
		t.Fatalf("transaction ids %q %q", c.TransactionId, r.TransactionId)
	}
	if got := h.receiveIDs("g", "tx"); len(got) != 0 {
		t.Fatalf("half messages visible before commit: %v", got)
	}
	end := func(topic, id, txid string, res v2.TransactionResolution) *v2.EndTransactionRequest {
		return &v2.EndTransactionRequest{Topic: &v2.Resource{Name: topic}, MessageId: id, TransactionId: txid, Resolution: res}
	}
	// Bad input: each a clear code, nothing changed.
	code(t, h.endTx(end("bad topic", "C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_ILLEGAL_TOPIC)
	code(t, h.endTx(end("tx", "C", " ", v2.TransactionResolution_COMMIT)), v2.Code_INVALID_TRANSACTION_ID)
	code(t, h.endTx(end("tx", "C", "t1.unknown", v2.TransactionResolution_COMMIT)), v2.Code_INVALID_TRANSACTION_ID)
	code(t, h.endTx(end("tx", "C", "t1.unknown", v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED)), v2.Code_INVALID_TRANSACTION_ID)
	code(t, h.endTx(end("tx", "C", c.TransactionId, v2.TransactionResolution(7))), v2.Code_BAD_REQUEST)
	code(t, h.endTx(end("missing", "C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_TOPIC_NOT_FOUND)
	code(t, h.endTx(end("other-tx", "C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_INVALID_TRANSACTION_ID)
	code(t, h.endTx(end("tx", "not-C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_INVALID_TRANSACTION_ID)
	// UNSPECIFIED (the Go client's "UNKNOWN"): OK, still pending.
	code(t, h.endTx(end("tx", "C", c.TransactionId, v2.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED)), v2.Code_OK)
	if got := h.receiveIDs("g", "tx"); len(got) != 0 {
		t.Fatalf("visible after UNSPECIFIED: %v", got)
	}
	// Commit, idempotent; the opposite resolution afterwards is refused.
	code(t, h.endTx(end("tx", "C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_OK)
	code(t, h.endTx(end("tx", "C", c.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_OK)
	code(t, h.endTx(end("tx", "C", c.TransactionId, v2.TransactionResolution_ROLLBACK)), v2.Code_INVALID_TRANSACTION_ID)
	code(t, h.endTx(end("tx", "R", r.TransactionId, v2.TransactionResolution_ROLLBACK)), v2.Code_OK)
	code(t, h.endTx(end("tx", "R", r.TransactionId, v2.TransactionResolution_COMMIT)), v2.Code_INVALID_TRANSACTION_ID)
	h.dispatched()
	r1 := h.receive(recvReq("g", "tx", 32, 30*time.Second, "*"), 5*time.Second)
	code(t, r1.status, v2.Code_OK)
	if len(r1.msgs) != 1 || r1.msgs[0].SystemProperties.MessageId != "C" ||
		r1.msgs[0].SystemProperties.MessageType != v2.MessageType_TRANSACTION || string(r1.msgs[0].Body) != "tx-C" {
		t.Fatalf("after commit: %v", r1.msgs)
	}
	code(t, h.ack("g", "tx", handleOf(r1.msgs[0])).Status, v2.Code_OK)
	// The rolled-back message never shows up, not even after the checks
	// would have come due.
	h.clk.Advance(time.Minute)
	if got := h.receiveIDs("g", "tx"); len(got) != 0 {
		t.Fatalf("rolled back message delivered: %v", got)
	}
}

// telemetryProducer opens a Telemetry stream as a producer of topics and
// reads the settings reply.
func telemetryProducer(t *testing.T, h *harness, clientID string, topics ...*v2.Resource) v2.MessagingService_TelemetryClient {
	t.Helper()
	s := openTelemetry(t, h, clientID)
	err := s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
		ClientType:     v2.ClientType_PRODUCER.Enum(),
		RequestTimeout: durationpb.New(3 * time.Second),
		PubSub:         &v2.Settings_Publishing{Publishing: &v2.Publishing{Topics: topics}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := s.Recv()
	if err != nil || reply.GetSettings() == nil {
		t.Fatalf("settings reply %v %v", reply, err)
	}
	return s
}

// recvCommand waits (real time) for the next server command on s.
func recvCommand(t *testing.T, s v2.MessagingService_TelemetryClient, within time.Duration) *v2.TelemetryCommand {
	t.Helper()
	type result struct {
		c   *v2.TelemetryCommand
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := s.Recv()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("telemetry stream: %v", r.err)
		}
		return r.c
	case <-time.After(within):
		t.Fatalf("no server command within %s", within)
	}
	return nil
}

func TestComponentTransactionCheckBack(t *testing.T) {
	h := newHarness(t)
	h.topic("tenant%tx", model.TopicTransaction, 2)
	h.group(model.Group{Name: "tenant%g"})
	ns := func(name string) *v2.Resource { return &v2.Resource{ResourceNamespace: "tenant", Name: name} }
	// A producer of another topic must never be asked.
	other := telemetryProducer(t, h, "other-producer", res("unrelated"))
	checker := telemetryProducer(t, h, "checker", ns("tx"))

	// The sender is not the producer asked: any live producer of the topic
	// may answer.
	m := txMsg(ns("tx"), "ORPHAN")
	tag := "t"
	m.SystemProperties.Tag = &tag
	m.UserProperties = map[string]string{"k": "v"}
	sent := h.sendOne("sender", m)

	h.clk.Advance(5 * time.Second) // not yet checkable (first check after 6 s)
	h.clk.Advance(time.Second)
	cmd := recvCommand(t, checker, 10*time.Second)
	rc := cmd.GetRecoverOrphanedTransactionCommand()
	if rc == nil {
		t.Fatalf("command %v, want recover_orphaned_transaction_command", cmd)
	}
	if rc.TransactionId != sent.TransactionId {
		t.Fatalf("transaction id %q, want %q", rc.TransactionId, sent.TransactionId)
	}
	msg := rc.Message
	sp := msg.GetSystemProperties()
	// Built like a delivered message, named as the producer
	// names it, without a receipt handle.
	if !proto.Equal(msg.Topic, ns("tx")) || sp.MessageId != "ORPHAN" || string(msg.Body) != "tx-ORPHAN" ||
		sp.GetTag() != "t" || msg.UserProperties["k"] != "v" || sp.MessageType != v2.MessageType_TRANSACTION ||
		sp.ReceiptHandle != nil || sp.GetBodyDigest().GetChecksum() != md5Upper([]byte("tx-ORPHAN")) ||
		sp.GetDeliveryAttempt() < 1 || sp.BornTimestamp == nil {
		t.Fatalf("check message %v", msg)
	}
	// The producer answers with a normal EndTransaction.
	code(t, h.endTx(&v2.EndTransactionRequest{Topic: ns("tx"), MessageId: "ORPHAN", TransactionId: rc.TransactionId,
		Resolution: v2.TransactionResolution_COMMIT, Source: v2.TransactionSource_SOURCE_SERVER_CHECK}), v2.Code_OK)
	h.dispatched()
	req := recvReq("g", "tx", 32, 30*time.Second, "*")
	req.Group, req.MessageQueue.Topic = ns("g"), ns("tx")
	r := h.receive(req, 5*time.Second)
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 1 || r.msgs[0].SystemProperties.MessageId != "ORPHAN" {
		t.Fatalf("after the checker's commit: %v", r.msgs)
	}

	// No live producer at check time: nothing is sent; once one attaches,
	// the next check pass reaches it.
	h.topic("tx2", model.TopicTransaction, 1)
	late := h.sendOne("sender", txMsg(res("tx2"), "LATE"))
	h.clk.Advance(6 * time.Second)
	h.dispatched()
	p2 := telemetryProducer(t, h, "late-producer", res("tx2"))
	h.clk.Advance(30 * time.Second)
	cmd = recvCommand(t, p2, 10*time.Second)
	if got := cmd.GetRecoverOrphanedTransactionCommand(); got.GetTransactionId() != late.TransactionId ||
		got.GetMessage().GetTopic().GetName() != "tx2" || got.GetMessage().GetTopic().GetResourceNamespace() != "" {
		t.Fatalf("late check %v", cmd)
	}
	// UNKNOWN (UNSPECIFIED) keeps it pending: it is asked again.
	code(t, h.endTx(&v2.EndTransactionRequest{Topic: res("tx2"), MessageId: "LATE", TransactionId: late.TransactionId}), v2.Code_OK)
	h.clk.Advance(30 * time.Second)
	cmd = recvCommand(t, p2, 10*time.Second)
	if cmd.GetRecoverOrphanedTransactionCommand().GetTransactionId() != late.TransactionId {
		t.Fatalf("second check %v", cmd)
	}
	code(t, h.endTx(&v2.EndTransactionRequest{Topic: res("tx2"), MessageId: "LATE", TransactionId: late.TransactionId,
		Resolution: v2.TransactionResolution_ROLLBACK}), v2.Code_OK)

	// The unrelated producer got nothing: its next frame is the one we
	// push ourselves.
	if err := h.sess.Send("other-producer", &v2.TelemetryCommand{Command: &v2.TelemetryCommand_ReconnectEndpointsCommand{
		ReconnectEndpointsCommand: &v2.ReconnectEndpointsCommand{Nonce: "marker"}}}); err != nil {
		t.Fatal(err)
	}
	if c := recvCommand(t, other, 10*time.Second); c.GetReconnectEndpointsCommand().GetNonce() != "marker" {
		t.Fatalf("unrelated producer received %v", c)
	}
}

func TestComponentRecallMessage(t *testing.T) {
	h := newHarness(t)
	h.topic("d", model.TopicDelay, 2)
	h.topic("d2", model.TopicDelay, 1)
	h.topic("n", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	delayed := func(topic, id string, in time.Duration) *v2.Message {
		m := newMsg(topic, id, "", "delayed-"+id)
		m.SystemProperties.MessageType = v2.MessageType_DELAY
		m.SystemProperties.DeliveryTimestamp = timestamppb.New(h.clk.Now().Add(in))
		return m
	}
	e := h.sendOne("producer-1", delayed("d", "D1", time.Minute))
	if e.RecallHandle == "" {
		t.Fatal("no recall handle for a delayed message")
	}
	if e.TransactionId != "" {
		t.Fatalf("transaction id on a delay message: %q", e.TransactionId)
	}
	recall := func(topic, handle string) *v2.RecallMessageResponse {
		resp, err := h.c.RecallMessage(h.ctx("producer-1", 5*time.Second), &v2.RecallMessageRequest{Topic: res(topic), RecallHandle: handle})
		if err != nil {
			t.Fatalf("RecallMessage: gRPC error %v", err)
		}
		return resp
	}
	code(t, recall("bad topic", e.RecallHandle).Status, v2.Code_ILLEGAL_TOPIC)
	code(t, recall("d", "").Status, v2.Code_BAD_REQUEST)
	code(t, recall("d", "d1.garbled").Status, v2.Code_BAD_REQUEST)
	code(t, recall("d", e.RecallHandle[:len(e.RecallHandle)-2]+"AA").Status, v2.Code_BAD_REQUEST)
	code(t, recall("d2", e.RecallHandle).Status, v2.Code_BAD_REQUEST)
	code(t, recall("n", e.RecallHandle).Status, v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
	code(t, recall("missing", e.RecallHandle).Status, v2.Code_TOPIC_NOT_FOUND)
	ok := recall("d", e.RecallHandle)
	code(t, ok.Status, v2.Code_OK)
	if ok.MessageId != "D1" {
		t.Fatalf("recalled message id %q", ok.MessageId)
	}
	code(t, recall("d", e.RecallHandle).Status, v2.Code_MESSAGE_NOT_FOUND)

	// A delivered message cannot be recalled.
	e2 := h.sendOne("producer-1", delayed("d", "D2", 10*time.Second))
	h.clk.Advance(2 * time.Minute)
	h.dispatched()
	r := h.receive(recvReq("g", "d", 32, 30*time.Second, "*"), 5*time.Second)
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 1 || r.msgs[0].SystemProperties.MessageId != "D2" ||
		r.msgs[0].SystemProperties.MessageType != v2.MessageType_DELAY || r.msgs[0].SystemProperties.DeliveryTimestamp == nil {
		t.Fatalf("delivered %v (D1 was recalled, D2 is due)", r.msgs)
	}
	code(t, h.ack("g", "d", handleOf(r.msgs[0])).Status, v2.Code_OK)
	code(t, recall("d", e2.RecallHandle).Status, v2.Code_MESSAGE_NOT_FOUND)

	// Beyond the maximum delay: ILLEGAL_DELIVERY_TIME, nothing stored.
	resp, err := h.c.SendMessage(h.ctx("producer-1", 5*time.Second), &v2.SendMessageRequest{Messages: []*v2.Message{delayed("d", "FAR", 24*time.Hour+time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	code(t, resp.Status, v2.Code_ILLEGAL_DELIVERY_TIME)
	if len(resp.Entries) != 0 {
		t.Fatal("entries for a rejected send")
	}
	h.clk.Advance(25 * time.Hour)
	if got := h.receiveIDs("g", "d"); len(got) != 0 {
		t.Fatalf("rejected or recalled messages delivered: %v", got)
	}
}

func TestComponentQueryAssignment(t *testing.T) {
	h := newHarness(t)
	h.topic("n", model.TopicNormal, 4)
	h.topic("f", model.TopicFIFO, 3)
	if _, err := h.b.CreateTopic(t.Context(), model.Topic{Name: "wo", Type: model.TopicNormal, Queues: 2, Perm: model.PermWrite}); err != nil {
		t.Fatal(err)
	}
	h.group(model.Group{Name: "g"})
	h.group(model.Group{Name: "fg", FIFO: true})
	ep := &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: "127.0.0.1", Port: 18081}}}
	query := func(topic, group string) *v2.QueryAssignmentResponse {
		resp, err := h.c.QueryAssignment(h.ctx("push-1", 5*time.Second), &v2.QueryAssignmentRequest{Topic: res(topic), Group: res(group), Endpoints: ep})
		if err != nil {
			t.Fatalf("QueryAssignment: gRPC error %v", err)
		}
		return resp
	}
	br := &v2.Broker{Name: DefaultBrokerName, Id: 0, Endpoints: ep}
	a := query("n", "g")
	code(t, a.Status, v2.Code_OK)
	want := []*v2.Assignment{{MessageQueue: &v2.MessageQueue{Topic: res("n"), Id: -1, Permission: v2.Permission_READ_WRITE, Broker: br}}}
	if len(a.Assignments) != 1 || !proto.Equal(a.Assignments[0], want[0]) {
		t.Fatalf("non-FIFO assignments %v, want %v", a.Assignments, want)
	}
	// Identical on every call and for every consumer of the group.
	again, _ := h.c.QueryAssignment(h.ctx("push-2", 5*time.Second), &v2.QueryAssignmentRequest{Topic: res("n"), Group: res("g"), Endpoints: ep})
	if !proto.Equal(a, again) {
		t.Fatalf("assignments differ between calls: %v / %v", a, again)
	}
	f := query("f", "fg")
	code(t, f.Status, v2.Code_OK)
	if len(f.Assignments) != 3 {
		t.Fatalf("FIFO assignments %v, want one per queue", f.Assignments)
	}
	for i, as := range f.Assignments {
		w := &v2.MessageQueue{Topic: res("f"), Id: int32(i), Permission: v2.Permission_READ_WRITE, Broker: br}
		if !proto.Equal(as.MessageQueue, w) {
			t.Fatalf("FIFO assignment %d = %v, want %v", i, as.MessageQueue, w)
		}
	}
	if f2 := query("f", "fg"); !proto.Equal(f, f2) {
		t.Fatal("FIFO assignments differ between calls")
	}
	// A FIFO topic read by a non-FIFO group: "any queue".
	if nf := query("f", "g"); len(nf.Assignments) != 1 || nf.Assignments[0].MessageQueue.Id != -1 {
		t.Fatalf("FIFO topic, concurrent group: %v", nf.Assignments)
	}
	code(t, query("wo", "g").Status, v2.Code_FORBIDDEN)
	code(t, query("missing", "g").Status, v2.Code_TOPIC_NOT_FOUND)
	code(t, query("bad topic", "g").Status, v2.Code_ILLEGAL_TOPIC)
	code(t, query("n", "bad group").Status, v2.Code_ILLEGAL_CONSUMER_GROUP)
	code(t, query("n", "nogroup").Status, v2.Code_CONSUMER_GROUP_NOT_FOUND)
	r, err := h.c.QueryAssignment(h.ctx("", 5*time.Second), &v2.QueryAssignmentRequest{Topic: res("n"), Group: res("g"), Endpoints: ep})
	if err != nil {
		t.Fatal(err)
	}
	code(t, r.Status, v2.Code_CLIENT_ID_REQUIRED)
}

// A push consumer of a FIFO group receives from the queue of its
// assignment; a simple consumer's queue id is ignored (upstream pops
// across all queues).
func TestComponentPushReceiveHonoursAssignedQueue(t *testing.T) {
	h := newHarness(t)
	h.topic("f", model.TopicFIFO, 4)
	h.group(model.Group{Name: "fg", FIFO: true})
	byQueue := map[int32][]string{}
	for _, grp := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		m := newMsg("f", grp, "", "x")
		g := grp
		m.SystemProperties.MessageGroup = &g
		m.SystemProperties.MessageType = v2.MessageType_FIFO
		h.sendOne("producer-1", m)
	}
	push := func(q int32) received {
		req := recvReq("fg", "f", 32, 0, "*")
		req.InvisibleDuration = nil
		req.AutoRenew = true
		req.MessageQueue.Id = q
		return h.receive(req, nonBlocking)
	}
	total := 0
	for q := int32(0); q < 4; q++ {
		r := push(q)
		for _, m := range r.msgs {
			if m.SystemProperties.QueueId != q {
				t.Fatalf("push receive for queue %d got a message of queue %d", q, m.SystemProperties.QueueId)
			}
			byQueue[q] = append(byQueue[q], m.SystemProperties.MessageId)
		}
		total += len(r.msgs)
	}
	if total != 8 {
		t.Fatalf("received %d of 8 across the four assigned queues: %v", total, byQueue)
	}
	// Non-push receives (a simple consumer naming a route queue) pop across
	// all queues.
	h.group(model.Group{Name: "sg", FIFO: true})
	r := h.receive(recvReq("sg", "f", 32, 30*time.Second, "*"), 5*time.Second)
	queues := map[int32]bool{}
	for _, m := range r.msgs {
		queues[m.SystemProperties.QueueId] = true
	}
	if len(r.msgs) != 8 || len(queues) != len(byQueue) {
		t.Fatalf("simple receive got %d messages from queues %v", len(r.msgs), queues)
	}
}

type pulled struct {
	status *v2.Status
	msgs   []*v2.Message
	next   *int64
}

// pull runs PullMessage and checks the frame order: status first, then
// messages (only after OK), then at most one next_offset, then gRPC OK.
func (h *harness) pull(req *v2.PullMessageRequest, deadline time.Duration) pulled {
	h.t.Helper()
	stream, err := h.c.PullMessage(h.ctx("puller", deadline), req)
	if err != nil {
		h.t.Fatal(err)
	}
	var p pulled
	for i := 0; ; i++ {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			h.t.Fatalf("PullMessage ended with %v, want gRPC OK", err)
		}
		switch c := f.Content.(type) {
		case *v2.PullMessageResponse_Status:
			if i != 0 {
				h.t.Fatalf("status in frame %d", i)
			}
			p.status = c.Status
		case *v2.PullMessageResponse_Message:
			if p.status.GetCode() != v2.Code_OK || p.next != nil {
				h.t.Fatalf("message frame after status %v / next offset", p.status)
			}
			if c.Message.SystemProperties.ReceiptHandle != nil {
				h.t.Fatal("pulled message carries a receipt handle")
			}
			p.msgs = append(p.msgs, c.Message)
		case *v2.PullMessageResponse_NextOffset:
			if p.status == nil || p.next != nil {
				h.t.Fatal("next_offset before the status or twice")
			}
			n := c.NextOffset
			p.next = &n
		}
	}
	if p.status == nil {
		h.t.Fatal("no status frame")
	}
	return p
}

func pullReq(group, topic string, queue int32, off int64, batch int32, filter string) *v2.PullMessageRequest {
	return &v2.PullMessageRequest{Group: res(group), MessageQueue: &v2.MessageQueue{Topic: res(topic), Id: queue},
		Offset: off, BatchSize: batch, FilterExpression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: filter}}
}

func TestComponentPullAndOffsets(t *testing.T) {
	h := newHarness(t)
	h.topic("p", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	t0 := h.clk.Now()
	h.send("p", newMsg("p", "A", "x", "1"), newMsg("p", "B", "y", "2"), newMsg("p", "C", "x", "3"))
	h.clk.Advance(time.Minute)
	t1 := h.clk.Now()
	h.send("p", newMsg("p", "D", "y", "4"), newMsg("p", "E", "x", "5"))

	queryOff := func(p v2.QueryOffsetPolicy, ts *timestamppb.Timestamp) *v2.QueryOffsetResponse {
		resp, err := h.c.QueryOffset(h.ctx("puller", 5*time.Second), &v2.QueryOffsetRequest{
			MessageQueue: &v2.MessageQueue{Topic: res("p"), Id: 0}, QueryOffsetPolicy: p, Timestamp: ts})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	wantOff := func(r *v2.QueryOffsetResponse, want int64) {
		t.Helper()
		code(t, r.Status, v2.Code_OK)
		if r.Offset != want {
			t.Fatalf("offset %d, want %d", r.Offset, want)
		}
	}
	wantOff(queryOff(v2.QueryOffsetPolicy_BEGINNING, nil), 0)
	wantOff(queryOff(v2.QueryOffsetPolicy_END, nil), 5)
	wantOff(queryOff(v2.QueryOffsetPolicy_TIMESTAMP, timestamppb.New(t0)), 0)
	wantOff(queryOff(v2.QueryOffsetPolicy_TIMESTAMP, timestamppb.New(t1)), 3)
	wantOff(queryOff(v2.QueryOffsetPolicy_TIMESTAMP, timestamppb.New(t1.Add(time.Hour))), 5)
	code(t, queryOff(v2.QueryOffsetPolicy_TIMESTAMP, nil).Status, v2.Code_BAD_REQUEST)
	code(t, queryOff(v2.QueryOffsetPolicy(9), nil).Status, v2.Code_BAD_REQUEST)
	bad, _ := h.c.QueryOffset(h.ctx("puller", 5*time.Second), &v2.QueryOffsetRequest{MessageQueue: &v2.MessageQueue{Topic: res("p"), Id: 3}})
	code(t, bad.Status, v2.Code_BAD_REQUEST)
	bad, _ = h.c.QueryOffset(h.ctx("puller", 5*time.Second), &v2.QueryOffsetRequest{MessageQueue: &v2.MessageQueue{Topic: res("missing")}})
	code(t, bad.Status, v2.Code_TOPIC_NOT_FOUND)

	// Pull everything: status, messages in order with offsets, next offset.
	p := h.pull(pullReq("g", "p", 0, 0, 32, "*"), 5*time.Second)
	code(t, p.status, v2.Code_OK)
	var got []string
	for i, m := range p.msgs {
		got = append(got, m.SystemProperties.MessageId)
		if m.SystemProperties.GetQueueOffset() != int64(i) || m.Topic.GetName() != "p" || m.SystemProperties.GetDeliveryAttempt() != 1 {
			t.Fatalf("pulled message %d: %v", i, m)
		}
	}
	if !slices.Equal(got, []string{"A", "B", "C", "D", "E"}) || p.next == nil || *p.next != 5 {
		t.Fatalf("pulled %v next %v", got, p.next)
	}
	// A batch and a filter: next offset is past what was scanned.
	p = h.pull(pullReq("g", "p", 0, 1, 2, "x"), 5*time.Second)
	code(t, p.status, v2.Code_OK)
	if len(p.msgs) != 2 || p.msgs[0].SystemProperties.MessageId != "C" || p.msgs[1].SystemProperties.MessageId != "E" || *p.next != 5 {
		t.Fatalf("filtered pull %v next %d", p.msgs, *p.next)
	}
	// At the end: MESSAGE_NOT_FOUND with the next offset.
	p = h.pull(pullReq("g", "p", 0, 5, 32, "*"), nonBlocking)
	code(t, p.status, v2.Code_MESSAGE_NOT_FOUND)
	if p.next == nil || *p.next != 5 {
		t.Fatalf("next offset at the end %v", p.next)
	}
	// Only non-matching messages left: MESSAGE_NOT_FOUND, next past them.
	p = h.pull(pullReq("g", "p", 0, 3, 32, "zzz"), nonBlocking)
	code(t, p.status, v2.Code_MESSAGE_NOT_FOUND)
	if p.next == nil || *p.next != 5 {
		t.Fatalf("next offset after filtering %v", p.next)
	}
	// Out of range: ILLEGAL_OFFSET with the nearest valid offset.
	p = h.pull(pullReq("g", "p", 0, 9, 32, "*"), nonBlocking)
	code(t, p.status, v2.Code_ILLEGAL_OFFSET)
	if p.next == nil || *p.next != 5 {
		t.Fatalf("illegal offset answer %v", p.next)
	}
	// Other errors: the status frame alone.
	for name, req := range map[string]*v2.PullMessageRequest{
		"bad topic":     pullReq("g", "bad topic", 0, 0, 1, "*"),
		"bad group":     pullReq("bad group", "p", 0, 0, 1, "*"),
		"no such queue": pullReq("g", "p", 4, 0, 1, "*"),
		"malformed sql": {Group: res("g"), MessageQueue: &v2.MessageQueue{Topic: res("p")}, FilterExpression: &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: "a >"}},
	} {
		p := h.pull(req, 5*time.Second)
		if p.status.Code == v2.Code_OK || p.next != nil || len(p.msgs) != 0 {
			t.Fatalf("%s: %v next %v", name, p.status, p.next)
		}
	}

	// Committed offsets: none yet, then round-trip; a bad one changes
	// nothing; pulling never moves it.
	get := func() *v2.GetOffsetResponse {
		resp, err := h.c.GetOffset(h.ctx("puller", 5*time.Second), &v2.GetOffsetRequest{Group: res("g"), MessageQueue: &v2.MessageQueue{Topic: res("p"), Id: 0}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	update := func(off int64) *v2.Status {
		resp, err := h.c.UpdateOffset(h.ctx("puller", 5*time.Second), &v2.UpdateOffsetRequest{Group: res("g"), MessageQueue: &v2.MessageQueue{Topic: res("p"), Id: 0}, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	code(t, get().Status, v2.Code_OFFSET_NOT_FOUND)
	code(t, update(3), v2.Code_OK)
	if g := get(); g.Status.Code != v2.Code_OK || g.Offset != 3 {
		t.Fatalf("get after update: %v", g)
	}
	code(t, update(6), v2.Code_ILLEGAL_OFFSET)
	code(t, update(-1), v2.Code_ILLEGAL_OFFSET)
	h.pull(pullReq("g", "p", 0, 0, 32, "*"), 5*time.Second)
	if g := get(); g.Offset != 3 {
		t.Fatalf("offset moved to %d", g.Offset)
	}
	code(t, update(5), v2.Code_OK)
	if g := get(); g.Offset != 5 {
		t.Fatalf("offset %d after the second update", g.Offset)
	}
	// Pull is not POP: the group still receives everything by POP.
	if got := h.receiveIDs("g", "p"); len(got) != 5 {
		t.Fatalf("POP after pulls got %v", got)
	}
}

// A pull parked at the end of a queue is woken by an arrival.
func TestComponentPullLongPollWokenByArrival(t *testing.T) {
	h := newHarness(t)
	h.topic("p", model.TopicNormal, 1)
	h.group(model.Group{Name: "g"})
	done := make(chan pulled, 1)
	go func() { done <- h.pull(pullReq("g", "p", 0, 0, 32, "*"), 10*time.Second) }()
	p := wokenByArrival(t, h, "p", done)
	code(t, p.status, v2.Code_OK)
	if len(p.msgs) == 0 || p.msgs[0].SystemProperties.MessageId != "W" {
		t.Fatalf("woken pull got %v", p.msgs)
	}
}

// What the official PushConsumer reads from the Settings reply: the FIFO flag once at start, a batch size, a long
// polling timeout and a retry policy with exactly one strategy.
func TestComponentPushConsumerSettings(t *testing.T) {
	h := newHarness(t)
	h.group(model.Group{Name: "fifo-g", FIFO: true, MaxDeliveryAttempts: 4})
	h.group(model.Group{Name: "exp-g", Retry: model.ExponentialRetryPolicy()})
	for _, c := range []struct {
		group string
		fifo  bool
		exp   bool
		max   int32
	}{{"fifo-g", true, false, 4}, {"exp-g", false, true, 17}} {
		s := openTelemetry(t, h, "push-"+c.group)
		err := s.Send(&v2.TelemetryCommand{Command: &v2.TelemetryCommand_Settings{Settings: &v2.Settings{
			ClientType: v2.ClientType_PUSH_CONSUMER.Enum(),
			PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{Group: res(c.group),
				Subscriptions: []*v2.SubscriptionEntry{{Topic: res("t"), Expression: &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"}}}}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		reply, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		sub := reply.GetSettings().GetSubscription()
		if sub.GetFifo() != c.fifo || sub.Fifo == nil || sub.GetReceiveBatchSize() != 32 || sub.GetLongPollingTimeout().AsDuration() != 20*time.Second {
			t.Fatalf("%s: subscription %v", c.group, sub)
		}
		bp := reply.GetSettings().GetBackoffPolicy()
		if bp.GetMaxAttempts() != c.max {
			t.Fatalf("%s: max attempts %d", c.group, bp.GetMaxAttempts())
		}
		switch {
		case c.exp && (bp.GetExponentialBackoff() == nil || bp.GetCustomizedBackoff() != nil):
			t.Fatalf("%s: backoff %v, want exponential only", c.group, bp)
		case !c.exp && (len(bp.GetCustomizedBackoff().GetNext()) != 18 || bp.GetExponentialBackoff() != nil ||
			bp.GetCustomizedBackoff().GetNext()[0].AsDuration() != time.Second):
			t.Fatalf("%s: backoff %v, want the customized schedule only", c.group, bp)
		}
	}
}

// TestComponentTransactionCheckBackThroughAnotherMember: the member
// storing a half message holds no control stream of a producer of its
// topic (with data groups a producer's streams go to the members it was
// routed to); the check is passed on (RemoteChecker) to a member that
// holds one, which sends it named as its producer names the topic, and
// the producer's answer commits the message.
func TestComponentTransactionCheckBackThroughAnotherMember(t *testing.T) {
	stores, holds := newHarness(t), newHarness(t)
	stores.topic("tenant%tx", model.TopicTransaction, 1)
	stores.group(model.Group{Name: "tenant%g"})
	holds.topic("tenant%tx", model.TopicTransaction, 1)
	ns := func(name string) *v2.Resource { return &v2.Resource{ResourceNamespace: "tenant", Name: name} }
	var asked []string
	stores.b.SetCheckBackSender(stores.svc.CheckBackSender(func(ctx context.Context, topic, txID string, msg []byte) (string, bool) {
		asked = append(asked, topic)
		id, sent, err := holds.svc.CheckTransactionForwarded(ctx, topic, txID, msg)
		if err != nil {
			t.Errorf("passing the check on: %v", err)
		}
		return id, sent
	}))
	checker := telemetryProducer(t, holds, "checker", ns("tx"))
	sent := stores.sendOne("sender", txMsg(ns("tx"), "ELSEWHERE"))
	stores.clk.Advance(6 * time.Second)

	cmd := recvCommand(t, checker, 10*time.Second)
	rc := cmd.GetRecoverOrphanedTransactionCommand()
	if rc.GetTransactionId() != sent.TransactionId || !proto.Equal(rc.GetMessage().GetTopic(), ns("tx")) ||
		rc.GetMessage().GetSystemProperties().GetMessageId() != "ELSEWHERE" || string(rc.GetMessage().GetBody()) != "tx-ELSEWHERE" ||
		rc.GetMessage().GetSystemProperties().ReceiptHandle != nil {
		t.Fatalf("check passed on: %v", cmd)
	}
	if len(asked) != 1 || asked[0] != "tenant%tx" {
		t.Fatalf("the other member was asked for %v", asked)
	}
	// The producer's answer reaches the member storing the message (the
	// client sends it there, as routed) and commits it.
	code(t, stores.endTx(&v2.EndTransactionRequest{Topic: ns("tx"), MessageId: "ELSEWHERE", TransactionId: rc.TransactionId,
		Resolution: v2.TransactionResolution_COMMIT, Source: v2.TransactionSource_SOURCE_SERVER_CHECK}), v2.Code_OK)
	stores.dispatched()
	req := recvReq("g", "tx", 32, 30*time.Second, "*")
	req.Group, req.MessageQueue.Topic = ns("g"), ns("tx")
	r := stores.receive(req, 5*time.Second)
	code(t, r.status, v2.Code_OK)
	if len(r.msgs) != 1 || r.msgs[0].SystemProperties.MessageId != "ELSEWHERE" {
		t.Fatalf("after the commit: %v", r.msgs)
	}

	// A member holding no producer of the topic answers not sent; one sent
	// what is not a message answers an error.
	if _, ok, err := stores.svc.CheckTransactionForwarded(context.Background(), "tenant%tx", "x", []byte{0x0a, 0x00}); ok || err == nil {
		t.Fatalf("a check without a message: sent %v, %v", ok, err)
	}
	b, _ := proto.Marshal(&v2.Message{Topic: &v2.Resource{Name: "tenant%tx"}, SystemProperties: &v2.SystemProperties{MessageId: "M"}})
	if _, ok, err := stores.svc.CheckTransactionForwarded(context.Background(), "tenant%tx", "x", b); ok || err != nil {
		t.Fatalf("a check where no producer is: sent %v, %v", ok, err)
	}
	if _, ok, err := holds.svc.CheckTransactionForwarded(context.Background(), "tenant%other", "x", b); ok || err == nil {
		t.Fatalf("a check whose message names another topic: sent %v, %v", ok, err)
	}
}
