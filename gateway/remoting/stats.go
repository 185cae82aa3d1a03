package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/storage/message"
)

// The admin views classic tools read from a broker (mqadmin topicStatus,
// consumerProgress, consumerConnection, producerConnection,
// consumerStatus; the RocketMQ dashboard), answered from the same store
// and client registry as everything else.
const (
	reqGetTopicStatsInfo         = 202
	reqGetConsumerConnectionList = 203
	reqGetProducerConnectionList = 204
	reqGetConsumeStats           = 208
	reqGetConsumerRunningInfo    = 307
	reqGetTopicsByCluster        = 224
	reqQueryTopicConsumeByWho    = 300
	reqQueryTopicsByConsumer     = 343
	reqConsumeMessageDirectly    = 309
)

// topicStats answers GET_TOPIC_STATS_INFO: each queue's min and max
// offsets and the store time of its last message (TopicStatsTable).
func (s *Server) topicStats(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	topic := f.str("topic", true)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	t, err := s.cl.ExistingTopic(ctx, topic)
	if err != nil {
		return s.fail(ctx, err)
	}
	type topicOffset struct {
		LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
		MaxOffset           int64 `json:"maxOffset"`
		MinOffset           int64 `json:"minOffset"`
	}
	body := mqTable(`{"offsetTable":`, s.cfg.BrokerName, int(t.Queues), func(i int) (string, int32, any) {
		q := int32(i)
		lo, hi := s.cl.QueueRange(t.Name, q)
		var last int64
		if hi > lo {
			last, _ = s.cl.StoreTimeAt(t.Name, q, hi-1)
		}
		return t.Name, q, topicOffset{last, hi, lo}
	})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// consumeStats answers GET_CONSUME_STATS: for each queue of the topic (or
// of every topic the group consumes) the queue's end, the group's
// position and the store time of the last message it consumed
// (ConsumeStats), and the rate at which the group was given messages over
// the last minute (consumeTps, from the runtime sampler).
func (s *Server) consumeStats(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group := f.str("consumerGroup", true)
	topic := f.str("topic", false)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	stats, err := s.b.ConsumeStats(ctx, group, topic)
	if err != nil {
		return s.fail(ctx, err)
	}
	type offsetWrapper struct {
		BrokerOffset   int64 `json:"brokerOffset"`
		ConsumerOffset int64 `json:"consumerOffset"`
		LastTimestamp  int64 `json:"lastTimestamp"`
		PullOffset     int64 `json:"pullOffset"`
	}
	tps := s.rt.consumeTps(s.cfg.Clock.Now(), s.b.DeliveredCounts(), group, topic)
	body := mqTable(`{"consumeTps":`+jsonDouble(tps)+`,"offsetTable":`, s.cfg.BrokerName, len(stats), func(i int) (string, int32, any) {
		st := stats[i]
		return st.Topic, st.QueueID, offsetWrapper{st.BrokerOffset, st.ConsumerOffset, st.LastTimestamp, st.ConsumerOffset}
	})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// jsonDouble formats f as fastjson writes a Java double: with a decimal
// point, also when integral (0.0, 12.0, 12.5).
func jsonDouble(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// connection is one client connection in a ConsumerConnection or
// ProducerConnection body.
type connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

func connectionsOf(ms []member) []connection {
	out := make([]connection, 0, len(ms))
	for _, m := range ms {
		lang := m.language
		if lang == "" {
			lang = "OTHER"
		}
		out = append(out, connection{ClientAddr: m.conn.clientAddr(), ClientID: m.clientID, Language: lang, Version: m.version})
	}
	return out
}

// consumerConnections answers GET_CONSUMER_CONNECTION_LIST: the group's
// connected consumers, their subscriptions and consumption settings (as
// the most recent heartbeat stated them); CONSUMER_NOT_ONLINE when none is
// connected.
func (s *Server) consumerConnections(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	ms, bad := s.membersOf(req, "consumerGroup", true)
	if bad != nil {
		return bad
	}
	if len(ms) == 0 {
		return &codec.Command{Code: codeConsumerNotOnline, Remark: "the consumer group[" + req.Ext["consumerGroup"] + "] not online"}
	}
	latest := ms[0]
	subs := map[string]json.RawMessage{}
	for _, m := range ms {
		if m.seen.After(latest.seen) {
			latest = m
		}
	}
	for topic, sd := range latest.subs {
		v, err := json.Marshal(struct {
			ClassFilterMode bool            `json:"classFilterMode"`
			CodeSet         json.RawMessage `json:"codeSet"`
			ExpressionType  string          `json:"expressionType"`
			SubString       string          `json:"subString"`
			SubVersion      json.RawMessage `json:"subVersion"`
			TagsSet         json.RawMessage `json:"tagsSet"`
			Topic           string          `json:"topic"`
		}{false, orEmpty(sd.CodeSet, "[]"), orText(sd.ExpressionType, "TAG"), sd.SubString, orEmpty(sd.SubVersion, "0"), orEmpty(sd.TagsSet, "[]"), topic})
		if err != nil {
			return s.fail(ctx, err)
		}
		subs[topic] = v
	}
	body, err := json.Marshal(struct {
		ConnectionSet     []connection               `json:"connectionSet"`
		ConsumeFromWhere  string                     `json:"consumeFromWhere,omitempty"`
		ConsumeType       string                     `json:"consumeType,omitempty"`
		MessageModel      string                     `json:"messageModel,omitempty"`
		SubscriptionTable map[string]json.RawMessage `json:"subscriptionTable"`
	}{connectionsOf(ms), latest.from, latest.consumeType, latest.model, subs})
	if err != nil {
		return s.fail(ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

func orEmpty(v json.RawMessage, def string) json.RawMessage {
	if len(bytes.TrimSpace(v)) == 0 || string(v) == "null" {
		return json.RawMessage(def)
	}
	return v
}

func orText(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// producerConnections answers GET_PRODUCER_CONNECTION_LIST: the group's
// connected producers (SYSTEM_ERROR when none, as upstream).
func (s *Server) producerConnections(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	ms, bad := s.membersOf(req, "producerGroup", false)
	if bad != nil {
		return bad
	}
	if len(ms) == 0 {
		return &codec.Command{Code: codeSystemError, Remark: "the producer group[" + req.Ext["producerGroup"] + "] not exist"}
	}
	body, err := json.Marshal(struct {
		ConnectionSet []connection `json:"connectionSet"`
	}{connectionsOf(ms)})
	if err != nil {
		return s.fail(ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

// consumerRunningInfo answers GET_CONSUMER_RUNNING_INFO by asking the
// consumer itself (the same request, forwarded to its connection) and
// relaying its answer, as upstream's brokers do.
func (s *Server) consumerRunningInfo(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	return s.callConsumer(ctx, req, req.Ext, req.Body)
}

// consumeMessageDirectly answers CONSUME_MESSAGE_DIRECTLY (mqadmin
// consumeMessage, the dashboard's "consume again"): the message msgId
// names (an offset message id) is handed to the named consumer, which runs
// it through its listener, and its ConsumeMessageDirectlyResult comes
// back. The group's offsets do not move.
func (s *Server) consumeMessageDirectly(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	id := f.str("msgId", true)
	if r := f.failed(); r != nil {
		return r
	}
	_, phys, err := wire.ParseOffsetMsgID(id)
	if err != nil {
		return &codec.Command{Code: codeInvalidParameter, Remark: err.Error()}
	}
	m, err := s.cl.ReadAt(phys)
	if err != nil {
		return s.fail(ctx, err)
	}
	ext := make(map[string]string, len(req.Ext)+1)
	for k, v := range req.Ext {
		ext[k] = v
	}
	ext["brokerName"] = s.cfg.BrokerName
	return s.callConsumer(ctx, req, ext, s.appendRecords(nil, c, []*message.Message{m}))
}

// callConsumer forwards req (with ext and body) to the connection of the
// consumer its consumerGroup and clientId name, and relays the answer.
func (s *Server) callConsumer(ctx context.Context, req *codec.Command, ext map[string]string, body []byte) *codec.Command {
	id := req.Ext["clientId"]
	if id == "" {
		return invalid("header field clientId is required")
	}
	ms, bad := s.membersOf(req, "consumerGroup", true)
	if bad != nil {
		return bad
	}
	group := req.Ext["consumerGroup"]
	var target *conn
	for _, m := range ms {
		if m.clientID == id {
			target = m.conn
		}
	}
	if target == nil {
		return &codec.Command{Code: codeSystemError, Remark: "The Consumer <" + group + "> <" + id + "> not online"}
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	resp, err := s.call(ctx, target, req.Code, ext, body)
	if err != nil {
		return &codec.Command{Code: codeSystemError, Remark: "invoke consumer <" + id + "> failed: " + err.Error()}
	}
	return &codec.Command{Code: resp.Code, Remark: resp.Remark, Ext: resp.Ext, Body: resp.Body}
}

// sortedUnion merges name lists into one sorted list without duplicates.
func sortedUnion(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	if out == nil {
		return []string{} // a JSON list, never null
	}
	return slices.Compact(out)
}

// topicConsumers answers QUERY_TOPIC_CONSUME_BY_WHO: the groups that
// consume a topic (committed offsets, POP receives, or a connected member
// subscribed to it) as a GroupList.
func (s *Server) topicConsumers(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	topic := f.str("topic", true)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	gs, err := s.b.TopicGroups(ctx, topic)
	if err != nil {
		return s.fail(ctx, err)
	}
	body, _ := json.Marshal(struct {
		GroupList []string `json:"groupList"`
	}{sortedUnion(gs, s.reg.subscribers(topic))})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// consumerTopics answers QUERY_TOPICS_BY_CONSUMER: the topics a group
// consumes, as a TopicList naming this broker.
func (s *Server) consumerTopics(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	group := f.str("group", true)
	if r := f.failed(); r != nil {
		return r
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	ts, err := s.b.GroupTopics(ctx, group)
	if err != nil {
		return s.fail(ctx, err)
	}
	body, _ := json.Marshal(struct {
		TopicList  []string `json:"topicList"`
		BrokerAddr string   `json:"brokerAddr"`
	}{sortedUnion(ts, s.reg.subscribedTopics(group)), s.advertised(c)})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// clusterTopics answers GET_TOPICS_BY_CLUSTER (NameServer): every topic
// for this listener's cluster, and, as upstream answers a cluster it does
// not know, an empty list for any other.
func (s *Server) clusterTopics(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	cluster := f.str("cluster", true)
	if r := f.failed(); r != nil {
		return r
	}
	names := []string{}
	if cluster == s.cfg.ClusterName {
		var bad *codec.Command
		if names, bad = s.topicNames(ctx); bad != nil {
			return bad
		}
	}
	body, _ := json.Marshal(struct {
		TopicList []string `json:"topicList"`
	}{names})
	return &codec.Command{Code: codeSuccess, Body: body}
}

// membersOf returns the registered members of the group the header field
// names (consumers or producers), or the INVALID_PARAMETER answer when
// the field is missing.
func (s *Server) membersOf(req *codec.Command, field string, consumers bool) ([]member, *codec.Command) {
	f := fields{req: req}
	group := f.str(field, true)
	if r := f.failed(); r != nil {
		return nil, r
	}
	return s.reg.groupMembers(group, consumers), nil
}
