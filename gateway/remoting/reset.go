package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// reqResetConsumerClientOffset is RESET_CONSUMER_CLIENT_OFFSET (S→C): a
// running classic consumer keeps its queue offsets in memory and commits
// them every few seconds, so after a reset it is told the new ones.
const reqResetConsumerClientOffset = 220

// reqInvokeBrokerToResetOffset is INVOKE_BROKER_TO_RESET_OFFSET (C→S):
// an admin tool's reset of a group's offsets in a topic (mqadmin
// resetOffsetByTime).
const reqInvokeBrokerToResetOffset = 222

// resetOffset answers INVOKE_BROKER_TO_RESET_OFFSET with the broker's
// ResetOffset: the move is made here, durable before the answer, and
// connected consumers are told through OffsetsReset. (Upstream's brokers
// by default only forward the table to the consumers, which commit it
// themselves, and refuse with CONSUMER_NOT_ONLINE when none is connected;
// here the offsets move whether or not a consumer is connected.)
//
// Header: topic, group, timestamp (ms; -1 the end of each queue),
// isForce (false: a queue moves only back, see broker RewindOnly),
// optional queueId (≥ 0: that queue only) and offset (with queueId: an
// exact offset instead of a time). The answer's body is the offset table
// (ResetOffsetBody), each queue at its new position or, when kept, at
// its current one.
func (s *Server) resetOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	r := broker.ResetOffsetRequest{Topic: f.str("topic", true), Group: f.str("group", true), RewindOnly: !f.bool("isForce")}
	ts := f.int64("timestamp", true, 0)
	if q := f.int32("queueId", false, -1); q >= 0 {
		r.Queue = &q
	}
	switch off := f.int64("offset", false, -1); {
	case req.Ext["offset"] != "" && off >= 0 && r.Queue != nil:
		r.To, r.Offset = broker.ResetToOffset, off
	case req.Ext["offset"] != "" && off >= 0:
		f.bad("offset", "needs queueId")
	case req.Ext["offset"] != "":
		f.bad("offset", "must not be negative")
	case ts == -1:
		r.To = broker.ResetToLatest
	case ts >= 0:
		r.To, r.Time = broker.ResetToTime, time.UnixMilli(ts)
	default:
		f.bad("timestamp", "must be a time in milliseconds, or -1 for the end of each queue")
	}
	if bad := f.failed(); bad != nil {
		return bad
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	out, err := s.b.ResetOffset(ctx, r)
	if err != nil {
		return s.fail(ctx, err)
	}
	resp := ok()
	resp.Body = resetOffsetBody(s.cfg.BrokerName, r.Topic, out)
	return resp
}

// OffsetsReset implements broker.ResetListener: every connected consumer
// of the group that subscribes to the topic gets RESET_CONSUMER_CLIENT_OFFSET
// (oneway, as upstream's clients answer none) with the new offset of each
// queue. Without it a running push consumer would go on from its old
// positions and commit them over the reset. The sends run on the server's
// goroutine group: a slow client must not hold up the admin call.
func (s *Server) OffsetsReset(ev broker.OffsetsReset) {
	if s.group == nil || s.draining.Load() { // not started, or stopping
		return
	}
	conns := s.reg.consumerConns(ev.Group, ev.Topic)
	if len(conns) == 0 {
		return
	}
	body := resetOffsetBody(s.cfg.BrokerName, ev.Topic, ev.Queues)
	ext := map[string]string{
		"topic":     ev.Topic,
		"group":     ev.Group,
		"timestamp": strconv.FormatInt(resetTimestamp(ev, s.cfg.Clock.Now()), 10),
		"isForce":   "true",
	}
	_ = s.group.Go("reset-offset-notify", func(context.Context) {
		for _, c := range conns {
			if err := s.request(c, reqResetConsumerClientOffset, ext, body); err != nil {
				s.log.Warn("remoting: telling a consumer of an offset reset failed; it may commit its old offsets",
					c.logArgs("group", ev.Group, "topic", ev.Topic, "err", err)...)
			}
		}
	})
}

// resetTimestamp is the header's timestamp (ms): the time reset to, 0 for
// the earliest message, now for the latest. Clients only log it.
func resetTimestamp(ev broker.OffsetsReset, now time.Time) int64 {
	switch ev.To {
	case broker.ResetToTime:
		return ev.Time.UnixMilli()
	case broker.ResetToLatest:
		return now.UnixMilli()
	}
	return 0
}

// resetOffsetBody is ResetOffsetBody as upstream's brokers write it: the
// new offset of each queue, in a table keyed by MessageQueue (mqTable).
func resetOffsetBody(brokerName, topic string, queues []broker.QueueReset) []byte {
	return mqTable(`{"offsetTable":`, brokerName, len(queues), func(i int) (string, int32, any) {
		return topic, queues[i].QueueID, queues[i].Offset
	})
}

// mqTable writes a body whose field is a map keyed by MessageQueue
// objects, as upstream's brokers write it with fastjson, which is not
// JSON:
//
//	<head>{{"brokerName":"b","queueId":0,"topic":"T"}:<value>,...}}
//
// head opens the body up to the map ({"offsetTable":); entry gives the
// i-th queue and its value (marshalled with encoding/json). Java's
// clients and tools read this form with fastjson; the Go client parses it
// whenever a body is not valid JSON. Topic and broker names are
// restricted to [%|a-zA-Z0-9_-], so nothing needs escaping beyond what
// encoding/json does.
func mqTable(head, brokerName string, n int, entry func(i int) (topic string, queue int32, value any)) []byte {
	var buf bytes.Buffer
	buf.WriteString(head)
	buf.WriteByte('{')
	for i := range n {
		topic, queue, value := entry(i)
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := json.Marshal(struct {
			BrokerName string `json:"brokerName"`
			QueueID    int32  `json:"queueId"`
			Topic      string `json:"topic"`
		}{brokerName, queue, topic})
		v, _ := json.Marshal(value)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteString(`}}`)
	return buf.Bytes()
}
