package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/broker"
)

// reqResetConsumerClientOffset is RESET_CONSUMER_CLIENT_OFFSET (S→C): a
// running classic consumer keeps its queue offsets in memory and commits
// them every few seconds, so after a reset it is told the new ones.
const reqResetConsumerClientOffset = 220

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
					"group", ev.Group, "topic", ev.Topic, "remote", c.nc.RemoteAddr().String(), "err", err)
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

// resetOffsetBody is ResetOffsetBody as upstream's brokers write it
// (fastjson): a map keyed by MessageQueue objects, which is not JSON:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,...}}
//
// Java's client reads it with fastjson; the Go client parses this form
// whenever the body is not valid JSON. Topic and broker names are
// restricted to [%|a-zA-Z0-9_-], so nothing needs escaping beyond what
// encoding/json does.
func resetOffsetBody(brokerName, topic string, queues []broker.QueueReset) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"offsetTable":{`)
	for i, q := range queues {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, _ := json.Marshal(struct {
			BrokerName string `json:"brokerName"`
			QueueID    int32  `json:"queueId"`
			Topic      string `json:"topic"`
		}{brokerName, q.QueueID, topic})
		buf.Write(key)
		buf.WriteByte(':')
		buf.WriteString(strconv.FormatInt(q.Offset, 10))
	}
	buf.WriteString(`}}`)
	return buf.Bytes()
}
