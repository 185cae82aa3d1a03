package record

import (
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/storage/message"
)

// ToRecord builds the store record for m in (topic, queue). The record's
// topic may differ from m.Topic (half and delay messages live in system
// topics; RealTopic then names the destination).
func ToRecord(m *model.Message, topic string, queue int32) *message.Message {
	r := new(message.Message)
	fillRecord(r, make([]message.Property, 0, len(m.Properties)+propsAdded), m, topic, queue)
	return r
}

// ToRecords is ToRecord of a batch bound for one queue, allocated
// together: for one message with a few properties, record and batch in
// one allocation; for more, the records in one, their properties in
// another.
func ToRecords(msgs []*model.Message, topic string, queue int32) []*message.Message {
	if len(msgs) == 1 {
		one := new(struct {
			batch [1]*message.Message
			rec   message.Message
			props [8]message.Property
		})
		fillRecord(&one.rec, one.props[:0], msgs[0], topic, queue)
		one.batch[0] = &one.rec
		return one.batch[:]
	}
	n := 0
	for _, m := range msgs {
		n += len(m.Properties) + propsAdded
	}
	free := make([]message.Property, 0, n)
	recs := make([]message.Message, len(msgs))
	out := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		// Each record's properties take the start of what is free (their
		// capacity cut at their end), or a new array should it run out.
		used := fillRecord(&recs[i], free, m, topic, queue)
		free = used[len(used):]
		out[i] = &recs[i]
	}
	return out
}

// propsAdded is about how many system properties a record gets beside
// its user properties (id, tag, keys, ...).
const propsAdded = 6

// fillRecord sets r to m's record in (topic, queue), its properties
// appended to props (empty, with room for them or not), and returns
// them.
func fillRecord(r *message.Message, props []message.Property, m *model.Message, topic string, queue int32) []message.Property {
	*r = message.Message{
		Topic:    topic,
		QueueID:  queue,
		BornTime: m.BornTime.UnixMilli(),
		BornHost: m.BornHost,
		Body:     m.Body,
	}
	if m.BodyGzip {
		r.Flags |= FlagGzip
	}
	for k, v := range m.Properties {
		props = append(props, message.Property{Key: k, Value: v})
	}
	add := func(k, v string) {
		if v != "" {
			props = append(props, message.Property{Key: k, Value: v})
		}
	}
	add(PropUniqKey, m.ID)
	add(PropTags, m.Tag)
	if len(m.Keys) > 0 {
		add(PropKeys, strings.Join(m.Keys, " "))
		for _, k := range m.Keys {
			if strings.ContainsAny(k, " \t\n") {
				add(PropKeysList, strings.Join(m.Keys, "\x1f"))
				break
			}
		}
	}
	add(PropShardingKey, m.MessageGroup)
	add(PropLiteTopic, m.LiteTopic)
	if !m.DeliveryTime.IsZero() {
		add(PropDeliverMS, strconv.FormatInt(m.DeliveryTime.UnixMilli(), 10))
	}
	if m.Transactional {
		add(PropTranMsg, "true")
	}
	if m.TxRecovery > 0 {
		add(PropCheckImmunity, strconv.FormatInt(int64(m.TxRecovery/time.Second), 10))
	}
	add(PropTraceContext, m.TraceContext)
	if m.ReconsumeTimes > 0 {
		add(PropReconsumeTime, strconv.FormatInt(int64(m.ReconsumeTimes), 10))
	}
	if topic != m.Topic {
		add(PropRealTopic, m.Topic)
	}
	r.Properties = props[:len(props):len(props)]
	sortProps(r.Properties)
	return props
}

func sortProps(p []message.Property) {
	// insertion sort: property lists are short
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].Key < p[j-1].Key; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
	// keep the last of duplicate keys (system props win: added last)
	out := p[:0]
	for i := range p {
		if len(out) > 0 && out[len(out)-1].Key == p[i].Key {
			out[len(out)-1] = p[i]
			continue
		}
		out = append(out, p[i])
	}
}

// FromRecord rebuilds a delivered message (without delivery details) from
// a stored record. topic is the name to present (the original topic for
// retries and delays).
func FromRecord(r *message.Message) *model.Delivered {
	d := &model.Delivered{
		QueueID:     r.QueueID,
		QueueOffset: r.QueueOffset,
		StoreTime:   time.UnixMilli(r.StoreTime),
		StoreHost:   r.StoreHost,
	}
	m := &d.Message
	m.Topic = r.Topic
	m.Body = r.Body
	m.BodyGzip = r.Flags&FlagGzip != 0
	m.BornTime = time.UnixMilli(r.BornTime)
	m.BornHost = r.BornHost
	var keysList string
	for _, p := range r.Properties {
		switch p.Key {
		case PropUniqKey:
			m.ID = p.Value
		case PropTags:
			m.Tag = p.Value
		case PropKeys:
			m.Keys = strings.Fields(p.Value)
		case PropKeysList:
			keysList = p.Value
		case PropShardingKey:
			m.MessageGroup = p.Value
		case PropLiteTopic:
			m.LiteTopic = p.Value
		case PropDeliverMS:
			if ms, err := strconv.ParseInt(p.Value, 10, 64); err == nil {
				m.DeliveryTime = time.UnixMilli(ms)
			}
		case PropTranMsg:
			m.Transactional = p.Value == "true"
		case PropTraceContext:
			m.TraceContext = p.Value
		case PropReconsumeTime:
			if n, err := strconv.ParseInt(p.Value, 10, 32); err == nil {
				m.ReconsumeTimes = int32(n)
			}
		case PropCheckImmunity:
			if n, err := strconv.ParseInt(p.Value, 10, 64); err == nil {
				m.TxRecovery = time.Duration(n) * time.Second
			}
		case PropRealTopic, PropRetryTopic:
			m.Topic = p.Value
		case PropDLQOriginTopic:
			d.DLQOriginTopic = p.Value
		case PropDLQOriginID:
			d.DLQOriginID = p.Value
		default:
			if reserved[p.Key] {
				continue
			}
			if m.Properties == nil {
				m.Properties = make(map[string]string, 4)
			}
			m.Properties[p.Key] = p.Value
		}
	}
	if keysList != "" {
		m.Keys = strings.Split(keysList, "\x1f")
	}
	m.Type = m.ActualType()
	return d
}
