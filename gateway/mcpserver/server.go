package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// Options configure the server.
type Options struct {
	// Conn reaches the admin and messaging services (the gRPC port, or
	// the gRPC server in process).
	Conn grpc.ClientConnInterface
	// Version is mqgate's, reported to clients.
	Version string
	Logger  *slog.Logger
	// RateWindow is how long describe_topic and describe_group measure
	// rates over (default 1 s).
	RateWindow time.Duration
	// CallTimeout bounds each admin call (default 10 s).
	CallTimeout time.Duration
}

// Names of the tools, as clients call them.
const (
	ToolListTopics    = "list_topics"
	ToolDescribeTopic = "describe_topic"
	ToolListGroups    = "list_groups"
	ToolDescribeGroup = "describe_group"
	ToolTopicRoute    = "topic_route"
	ToolFindMessage   = "find_message"
	ToolDiagnoseGroup = "diagnose_group"
	ToolCluster       = "cluster_status"
)

// NewServer returns an MCP server offering the diagnostics tools over
// o.Conn.
func NewServer(o Options) *mcp.Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RateWindow <= 0 {
		o.RateWindow = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	t := &tools{o: o, admin: adminv1.NewAdminServiceClient(o.Conn), rest: restv1.NewMessagingServiceClient(o.Conn)}
	s := mcp.NewServer(&mcp.Implementation{Name: "mqgate", Title: "mqgate diagnostics", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Read-only diagnostics of an mqgate messaging gateway (RocketMQ 5 compatible): topics, consumer groups " +
			"and their backlog, messages, routes, stuck consumers and the cluster. Nothing these tools do changes the gateway.",
		Logger: o.Logger,
	})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	add := func(tool *mcp.Tool) *mcp.Tool { tool.Annotations = ro; return tool }
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolListTopics, Title: "List topics",
		Description: "Lists the topics with their type, queues, messages stored, messages sent since the server started and the backlog of the groups consuming them."}), t.listTopics)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolDescribeTopic, Title: "Describe a topic",
		Description: "Describes one topic: its queues' offsets, its send rate (measured over a second), and each consumer group's progress in it (ready, in flight, held, backlog, delivery rate)."}), t.describeTopic)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolListGroups, Title: "List consumer groups",
		Description: "Lists the consumer groups with their backlog, messages in flight and dead letters pending."}), t.listGroups)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolDescribeGroup, Title: "Describe a consumer group",
		Description: "Describes one consumer group: its settings, its progress in each topic (ready, in flight, held, backlog per queue, delivery rate measured over a second) and its dead letters."}), t.describeGroup)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolTopicRoute, Title: "Route of a topic",
		Description: "The route clients get for a topic: its type, the message types it accepts, its queues and their permissions, and the endpoints serving it."}), t.topicRoute)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolFindMessage, Title: "Find a message",
		Description: "Finds stored messages by message id or by key (optionally in one topic), newest first, with their properties, state and the start of their body."}), t.findMessage)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolDiagnoseGroup, Title: "Why is a consumer group stuck",
		Description: "Explains why a consumer group does not make progress: its backlog per topic, the message it has had longest without acknowledging it (deliveries so far out of the most allowed, deadline), its dead letters, and whether any consumer of it is connected; ends with findings in plain words."}), t.diagnoseGroup)
	mcp.AddTool(s, add(&mcp.Tool{Name: ToolCluster, Title: "Cluster status",
		Description: "The cluster's members (role, health, addresses) and raft groups (leader, term, each replica's applied index, lag and last contact); a single node is one member and no group."}), t.clusterStatus)
	return s
}

type tools struct {
	o     Options
	admin adminv1.AdminServiceClient
	rest  restv1.MessagingServiceClient
}

// headersKey carries the HTTP transport's signature headers to the calls.
type headersKey struct{}

// callCtx bounds a call and, for the HTTP transport, carries the
// caller's signature on to the admin API.
func (t *tools) callCtx(ctx context.Context, req *mcp.CallToolRequest) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, t.o.CallTimeout)
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		h := req.Extra.Header
		var kv []string
		for _, k := range []string{"Authorization", "X-Mq-Date-Time"} {
			if v := h.Get(k); v != "" {
				kv = append(kv, strings.ToLower(k), v)
			}
		}
		if len(kv) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		}
	}
	return ctx, cancel
}

