package v2service

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// SendMessage validates the request's shape (in upstream's
// order and with its codes), converts the messages and hands them to the
// broker, which checks the topic (existence, type, permission) and stores
// them. Validation failures answer a top-level status with no entries;
// otherwise there is one entry per message in request order, and the
// top-level status is their common code or MULTIPLE_RESULTS.
func (s *MessagingService) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	topic, msgs, err := toModelMessages(req.GetMessages())
	if err != nil {
		return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	// The broker fills a missing born host from p.Host; the official
	// clients always send one, so the peer is looked up only when needed.
	p := model.Producer{ClientID: grpcserver.ClientID(ctx)}
	for _, m := range msgs {
		if m.BornHost == "" {
			p.Host = peerHost(ctx)
			break
		}
	}
	if s.steerSend(ctx, msgs) {
		return nil, s.steer()
	}
	t, err := s.at(ctx, s.sendGroup(ctx, topic, msgs))
	if err != nil {
		return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.SendMessageResponse)
		if err := t.invoke(ctx, v2.MessagingService_SendMessage_FullMethodName, req, resp); err != nil {
			return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	results, err := t.b.Send(ctx, topic, msgs, p)
	if err != nil {
		return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if len(results) != len(msgs) {
		s.log.ErrorContext(ctx, "broker returned a wrong number of send results", "want", len(msgs), "got", len(results))
		return &v2.SendMessageResponse{Status: statusNoEntries}, nil
	}
	resp := sendResponse(len(results))
	for i, r := range results {
		e := resp.Entries[i]
		// The message id is the client's, verbatim.
		e.Status, e.MessageId, e.TransactionId, e.Offset, e.RecallHandle = statusOf(ctx, s.log, r.Err), msgs[i].ID, r.TransactionID, r.Offset, r.RecallHandle
	}
	resp.Status = combine(resp.Entries)
	return resp, nil
}

// sendResponse is the response to a send of n messages, with n empty
// result entries: for one message, the usual send, in one allocation.
func sendResponse(n int) *v2.SendMessageResponse {
	if n == 1 {
		one := new(struct {
			resp v2.SendMessageResponse
			ent  v2.SendResultEntry
			out  [1]*v2.SendResultEntry
		})
		one.out[0] = &one.ent
		one.resp.Entries = one.out[:]
		return &one.resp
	}
	// The entries in one allocation, not one each.
	ents := make([]v2.SendResultEntry, n)
	out := make([]*v2.SendResultEntry, n)
	for i := range ents {
		out[i] = &ents[i]
	}
	return &v2.SendMessageResponse{Entries: out}
}

// RecallMessage cancels a pending delayed message by the recall handle
// its send returned, with these codes: a blank, garbled or forged
// handle, or one minted for another topic ⇒ BAD_REQUEST; a message
// already delivered, recalled or unknown ⇒ MESSAGE_NOT_FOUND; a topic
// that is not a DELAY (or MIXED) topic ⇒ MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
// Success answers OK with the recalled message's id.
func (s *MessagingService) RecallMessage(ctx context.Context, req *v2.RecallMessageRequest) (*v2.RecallMessageResponse, error) {
	topic, err := checkTopic(req.GetTopic())
	if err != nil {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	t, err := s.at(ctx, s.tokenGroup(req.GetRecallHandle()))
	if err != nil {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if t.conn != nil {
		resp := new(v2.RecallMessageResponse)
		if err := t.invoke(ctx, v2.MessagingService_RecallMessage_FullMethodName, req, resp); err != nil {
			return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
		return resp, nil
	}
	id, err := t.b.Recall(ctx, topic, req.GetRecallHandle())
	if err != nil {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	return &v2.RecallMessageResponse{Status: statusOK, MessageId: id}, nil
}

// toModelMessages checks the request's shape (upstream's first checks: a
// message, a valid topic, one topic per request) and converts it; the
// broker checks the messages themselves. It returns the topic key.
func toModelMessages(in []*v2.Message) (string, []*model.Message, error) {
	// 1. Something to send.
	if len(in) == 0 {
		return "", nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "no message to send")
	}
	// 2. The first message's topic.
	first := in[0].GetTopic()
	topic, err := checkTopic(first)
	if err != nil {
		return "", nil, err
	}
	// 3. One topic per request.
	for _, m := range in[1:] {
		t := m.GetTopic()
		if t.GetName() != first.GetName() || t.GetResourceNamespace() != first.GetResourceNamespace() {
			return "", nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "all messages of one send must have the same topic (%q and %q differ)",
				first.GetName(), t.GetName())
		}
	}
	out := modelMessages(len(in))
	for i, m := range in {
		if err := toModelMessage(out[i], m, topic); err != nil {
			return "", nil, err
		}
	}
	return topic, out, nil
}

// modelMessages allocates n messages and the batch of them: for one, in
// one allocation, for more, in two.
func modelMessages(n int) []*model.Message {
	if n == 1 {
		one := new(struct {
			batch [1]*model.Message
			m     model.Message
		})
		one.batch[0] = &one.m
		return one.batch[:]
	}
	ms := make([]model.Message, n)
	out := make([]*model.Message, n)
	for i := range ms {
		out[i] = &ms[i]
	}
	return out
}

// toModelMessage converts m into mm (zero). The rules every listener shares
// (upstream's message checks, then the type checks) are the broker's
// (produce.ValidateMessage); here are only what exists on this wire:
// timestamps and durations that do not parse, empty keys (dropped), and
// the LITE and PRIORITY types mqgate does not serve.
func toModelMessage(mm *model.Message, m *v2.Message, topic string) error {
	sp := m.GetSystemProperties()
	keys := sp.GetKeys()
	for _, k := range keys {
		if k == "" {
			keys = dropEmpty(keys)
			break
		}
	}
	var txRecovery time.Duration
	if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil {
		if d.CheckValid() != nil {
			return mqerr.Errorf(mqerr.KindBadRequest, "orphaned_transaction_recovery_duration is not a valid duration")
		}
		txRecovery = d.AsDuration()
	}
	var deliver time.Time
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		if ts.CheckValid() != nil {
			return mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "delivery_timestamp is not a valid time")
		}
		deliver = ts.AsTime()
	}
	if t := sp.GetMessageType(); t == v2.MessageType_PRIORITY {
		return mqerr.Errorf(mqerr.KindMessageTypeConflict, "%s messages are not supported", t)
	}
	tag := sp.GetTag()
	group := sp.GetMessageGroup()
	declared := messageTypeToModel(sp.GetMessageType())
	transactional := sp.GetMessageType() == v2.MessageType_TRANSACTION
	props := m.GetUserProperties()
	*mm = model.Message{
		Topic:         topic,
		ID:            sp.GetMessageId(),
		Tag:           tag,
		Keys:          keys,
		MessageGroup:  group,
		LiteTopic:     sp.GetLiteTopic(),
		DeliveryTime:  deliver,
		Transactional: transactional,
		Type:          declared,
		Properties:    props,
		Body:          m.GetBody(),
		BodyGzip:      sp.GetBodyEncoding() == v2.Encoding_GZIP,
		BornHost:      sp.GetBornHost(),
		TraceContext:  sp.GetTraceContext(),
		TxRecovery:    txRecovery,
	}
	if ts := sp.GetBornTimestamp(); ts != nil && ts.CheckValid() == nil {
		mm.BornTime = ts.AsTime()
	}
	return nil
}

func dropEmpty(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

// peerHost is the caller's IP (born host when the producer sent none).
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if ta, ok := p.Addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return p.Addr.String()
	}
	return host
}
