package grpcserver

import (
	"context"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/stored"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// SendMessage validates the request's shape (spec §5.4, in upstream's
// order and with its codes), converts the messages and hands them to the
// broker, which checks the topic (existence, type, permission) and stores
// them. Validation failures answer a top-level status with no entries;
// otherwise there is one entry per message in request order, and the
// top-level status is their common code or MULTIPLE_RESULTS.
func (s *MessagingService) SendMessage(ctx context.Context, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
	now := s.clock.Now()
	topic, msgs, err := toModelMessages(req.GetMessages(), now)
	if err != nil {
		return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	p := model.Producer{ClientID: ClientID(ctx), Host: peerHost(ctx)}
	for _, m := range msgs {
		if m.BornHost == "" {
			m.BornHost = p.Host
		}
	}
	results, err := s.b.Send(ctx, topic, msgs, p)
	if err != nil {
		return &v2.SendMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if len(results) != len(msgs) {
		s.log.ErrorContext(ctx, "broker returned a wrong number of send results", "want", len(msgs), "got", len(results))
		return &v2.SendMessageResponse{Status: statusNoEntries}, nil
	}
	entries := make([]*v2.SendResultEntry, len(results))
	sts := make([]*v2.Status, len(results))
	for i, r := range results {
		st := statusOf(ctx, s.log, r.Err)
		sts[i] = st
		// The message id is the client's, verbatim (spec §6.1, §13.22).
		entries[i] = &v2.SendResultEntry{Status: st, MessageId: msgs[i].ID, TransactionId: r.TransactionID,
			Offset: r.Offset, RecallHandle: r.RecallHandle}
	}
	return &v2.SendMessageResponse{Status: combine(sts), Entries: entries}, nil
}

// RecallMessage cancels a pending delayed message by the recall handle
// its send returned (spec §5.6, REC codes): a blank, garbled or forged
// handle, or one minted for another topic ⇒ BAD_REQUEST; a message
// already delivered, recalled or unknown ⇒ MESSAGE_NOT_FOUND; a topic
// that is not a DELAY (or MIXED) topic ⇒ MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
// Success answers OK with the recalled message's id.
func (s *MessagingService) RecallMessage(ctx context.Context, req *v2.RecallMessageRequest) (*v2.RecallMessageResponse, error) {
	topic, err := checkTopic(req.GetTopic())
	if err != nil {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	if isBlank(req.GetRecallHandle()) {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log,
			mqerr.Errorf(mqerr.KindBadRequest, "recall_handle is blank"))}, nil
	}
	id, err := s.b.Recall(ctx, topic, req.GetRecallHandle())
	if err != nil {
		return &v2.RecallMessageResponse{Status: statusOf(ctx, s.log, err)}, nil
	}
	return &v2.RecallMessageResponse{Status: statusOK, MessageId: id}, nil
}

// toModelMessages validates a send request in the order of spec §5.4 and
// converts it. It returns the topic key.
func toModelMessages(in []*v2.Message, now time.Time) (string, []*model.Message, error) {
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
	out := make([]*model.Message, len(in))
	for i, m := range in {
		mm, err := toModelMessage(m, topic, now)
		if err != nil {
			return "", nil, err
		}
		out[i] = mm
	}
	return topic, out, nil
}

// toModelMessage runs checks 4–12 of spec §5.4 on one message, then the
// internal-consistency check of §5.4.1 (REC), and converts it.
func toModelMessage(m *v2.Message, topic string, now time.Time) (*model.Message, error) {
	sp := m.GetSystemProperties()
	// 4. Body.
	switch n := len(m.GetBody()); {
	case n == 0:
		return nil, mqerr.Errorf(mqerr.KindBodyEmpty, "message body is empty")
	case n > MaxBodySize:
		return nil, mqerr.Errorf(mqerr.KindBodyTooLarge, "message body is %d bytes, more than the %d allowed", n, MaxBodySize)
	}
	// 5. User properties: count, reserved names, control characters.
	props := m.GetUserProperties()
	if len(props) > MaxUserProperties {
		return nil, mqerr.Errorf(mqerr.KindPropertiesTooLarge, "%d user properties, more than the %d allowed", len(props), MaxUserProperties)
	}
	size := 0
	for k, v := range props {
		if isBlank(k) {
			return nil, mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property key is blank")
		}
		if stored.Reserved(k) {
			return nil, mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property %q is a reserved system property name", k)
		}
		if hasControl(k) || hasControl(v) {
			return nil, mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property %q has control characters in its key or value", k)
		}
		size += len(k) + len(v)
	}
	// 6. Tag.
	tag := sp.GetTag()
	if tag != "" && (isBlank(tag) || strings.IndexByte(tag, '|') >= 0 || hasControl(tag)) {
		return nil, mqerr.Errorf(mqerr.KindIllegalTag, "tag %q is blank, contains '|' or has control characters", tag)
	}
	size += len(tag)
	// 7. Keys ("" means absent and is dropped).
	keys := sp.GetKeys()
	hasEmpty := false
	for _, k := range keys {
		if k == "" {
			hasEmpty = true
			continue
		}
		if isBlank(k) || hasControl(k) {
			return nil, mqerr.Errorf(mqerr.KindIllegalKey, "message key %q is blank or has control characters", k)
		}
		size += len(k)
	}
	if hasEmpty {
		keys = dropEmpty(keys)
	}
	// 8. Total property size.
	if size > MaxPropertiesBytes {
		return nil, mqerr.Errorf(mqerr.KindPropertiesTooLarge, "user properties, tag and keys take %d bytes, more than the %d allowed", size, MaxPropertiesBytes)
	}
	// 9. Message id.
	if isBlank(sp.GetMessageId()) {
		return nil, mqerr.Errorf(mqerr.KindIllegalMessageID, "message id is blank")
	}
	declared := messageTypeToModel(sp.GetMessageType())
	transactional := sp.GetMessageType() == v2.MessageType_TRANSACTION
	// 10. Transaction recovery time.
	var txRecovery time.Duration
	if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil {
		if d.CheckValid() != nil {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "orphaned_transaction_recovery_duration is not a valid duration")
		}
		txRecovery = d.AsDuration()
		if transactional && txRecovery > MaxTxRecovery {
			return nil, mqerr.Errorf(mqerr.KindBadRequest, "orphaned_transaction_recovery_duration %s is longer than %s", txRecovery, MaxTxRecovery)
		}
	}
	// 11. Delivery time: at most one day ahead; past means now.
	var deliver time.Time
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		if ts.CheckValid() != nil {
			return nil, mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "delivery_timestamp is not a valid time")
		}
		deliver = ts.AsTime()
		if deliver.Sub(now) > MaxDelay {
			return nil, mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "delivery time %s is more than %s ahead", deliver.UTC().Format(time.RFC3339), MaxDelay)
		}
	}
	// 12. Message group.
	group := sp.GetMessageGroup()
	if group != "" && (isBlank(group) || len(group) >= MaxMessageGroup || hasControl(group)) {
		return nil, mqerr.Errorf(mqerr.KindIllegalMessageGroup, "message group %.70q is blank, %d bytes or longer, or has control characters", group, MaxMessageGroup)
	}
	// §5.4.1 REC: internally inconsistent types are refused here; the
	// broker compares the actual type with the topic's (13, 14).
	switch {
	case sp.GetMessageType() == v2.MessageType_LITE || sp.GetMessageType() == v2.MessageType_PRIORITY:
		return nil, mqerr.Errorf(mqerr.KindMessageTypeConflict, "%s messages are not supported", sp.GetMessageType())
	case transactional && (group != "" || sp.DeliveryTimestamp != nil):
		// (A FIFO message with a delivery time is what the Go client
		// builds for "delayed FIFO": the broker judges it as DELAY.)
		return nil, mqerr.Errorf(mqerr.KindMessageTypeConflict, "a TRANSACTION message cannot have a message group or a delivery time")
	}
	mm := &model.Message{
		Topic:         topic,
		ID:            sp.GetMessageId(),
		Tag:           tag,
		Keys:          keys,
		MessageGroup:  group,
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
	return mm, nil
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