// failure turns a call's error into the tool's error: the server's own
// message, which names what was refused or missing.
func failure(what string, err error) error {
	if st, ok := status.FromError(err); ok {
		return fmt.Errorf("%s: %s (%s)", what, st.Message(), st.Code())
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isSystemTopic(name string) bool { return strings.HasPrefix(name, "%") }

func when(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

// ---- list_topics

type empty struct{}

// TopicSummary is one topic in list_topics.
type TopicSummary struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Queues int32  `json:"queues"`
	Stored int64  `json:"stored" jsonschema:"messages its queues hold"`
	Sent   int64  `json:"sent" jsonschema:"messages stored from producers since the server started"`
	// Backlog is the sum of the groups' backlog in the topic.
	Backlog int64 `json:"backlog" jsonschema:"messages its consumer groups have not finished, summed over the groups"`
}

// TopicList is list_topics' answer.
type TopicList struct {
	Topics []TopicSummary `json:"topics"`
	// Since is when the counters began.
	Since string `json:"counting_since"`
}

func (t *tools) listTopics(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, TopicList, error) {
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	ts, err := t.admin.ListTopics(ctx, &adminv1.ListTopicsRequest{})
	if err != nil {
		return nil, TopicList{}, failure("list topics", err)
	}
	stats, err := t.admin.GetStats(ctx, &adminv1.GetStatsRequest{})
	if err != nil {
		return nil, TopicList{}, failure("read the counters", err)
	}
	byTopic := map[string]*adminv1.TopicStats{}
	for _, s := range stats.GetTopics() {
		byTopic[s.GetTopic()] = s
	}
	backlog, err := t.backlogByTopic(ctx)
	if err != nil {
		return nil, TopicList{}, err
	}
	out := TopicList{Topics: []TopicSummary{}, Since: when(stats.GetStartTime())}
	for _, tp := range ts.GetTopics() {
		if isSystemTopic(tp.GetName()) {
			continue
		}
		s := byTopic[tp.GetName()]
		out.Topics = append(out.Topics, TopicSummary{Name: tp.GetName(), Type: tp.GetType(), Queues: tp.GetQueues(),
			Stored: s.GetStored(), Sent: s.GetSent(), Backlog: backlog[tp.GetName()]})
	}
	return nil, out, nil
}

// backlogByTopic sums the visible groups' backlog per topic.
func (t *tools) backlogByTopic(ctx context.Context) (map[string]int64, error) {
	gs, err := t.admin.ListGroups(ctx, &adminv1.ListGroupsRequest{})
	if err != nil {
		return nil, failure("list consumer groups", err)
	}
	out := map[string]int64{}
	for _, g := range gs.GetGroups() {
		d, err := t.admin.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: g.GetName()})
		if err != nil {
			continue // deleted meanwhile
		}
		for _, p := range d.GetTopics() {
			out[p.GetTopic()] += p.GetBacklog()
		}
	}
	return out, nil
}

// ---- describe_topic

// TopicName names a topic.
type TopicName struct {
	Topic string `json:"topic" jsonschema:"the topic's name"`
}

// QueueRange is one queue's stored offsets.
type QueueRange struct {
	Queue     int32 `json:"queue"`
	MinOffset int64 `json:"min_offset"`
	MaxOffset int64 `json:"max_offset"`
	Messages  int64 `json:"messages"`
}

// GroupProgress is a consumer group's progress in one topic.
type GroupProgress struct {
	Group    string `json:"group,omitempty"`
	Topic    string `json:"topic,omitempty"`
	Ready    int64  `json:"ready" jsonschema:"messages never delivered to the group"`
	InFlight int64  `json:"in_flight" jsonschema:"delivered and not acknowledged"`
	Held     int64  `json:"held" jsonschema:"FIFO messages waiting behind an earlier one of their message group"`
	Backlog  int64  `json:"backlog" jsonschema:"ready + in_flight + held"`
	// LagPerQueue is each queue's ready count, by queue id.
	LagPerQueue map[string]int64 `json:"lag_per_queue,omitempty" jsonschema:"messages never delivered to the group, by queue id (queues without any left out)"`
	// DeliveredPerSecond is measured over the rate window.
	DeliveredPerSecond float64 `json:"delivered_per_second"`
}

// TopicDescription is describe_topic's answer.
type TopicDescription struct {
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	Stored         int64           `json:"stored"`
	Sent           int64           `json:"sent" jsonschema:"messages stored from producers since the server started"`
	SentPerSecond  float64         `json:"sent_per_second" jsonschema:"measured over one second"`
	SentBytes      int64           `json:"sent_bytes"`
	Queues         []QueueRange    `json:"queues"`
	Groups         []GroupProgress `json:"groups"`
	RateWindowSecs float64         `json:"rate_window_seconds"`
}

