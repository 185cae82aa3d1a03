package remoting

import (
	"context"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// PullSysFlag bits.
const (
	pullCommitOffset = 1
	pullSuspend      = 2
	pullSubscription = 4
)

// Pull batch caps: a client asks for up to 32 by default.
const (
	maxPullMsgs  = 64
	maxPullBytes = 4 << 20
)

var pullStatusNames = [...]string{
	broker.PullFound:   "FOUND",
	broker.PullNoNew:   "NO_NEW_MSG",
	broker.PullNoMatch: "NO_MATCHED_MSG",
	broker.PullMoved:   "OFFSET_ILLEGAL",
}

var pullStatusCodes = [...]int32{
	broker.PullFound:   codeSuccess,
	broker.PullNoNew:   codePullNotFound,
	broker.PullNoMatch: codePullRetryImmediately,
	broker.PullMoved:   codePullOffsetMoved,
}

func (s *Server) pull(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group := f.str("consumerGroup", true)
	topicName := f.str("topic", true)
	queue := f.int32("queueId", true, 0)
	offset := f.int64("queueOffset", true, 0)
	maxNums := f.int32("maxMsgNums", false, 32)
	sysFlag := f.int32("sysFlag", false, pullSuspend)
	commit := f.int64("commitOffset", false, -1)
	suspend := f.int64("suspendTimeoutMillis", false, 15000)
	subExpr, subType := f.str("subscription", false), f.str("expressionType", false)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	t, bad := s.groupQueue(ctx, group, topicName, queue)
	if bad != nil {
		return bad
	}
	c.notePull(group, t.Name)
	// The subscription: from the request when it says so, else what the
	// group's heartbeat registered; lenient "*" when the group has none
	// for this topic (Go does not handle SUBSCRIPTION_NOT_EXIST).
	if sysFlag&pullSubscription == 0 {
		subExpr, subType = "*", "TAG"
		if sd, ok := s.reg.subscription(group, topicName); ok {
			subExpr, subType = sd.SubString, sd.ExpressionType
		}
	}
	filter, err := parseFilter(subExpr, subType)
	if err != nil {
		return &codec.Command{Code: codeSubscriptionParseFailed, Remark: err.Error()}
	}
	if sysFlag&pullCommitOffset != 0 && commit >= 0 {
		s.cl.CommitOffset(group, t.Name, queue, commit)
	}
	var wait time.Duration
	if sysFlag&pullSuspend != 0 {
		wait = min(time.Duration(max(suspend, 0))*time.Millisecond, s.cfg.MaxPullWait)
	}
	// The long poll is bounded by wait, not by the request timeout.
	res, err := s.cl.Pull(c.ctx, broker.ClassicPullRequest{Group: group, Topic: t, QueueID: queue, Offset: offset,
		Max: int(max(1, min(maxNums, maxPullMsgs))), MaxBytes: maxPullBytes, Filter: filter, Wait: wait})
	if err != nil {
		return s.fail(ctx, err)
	}
	resp := &codec.Command{Code: pullStatusCodes[res.Status], Remark: pullStatusNames[res.Status], Ext: map[string]string{
		"nextBeginOffset":      itoa(res.Next),
		"minOffset":            itoa(res.Min),
		"maxOffset":            itoa(res.Max),
		"suggestWhichBrokerId": "0",
		"topicSysFlag":         "0",
		"groupSysFlag":         "0",
	}}
	if res.Status == broker.PullFound {
		resp.Body = s.appendRecords(nil, c, res.Records)
	}
	return resp
}

func (s *Server) queryConsumerOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group, topic, queue := f.str("consumerGroup", true), f.str("topic", true), f.int32("queueId", true, 0)
	if r := f.failed(); r != nil {
		return r
	}
	if off, found := s.cl.CommittedOffset(group, topic, queue); found {
		return &codec.Command{Code: codeSuccess, Ext: map[string]string{"offset": itoa(off)}}
	}
	// A new group on a queue nothing was trimmed from starts at 0, or
	// "produce, then start a consumer with defaults" loses messages
	// (trap 14).
	lo, _ := s.cl.QueueRange(topic, queue)
	if req.Get("setZeroIfNotFound") != "false" && lo == 0 {
		return &codec.Command{Code: codeSuccess, Ext: map[string]string{"offset": "0"}}
	}
	return &codec.Command{Code: codeQueryNotFound, Remark: "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"}
}

func (s *Server) updateConsumerOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group, topic := f.str("consumerGroup", true), f.str("topic", true)
	queue, off := f.int32("queueId", true, 0), f.int64("commitOffset", true, 0)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	t, bad := s.groupQueue(ctx, group, topic, queue)
	if bad != nil {
		return bad
	}
	if off < 0 {
		return invalid("commitOffset %d is negative", off)
	}
	s.cl.CommitOffset(group, t.Name, queue, off)
	return ok()
}

// groupQueue resolves what a pull or an offset commit names: the group
// (created on first sight), an existing topic and one of its queues.
func (s *Server) groupQueue(ctx context.Context, group, topic string, queue int32) (model.Topic, *codec.Command) {
	if _, err := s.cl.EnsureGroup(ctx, group); err != nil {
		return model.Topic{}, s.fail(ctx, err)
	}
	t, err := s.cl.ExistingTopic(ctx, topic)
	if err != nil {
		return model.Topic{}, s.fail(ctx, err)
	}
	if queue < 0 || queue >= t.Queues {
		return model.Topic{}, invalid("queueId %d is outside 0..%d of topic %s", queue, t.Queues-1, t.Name)
	}
	return t, nil
}

func (s *Server) queueFields(req *codec.Command) (string, int32, *codec.Command) {
	f := fields{req: req}
	topic, queue := f.str("topic", true), f.int32("queueId", true, 0)
	return topic, queue, f.failed()
}

// Unknown topics and queues answer offset 0 (upstream's store does).
func (s *Server) maxOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	topic, queue, r := s.queueFields(req)
	if r != nil {
		return r
	}
	_, hi := s.cl.QueueRange(topic, queue)
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"offset": itoa(hi)}}
}

func (s *Server) minOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	topic, queue, r := s.queueFields(req)
	if r != nil {
		return r
	}
	lo, _ := s.cl.QueueRange(topic, queue)
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"offset": itoa(lo)}}
}

func (s *Server) searchOffset(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	topic, queue, ts := f.str("topic", true), f.int32("queueId", true, 0), f.int64("timestamp", true, 0)
	upper := strings.EqualFold(f.str("boundaryType", false), "upper")
	if r := f.failed(); r != nil {
		return r
	}
	lo, hi := s.cl.QueueRange(topic, queue)
	var off int64
	var err error
	if upper {
		// The last offset stored at or before ts.
		off, err = s.cl.OffsetForTime(topic, queue, ts+1)
		off = max(off-1, lo)
	} else {
		off, err = s.cl.OffsetForTime(topic, queue, ts)
	}
	if err != nil {
		return s.fail(c.ctx, err)
	}
	off = min(max(off, lo), hi)
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"offset": itoa(off)}}
}

func (s *Server) earliestStoreTime(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	topic, queue, r := s.queueFields(req)
	if r != nil {
		return r
	}
	lo, hi := s.cl.QueueRange(topic, queue)
	if hi == lo {
		return &codec.Command{Code: codeSuccess, Ext: map[string]string{"timestamp": "0"}}
	}
	ms, err := s.cl.StoreTimeAt(topic, queue, lo)
	if err != nil && mqerr.KindOf(err) != mqerr.KindMessageNotFound {
		return s.fail(c.ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"timestamp": itoa(ms)}}
}
