package remoting

import (
	"context"
	"strconv"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// sendBack is CONSUMER_SEND_MSG_BACK. Go v2.1.2 ignores the answer's code
// (only a transport error makes it retry locally), so the broker creates
// whatever is missing instead of refusing (trap 17); the refusals are
// logged.
//
// The request names the message by its commit-log offset only, and the
// copy lands in the group's retry or dead-letter topic, which the group's
// users read: so a send-back is accepted only for a message that starts
// at that offset, in a topic the group consumes (consumes), and, with
// auth on, that the caller may consume (sendBackAccess, checked before).
// An offset where no message starts is answered as upstream answers it
// (SYSTEM_ERROR, "look message by offset failed"), a message of a topic
// the group does not consume NO_PERMISSION.
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
	rec, err := s.cl.ReadAt(phys)
	if err == nil && metadata.IsSystemTopic(rec.Topic) {
		err = mqerr.Errorf(mqerr.KindMessageNotFound, "commit-log offset %d holds a system record", phys)
	}
	if err != nil {
		s.log.Warn("remoting: send-back refused; the client will not redeliver this message", c.logArgs("group", group, "offset", phys, "err", err)...)
		if mqerr.KindOf(err) == mqerr.KindMessageNotFound {
			return &codec.Command{Code: codeSystemError, Remark: "look message by offset failed, " + strconv.FormatInt(phys, 10)}
		}
		return s.fail(ctx, err)
	}
	if !s.consumes(c, group, rec.Topic) {
		err := mqerr.Errorf(mqerr.KindForbidden, "consumer group %q does not consume topic %q: only a message of a topic the group subscribes to or pulls, or of its retry or dead-letter topic, can be sent back", group, rec.Topic)
		s.log.Warn("remoting: send-back refused", c.logArgs("group", group, "offset", phys, "err", err)...)
		return s.fail(ctx, err)
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	res, err := s.cl.SendBack(ctx, broker.SendBack{Phys: phys, Group: group, DelayLevel: int(level), MaxReconsumeTimes: maxRe, OriginMsgID: origin})
	if err != nil {
		s.log.Warn("remoting: send-back refused; the client will not redeliver this message", c.logArgs("group", group, "offset", phys, "err", err)...)
		return s.fail(ctx, err)
	}
	if res.DeadLettered {
		s.log.Info("remoting: message moved to the dead-letter queue", "group", group, "dlq", res.Topic, "reconsume_times", res.ReconsumeTimes)
	}
	return ok()
}

// consumes reports whether group consumes topic: a connected member of
// the group subscribes to it (HEART_BEAT), the group pulled it on c, or
// the broker knows it (the group's retry and dead-letter topics,
// committed offsets, POP).
func (s *Server) consumes(c *conn, group, topic string) bool {
	if _, ok := s.reg.subscription(group, topic); ok {
		return true
	}
	return c.hasPulled(group, topic) || s.cl.GroupConsumes(group, topic)
}