// rates reads the counters twice, the rate window apart.
func (t *tools) rates(ctx context.Context) (first, second *adminv1.GetStatsResponse, secs float64, err error) {
	first, err = t.admin.GetStats(ctx, &adminv1.GetStatsRequest{})
	if err != nil {
		return nil, nil, 0, failure("read the counters", err)
	}
	timer := time.NewTimer(t.o.RateWindow)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	second, err = t.admin.GetStats(ctx, &adminv1.GetStatsRequest{})
	if err != nil {
		return nil, nil, 0, failure("read the counters", err)
	}
	secs = second.GetTime().AsTime().Sub(first.GetTime().AsTime()).Seconds()
	if secs <= 0 || !first.GetStartTime().AsTime().Equal(second.GetStartTime().AsTime()) {
		secs = 0
	}
	return first, second, secs, nil
}

func topicRate(a, b *adminv1.GetStatsResponse, topic string, secs float64) (sent, bytes int64, rate float64) {
	var before int64
	for _, s := range a.GetTopics() {
		if s.GetTopic() == topic {
			before = s.GetSent()
		}
	}
	for _, s := range b.GetTopics() {
		if s.GetTopic() == topic {
			sent, bytes = s.GetSent(), s.GetSentBytes()
		}
	}
	if secs > 0 {
		rate = float64(max(sent-before, 0)) / secs
	}
	return sent, bytes, rate
}

func deliveredRate(a, b *adminv1.GetStatsResponse, group, topic string, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	var x, y int64
	for _, s := range a.GetSubscriptions() {
		if s.GetGroup() == group && s.GetTopic() == topic {
			x = s.GetDelivered()
		}
	}
	for _, s := range b.GetSubscriptions() {
		if s.GetGroup() == group && s.GetTopic() == topic {
			y = s.GetDelivered()
		}
	}
	return float64(max(y-x, 0)) / secs
}

func progressOf(p *adminv1.GroupTopicProgress) GroupProgress {
	g := GroupProgress{Group: p.GetGroup(), Topic: p.GetTopic(), Ready: p.GetReady(), InFlight: p.GetInFlight(), Held: p.GetHeld(), Backlog: p.GetBacklog()}
	for _, q := range p.GetQueues() {
		if q.GetReady() > 0 {
			if g.LagPerQueue == nil {
				g.LagPerQueue = map[string]int64{}
			}
			g.LagPerQueue[strconv.Itoa(int(q.GetQueueId()))] = q.GetReady()
		}
	}
	return g
}

func (t *tools) describeTopic(ctx context.Context, req *mcp.CallToolRequest, in TopicName) (*mcp.CallToolResult, TopicDescription, error) {
	if strings.TrimSpace(in.Topic) == "" {
		return nil, TopicDescription{}, errors.New("topic is required")
	}
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	d, err := t.admin.DescribeTopic(ctx, &adminv1.DescribeTopicRequest{Name: in.Topic})
	if err != nil {
		return nil, TopicDescription{}, failure("describe topic "+in.Topic, err)
	}
	a, b, secs, err := t.rates(ctx)
	if err != nil {
		return nil, TopicDescription{}, err
	}
	out := TopicDescription{Name: d.GetTopic().GetName(), Type: d.GetTopic().GetType(), Stored: d.GetMessages(), Queues: []QueueRange{},
		Groups: []GroupProgress{}, RateWindowSecs: secs}
	out.Sent, out.SentBytes, out.SentPerSecond = topicRate(a, b, in.Topic, secs)
	for _, q := range d.GetQueues() {
		out.Queues = append(out.Queues, QueueRange{Queue: q.GetQueueId(), MinOffset: q.GetMinOffset(), MaxOffset: q.GetMaxOffset(), Messages: q.GetMaxOffset() - q.GetMinOffset()})
	}
	for _, p := range d.GetGroups() {
		g := progressOf(p)
		g.Topic = ""
		g.DeliveredPerSecond = deliveredRate(a, b, p.GetGroup(), in.Topic, secs)
		out.Groups = append(out.Groups, g)
	}
	return nil, out, nil
}

// ---- list_groups

