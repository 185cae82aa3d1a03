package remoting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Topic attributes mqgate understands; upstream's others are accepted and
// not stored.
var knownAttributes = map[string]bool{"message.type": true, "queue.type": true, "cleanup.policy": true, "reserve.time": true}

// parseAttributes applies an attribute modification string ("+k=v,-k")
// to the message type (the one attribute mqgate stores). create allows
// only "+" entries.
func parseAttributes(s string, create bool, cur model.TopicType) (model.TopicType, error) {
	if strings.TrimSpace(s) == "" {
		return cur, nil
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if len(item) < 2 || (item[0] != '+' && item[0] != '-') {
			return cur, fmt.Errorf("attribute %q must start with + or -", item)
		}
		sign, body := item[0], item[1:]
		key, val, hasVal := strings.Cut(body, "=")
		if key == "" || strings.ContainsAny(key, "+-=") || strings.ContainsAny(val, "+-=") {
			return cur, fmt.Errorf("attribute %q is malformed", item)
		}
		if seen[key] {
			return cur, fmt.Errorf("attribute %q is given twice", key)
		}
		seen[key] = true
		if !knownAttributes[key] {
			return cur, fmt.Errorf("unknown attribute %q", key)
		}
		switch {
		case sign == '-' && create:
			return cur, fmt.Errorf("attribute %q cannot be deleted when the topic is created", key)
		case sign == '+' && !hasVal:
			return cur, fmt.Errorf("attribute %q needs a value", key)
		case sign == '-' && hasVal:
			return cur, fmt.Errorf("attribute deletion %q takes no value", item)
		}
		if key != "message.type" {
			continue
		}
		if sign == '-' {
			cur = model.TopicNormal
			continue
		}
		if strings.EqualFold(val, "UNSPECIFIED") {
			cur = model.TopicNormal
			continue
		}
		t, err := model.ParseTopicType(val)
		if err != nil {
			return cur, err
		}
		cur = t
	}
	return cur, nil
}

func (s *Server) updateTopic(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	name := f.str("topic", true)
	read := f.int32("readQueueNums", false, 8)
	write := f.int32("writeQueueNums", false, 8)
	perm := f.int32("perm", false, permRead|permWrite)
	attrs := f.str("attributes", false)
	if r := f.failed(); r != nil {
		s.log.Warn("remoting: topic create/update refused", "topic", name, "reason", r.Remark)
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	cur, err := s.b.GetTopic(ctx, name)
	exists := err == nil
	if err != nil && mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		s.log.Warn("remoting: topic create/update refused", "topic", name, "err", err)
		return s.fail(ctx, err)
	}
	typ := model.TopicNormal
	if exists {
		typ = cur.Type
	}
	if typ, err = parseAttributes(attrs, !exists, typ); err != nil {
		// Go admin ignores this answer: the log is the user's only clue (trap 27).
		s.log.Warn("remoting: topic create/update refused", "topic", name, "attributes", attrs, "err", err)
		return invalid("attributes %q: %v", attrs, err)
	}
	t := model.Topic{Name: name, Type: typ, Queues: max(read, write), Perm: permFrom(perm)}
	if _, created, err := s.cl.PutTopic(ctx, t); err != nil {
		s.log.Warn("remoting: topic create/update refused", "topic", name, "err", err)
		return s.fail(ctx, err)
	} else if created {
		s.log.Info("remoting: topic created", "topic", name, "queues", t.Queues, "type", t.Type.String())
	}
	return ok()
}

type topicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

type dataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

func (s *Server) allTopicConfig(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	ts, err := s.b.ListTopics(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	table := make(map[string]topicConfig, len(ts))
	for _, t := range ts {
		table[t.Name] = topicConfig{TopicName: t.Name, ReadQueueNums: t.Queues, WriteQueueNums: t.Queues, Perm: permOf(t.Perm),
			TopicFilterType: "SINGLE_TAG", Order: t.Type == model.TopicFIFO, Attributes: map[string]string{"message.type": t.Type.String()}}
	}
	body, err := json.Marshal(map[string]any{
		"topicConfigTable":           table,
		"dataVersion":                dataVersion{Timestamp: s.cfg.Clock.Now().UnixMilli(), Counter: int64(len(ts))},
		"topicQueueMappingInfoMap":   map[string]any{},
		"topicQueueMappingDetailMap": map[string]any{},
	})
	if err != nil {
		return s.fail(ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body, Ext: map[string]string{"totalTopicNum": itoa(int64(len(ts)))}}
}

// deleteTopic answers DELETE_TOPIC_IN_BROKER and its second half,
// DELETE_TOPIC_IN_NAMESRV (215 then 216): with one process both are the
// same deletion, so a topic already gone is fine.
func (s *Server) deleteTopic(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	name := f.str("topic", true)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	if err := s.b.DeleteTopic(ctx, name); err != nil && mqerr.KindOf(err) != mqerr.KindTopicNotFound {
		return s.fail(ctx, err)
	}
	return ok()
}

// subscriptionGroupConfig is upstream's SubscriptionGroupConfig (the
// members mqgate maps; others are accepted and reported with defaults).
type subscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32  `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int32  `json:"consumeTimeoutMinute"`
}

func groupConfigOf(g model.Group) subscriptionGroupConfig {
	return subscriptionGroupConfig{GroupName: g.Name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		ConsumeMessageOrderly: g.FIFO, RetryQueueNums: 1, RetryMaxTimes: g.MaxDeliveryAttempts - 1, WhichBrokerWhenConsumeSlowly: 1,
		NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15}
}

func (s *Server) updateGroup(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	cfg := subscriptionGroupConfig{RetryMaxTimes: -1}
	if err := json.Unmarshal(req.Body, &cfg); err != nil {
		return invalid("SubscriptionGroupConfig body is not JSON: %v", err)
	}
	if err := metadata.ValidateGroupName(cfg.GroupName); err != nil {
		return invalid("%s", mqerr.Message(err))
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	g := model.Group{Name: cfg.GroupName, FIFO: cfg.ConsumeMessageOrderly, Retry: model.DefaultRetryPolicy()}
	if cur, err := s.b.GetGroup(ctx, cfg.GroupName); err == nil {
		g.Retry, g.MaxDeliveryAttempts = cur.Retry, cur.MaxDeliveryAttempts
	}
	if cfg.RetryMaxTimes >= 0 {
		// retryMaxTimes counts redeliveries; gRPC's max attempts count
		// deliveries.
		g.MaxDeliveryAttempts = cfg.RetryMaxTimes + 1
	}
	if _, err := s.cl.PutGroup(ctx, g); err != nil {
		return s.fail(ctx, err)
	}
	return ok()
}

func (s *Server) allGroupConfig(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	gs, err := s.b.ListGroups(ctx)
	if err != nil {
		return s.fail(ctx, err)
	}
	table := make(map[string]subscriptionGroupConfig, len(gs))
	for _, g := range gs {
		table[g.Name] = groupConfigOf(g)
	}
	body, err := json.Marshal(map[string]any{
		"subscriptionGroupTable": table,
		"dataVersion":            dataVersion{Timestamp: s.cfg.Clock.Now().UnixMilli(), Counter: int64(len(gs))},
	})
	if err != nil {
		return s.fail(ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

func (s *Server) deleteGroup(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	name := f.str("groupName", true)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	if err := s.b.DeleteGroup(ctx, name); err != nil && mqerr.KindOf(err) != mqerr.KindGroupNotFound {
		return s.fail(ctx, err)
	}
	return ok()
}
