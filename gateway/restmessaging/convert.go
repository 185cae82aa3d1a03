package restmessaging

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// This file is where mqgate.rest.v1 and domain types meet.

// toModelMessage converts message i of a send. The broker validates the
// rest (body size, tag, keys, properties, message group, delivery time
// range, topic type) with the same rules for every edge.
func (s *Service) toModelMessage(i int, m *restv1.OutgoingMessage, topic, host string, now time.Time) (*model.Message, error) {
	var body []byte
	switch c := m.GetContent().(type) {
	case *restv1.OutgoingMessage_Text:
		body = []byte(c.Text)
	case *restv1.OutgoingMessage_Body:
		body = c.Body
	}
	if len(body) == 0 {
		return nil, mqerr.Errorf(mqerr.KindBodyEmpty, "messages[%d]: the body is empty (give \"text\" or base64 \"body\")", i)
	}
	mm := &model.Message{
		Topic:        topic,
		ID:           m.GetMessageId(),
		Tag:          m.GetTag(),
		Keys:         m.GetKeys(),
		MessageGroup: m.GetMessageGroup(),
		Properties:   m.GetProperties(),
		Body:         body,
		BornTime:     now,
		BornHost:     host,
	}
	if mm.ID == "" {
		mm.ID = s.ids.next(now)
	}
	if ts := m.GetDeliveryTimestamp(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "messages[%d].deliveryTimestamp is not a valid time", i)
		}
		mm.DeliveryTime = ts.AsTime()
	}
	return mm, nil
}

// maxInflated bounds the decompressed size of a gzip body (the 4 MiB
// message limit applies to what producers sent, compressed).
const maxInflated = 64 << 20

// toReceived converts a delivery. Bodies that v2 producers compressed are
// inflated: REST clients get what the producer sent. text asks for UTF-8
// bodies as text.
func (s *Service) toReceived(d *model.Delivered, text bool, now time.Time) *restv1.ReceivedMessage {
	body := d.Body
	if d.BodyGzip {
		if b, err := inflate(body); err == nil {
			body = b
		} else {
			// Delivered as stored: the consumer sees the bytes rather than
			// losing the message to a decoding problem.
			s.log.Warn("a gzip message body does not inflate; delivering it compressed", "message_id", d.ID, "err", err)
		}
	}
	out := &restv1.ReceivedMessage{
		MessageId:         d.ID,
		Tag:               d.Tag,
		Keys:              d.Keys,
		Properties:        d.Properties,
		DeliveryAttempt:   max(d.Attempt, 1),
		ReceiptHandle:     d.ReceiptHandle,
		MessageGroup:      d.MessageGroup,
		BornTimestamp:     timestampOf(d.BornTime),
		StoreTimestamp:    timestampOf(d.StoreTime),
		DeliveryTimestamp: timestampOf(d.DeliveryTime),
	}
	if text && utf8.Valid(body) {
		out.Content = &restv1.ReceivedMessage_Text{Text: string(body)}
	} else {
		out.Content = &restv1.ReceivedMessage_Body{Body: body}
	}
	if d.InvisibleFor > 0 {
		out.InvisibleUntil = timestamppb.New(now.Add(d.InvisibleFor))
	}
	return out
}

// timestampOf is t as a proto timestamp; nil (the field left out) for the
// zero time.
func timestampOf(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func inflate(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxInflated+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("inflates to more than %d bytes", maxInflated)
	}
	return out, nil
}

func acceptTypes(t model.TopicType) []string {
	ts := t.AcceptedTypes()
	out := make([]string, len(ts))
	for i, m := range ts {
		out[i] = m.String()
	}
	return out
}