// GroupSummary is one group in list_groups.
type GroupSummary struct {
	Name                string `json:"name"`
	FIFO                bool   `json:"fifo"`
	MaxDeliveryAttempts int32  `json:"max_delivery_attempts"`
	Backlog             int64  `json:"backlog"`
	InFlight            int64  `json:"in_flight"`
	DeadLetters         int64  `json:"dead_letters_pending" jsonschema:"dead letters not redriven yet"`
}

// GroupList is list_groups' answer.
type GroupList struct {
	Groups []GroupSummary `json:"groups"`
}

// groupTotals sums a group's progress over its topics, its dead-letter
// position aside.
func groupTotals(d *adminv1.DescribeGroupResponse) (backlog, inFlight int64) {
	for _, p := range d.GetTopics() {
		if isSystemTopic(p.GetTopic()) {
			continue
		}
		backlog += p.GetBacklog()
		inFlight += p.GetInFlight()
	}
	return backlog, inFlight
}

func (t *tools) listGroups(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, GroupList, error) {
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	gs, err := t.admin.ListGroups(ctx, &adminv1.ListGroupsRequest{})
	if err != nil {
		return nil, GroupList{}, failure("list consumer groups", err)
	}
	out := GroupList{Groups: []GroupSummary{}}
	for _, g := range gs.GetGroups() {
		s := GroupSummary{Name: g.GetName(), FIFO: g.GetFifo(), MaxDeliveryAttempts: g.GetMaxDeliveryAttempts()}
		if d, err := t.admin.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: g.GetName()}); err == nil {
			s.Backlog, s.InFlight = groupTotals(d)
		}
		if dl, err := t.admin.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: g.GetName(), Max: 1}); err == nil {
			s.DeadLetters = dl.GetPending()
		}
		out.Groups = append(out.Groups, s)
	}
	return nil, out, nil
}

// ---- describe_group

// GroupName names a consumer group.
type GroupName struct {
	Group string `json:"group" jsonschema:"the consumer group's name"`
}

