package remoting

import (
	"context"
	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// sendBack is CONSUMER_SEND_MSG_BACK. Go v2.1.2 ignores the answer's code
// (only a transport error makes it retry locally), so the broker creates
// whatever is missing instead of refusing (trap 17); a message that cannot
// be found is the only refusal, and it is logged.
func (s *Server) sendBack(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	phys := f.int64("offset", true, 0)
	group := f.str("group", true)
	level := f.int32("delayLevel", false, 0)
	maxRe := f.int32("maxReconsumeTimes", false, -1)
	origin := f.str("originMsgId", false)
	if r := f.failed(); r != nil {
		return r
	}
	// upstream honours the header's maxReconsumeTimes for clients newer
	// than V3_4_9 (every real client); older ones get the group's.
	if req.Version < 121 {
		maxRe = -1
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	res, err := s.cl.SendBack(ctx, broker.SendBack{Phys: phys, Group: group, DelayLevel: int(level), MaxReconsumeTimes: maxRe, OriginMsgID: origin})
	if err != nil {
		s.log.Warn("remoting: send-back refused; the client will not redeliver this message", "group", group, "offset", phys, "err", err)
		return s.fail(ctx, err)
	}
	if res.DeadLettered {
		s.log.Info("remoting: message moved to the dead-letter queue", "group", group, "dlq", res.Topic, "reconsume_times", res.ReconsumeTimes)
	}
	return ok()
}