// Message is a stored message as the tools show it.
type Message struct {
	Topic          string            `json:"topic"`
	MessageID      string            `json:"message_id"`
	Queue          int32             `json:"queue"`
	Offset         int64             `json:"offset"`
	Tag            string            `json:"tag,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	Properties     map[string]string `json:"properties,omitempty"`
	MessageGroup   string            `json:"message_group,omitempty"`
	Type           string            `json:"type,omitempty"`
	State          string            `json:"state,omitempty"`
	StoreTime      string            `json:"store_time,omitempty"`
	BornTime       string            `json:"born_time,omitempty"`
	BornHost       string            `json:"born_host,omitempty"`
	DeliveryTime   string            `json:"delivery_time,omitempty"`
	ReconsumeTimes int32             `json:"reconsume_times,omitempty"`
	DLQOriginTopic string            `json:"dead_letter_of_topic,omitempty"`
	BodySize       int32             `json:"body_size"`
	// Body is the start of the body as text (or a note when it is not
	// UTF-8).
	Body string `json:"body"`
}

// bodyPreview is how much of a body the tools show.
const bodyPreview = 1024

func messageOf(m *adminv1.StoredMessage) Message {
	out := Message{Topic: m.GetTopic(), MessageID: m.GetMessageId(), Queue: m.GetQueueId(), Offset: m.GetQueueOffset(), Tag: m.GetTag(),
		Keys: m.GetKeys(), Properties: m.GetProperties(), MessageGroup: m.GetMessageGroup(), Type: m.GetType(), State: m.GetState(),
		StoreTime: when(m.GetStoreTime()), BornTime: when(m.GetBornTime()), BornHost: m.GetBornHost(), DeliveryTime: when(m.GetDeliveryTime()),
		ReconsumeTimes: m.GetReconsumeTimes(), DLQOriginTopic: m.GetDlqOriginTopic(), BodySize: m.GetBodySize()}
	body := m.GetBody()
	cut := len(body) > bodyPreview || m.GetBodyTruncated()
	if len(body) > bodyPreview {
		body = body[:bodyPreview]
	}
	for len(body) > 0 && !utf8.Valid(body) && cut { // a rune cut in half at the end
		body = body[:len(body)-1]
	}
	switch {
	case len(body) == 0:
	case utf8.Valid(body):
		out.Body = string(body)
		if cut {
			out.Body += "…"
		}
	default:
		out.Body = fmt.Sprintf("(%d bytes, not UTF-8 text)", m.GetBodySize())
	}
	return out
}

// DeadLetters are a group's dead letters.
type DeadLetters struct {
	Topic   string    `json:"topic"`
	Pending int64     `json:"pending" jsonschema:"dead letters not redriven yet"`
	Oldest  []Message `json:"oldest,omitempty" jsonschema:"the oldest pending ones (at most 5)"`
}

// GroupDescription is describe_group's answer.
type GroupDescription struct {
	Name                string          `json:"name"`
	FIFO                bool            `json:"fifo"`
	MaxDeliveryAttempts int32           `json:"max_delivery_attempts"`
	RetryPolicy         string          `json:"retry_policy"`
	Topics              []GroupProgress `json:"topics"`
	DeadLetters         DeadLetters     `json:"dead_letters"`
	RateWindowSecs      float64         `json:"rate_window_seconds"`
}

func (t *tools) describeGroup(ctx context.Context, req *mcp.CallToolRequest, in GroupName) (*mcp.CallToolResult, GroupDescription, error) {
	if strings.TrimSpace(in.Group) == "" {
		return nil, GroupDescription{}, errors.New("group is required")
	}
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	d, err := t.admin.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: in.Group})
	if err != nil {
		return nil, GroupDescription{}, failure("describe consumer group "+in.Group, err)
	}
	dl, err := t.deadLetters(ctx, in.Group)
	if err != nil {
		return nil, GroupDescription{}, err
	}
	a, b, secs, err := t.rates(ctx)
	if err != nil {
		return nil, GroupDescription{}, err
	}
	g := d.GetGroup()
	out := GroupDescription{Name: g.GetName(), FIFO: g.GetFifo(), MaxDeliveryAttempts: g.GetMaxDeliveryAttempts(), RetryPolicy: g.GetRetryPolicy(),
		Topics: []GroupProgress{}, DeadLetters: dl, RateWindowSecs: secs}
	for _, p := range d.GetTopics() {
		if isSystemTopic(p.GetTopic()) {
			continue
		}
		gp := progressOf(p)
		gp.Group = ""
		gp.DeliveredPerSecond = deliveredRate(a, b, in.Group, p.GetTopic(), secs)
		out.Topics = append(out.Topics, gp)
	}
	return nil, out, nil
}

func (t *tools) deadLetters(ctx context.Context, group string) (DeadLetters, error) {
	dl, err := t.admin.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{Group: group, Max: 5})
	if err != nil {
		return DeadLetters{}, failure("list the dead letters of "+group, err)
	}
	out := DeadLetters{Topic: dl.GetTopic(), Pending: dl.GetPending()}
	for _, m := range dl.GetMessages() {
		out.Oldest = append(out.Oldest, messageOf(m))
	}
	return out, nil
}

// ---- topic_route

// Route is topic_route's answer.
type Route struct {
	Topic              string   `json:"topic"`
	Type               string   `json:"type"`
	AcceptMessageTypes []string `json:"accept_message_types"`
	Queues             []struct {
		ID         int32  `json:"id"`
		Permission string `json:"permission"`
	} `json:"queues"`
	// Endpoints are the members' gRPC addresses, leader first (known to
	// admin users only).
	Endpoints []string `json:"endpoints,omitempty"`
	Note      string   `json:"note,omitempty"`
}

func (t *tools) topicRoute(ctx context.Context, req *mcp.CallToolRequest, in TopicName) (*mcp.CallToolResult, Route, error) {
	if strings.TrimSpace(in.Topic) == "" {
		return nil, Route{}, errors.New("topic is required")
	}
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	r, err := t.rest.GetRoute(ctx, &restv1.GetRouteRequest{Topic: in.Topic})
	if err != nil {
		return nil, Route{}, failure("route of "+in.Topic, err)
	}
	out := Route{Topic: r.GetTopic(), Type: r.GetType(), AcceptMessageTypes: r.GetAcceptMessageTypes()}
	for _, q := range r.GetQueues() {
		out.Queues = append(out.Queues, struct {
			ID         int32  `json:"id"`
			Permission string `json:"permission"`
		}{q.GetId(), q.GetPermission()})
	}
	switch c, err := t.admin.GetClusterStatus(ctx, &adminv1.GetClusterStatusRequest{}); {
	case err == nil:
		var leader string
		var others []string
		for _, m := range c.GetMembers() {
			switch {
			case m.GetGrpcAddress() == "":
			case m.GetRole() == "LEADER" || m.GetRole() == "STANDALONE":
				leader = m.GetGrpcAddress()
			default:
				others = append(others, m.GetGrpcAddress())
			}
		}
		sort.Strings(others)
		if leader != "" {
			out.Endpoints = append(out.Endpoints, leader)
		}
		out.Endpoints = append(out.Endpoints, others...)
		if c.GetClustered() {
			out.Note = "a cluster: clients may dial any member (separate addresses with ';'); the others pass the connection to the leader"
		}
	case status.Code(err) != codes.PermissionDenied:
		return nil, Route{}, failure("read the cluster's members", err)
	}
	return nil, out, nil
}

// ---- find_message

// FindMessage asks for messages by id or key.
type FindMessage struct {
	MessageID string `json:"message_id,omitempty" jsonschema:"the client message id"`
	Key       string `json:"key,omitempty" jsonschema:"a message key"`
	Topic     string `json:"topic,omitempty" jsonschema:"search this topic only (empty: every topic)"`
}

// Found is find_message's answer.
type Found struct {
	Messages []Message `json:"messages"`
}

func (t *tools) findMessage(ctx context.Context, req *mcp.CallToolRequest, in FindMessage) (*mcp.CallToolResult, Found, error) {
	if strings.TrimSpace(in.MessageID) == "" && strings.TrimSpace(in.Key) == "" {
		return nil, Found{}, errors.New("give a message_id or a key")
	}
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	r, err := t.admin.LookupMessage(ctx, &adminv1.LookupMessageRequest{MessageId: in.MessageID, Key: in.Key, Topic: in.Topic, Max: 16})
	if err != nil {
		return nil, Found{}, failure("find the message", err)
	}
	out := Found{Messages: []Message{}}
	for _, m := range r.GetMessages() {
		out.Messages = append(out.Messages, messageOf(m))
	}
	return nil, out, nil
}

// ---- cluster_status

// Cluster is cluster_status's answer: the admin API's view as is.
type Cluster struct {
	Clustered bool           `json:"clustered"`
	ClusterID string         `json:"cluster_id,omitempty"`
	NodeID    uint64         `json:"answered_by_member,omitempty"`
	Members   []Member       `json:"members"`
	Groups    []RaftGroupRep `json:"raft_groups"`
}

// Member is one cluster member.
type Member struct {
	ID           uint64 `json:"id"`
	Role         string `json:"role"`
	Health       string `json:"health"`
	HealthDetail string `json:"health_detail,omitempty"`
	PeerAddress  string `json:"peer_address,omitempty"`
	GRPCAddress  string `json:"grpc_address,omitempty"`
}

// RaftGroupRep is one raft group.
type RaftGroupRep struct {
	Name     string    `json:"name"`
	Leader   uint64    `json:"leader"`
	Term     uint64    `json:"term"`
	Commit   uint64    `json:"commit_index"`
	Replicas []Replica `json:"replicas"`
}

// Replica is one member's replica.
type Replica struct {
	Member      uint64 `json:"member"`
	Voter       bool   `json:"voter"`
	Match       uint64 `json:"match_index"`
	Applied     uint64 `json:"applied_index"`
	Lag         uint64 `json:"lag"`
	LastContact string `json:"last_contact,omitempty"`
}

func (t *tools) clusterStatus(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, Cluster, error) {
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	c, err := t.admin.GetClusterStatus(ctx, &adminv1.GetClusterStatusRequest{})
	if err != nil {
		return nil, Cluster{}, failure("cluster status", err)
	}
	out := Cluster{Clustered: c.GetClustered(), ClusterID: c.GetClusterId(), NodeID: c.GetNodeId(), Members: []Member{}, Groups: []RaftGroupRep{}}
	for _, m := range c.GetMembers() {
		out.Members = append(out.Members, Member{ID: m.GetId(), Role: m.GetRole(), Health: m.GetHealth(), HealthDetail: m.GetHealthDetail(),
			PeerAddress: m.GetPeerAddress(), GRPCAddress: m.GetGrpcAddress()})
	}
	for _, g := range c.GetGroups() {
		rg := RaftGroupRep{Name: g.GetName(), Leader: g.GetLeader(), Term: g.GetTerm(), Commit: g.GetCommitIndex()}
		for _, r := range g.GetReplicas() {
			rg.Replicas = append(rg.Replicas, Replica{Member: r.GetMember(), Voter: r.GetVoter(), Match: r.GetMatchIndex(),
				Applied: r.GetAppliedIndex(), Lag: r.GetLag(), LastContact: when(r.GetLastContact())})
		}
		out.Groups = append(out.Groups, rg)
	}
	return nil, out, nil
}
