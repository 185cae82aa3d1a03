package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Receive timing.
const (
	// DefaultAwait is how long an empty Receive waits on the server when
	// ConsumerConfig.Await is 0 (mqgate's longest long poll).
	DefaultAwait = 20 * time.Second
	// receiveMargin is added to Await for the call's deadline, so the
	// server's answer arrives before it.
	receiveMargin = 2 * time.Second
	// minServerPoll is the shortest long poll mqgate holds unless the
	// call's deadline is nearer (it then answers ~200 ms before the
	// deadline). Shorter Awaits get a deadline just past Await instead.
	minServerPoll = 5 * time.Second
	shortMargin   = 300 * time.Millisecond
)

// ConsumerConfig configures NewSimpleConsumer.
type ConsumerConfig struct {
	// Group is the consumer group (required).
	Group string
	// Subscriptions maps topics to tag filter expressions: "*" or "" for
	// every message, "a||b" for tags a or b. At least one topic is
	// required, here or in SQLSubscriptions.
	Subscriptions map[string]string
	// SQLSubscriptions maps topics to SQL92 filter expressions over the
	// messages' properties (RocketMQ's language, e.g. "a > 5 AND region =
	// 'eu'"; TAGS is the tag). A topic is in one map or the other.
	SQLSubscriptions map[string]string
	// Await is how long a Receive that finds nothing waits on the server
	// for messages to arrive (0: DefaultAwait). A ctx deadline shortens
	// it. mqgate holds an empty receive for 5 to 20 s unless the call's
	// deadline is nearer; for an Await below 5 s the SDK sets the deadline
	// just past Await (the server answers ~0.1 s late at most).
	Await time.Duration
}

// SimpleConsumer receives messages of one consumer group and acknowledges
// them one by one. It is safe for concurrent use.
type SimpleConsumer struct {
	*member
	cfg    ConsumerConfig
	group  *v2.Resource
	topics []string

	mu   sync.Mutex
	next int
}

// NewSimpleConsumer starts a simple consumer: it opens its Telemetry
// stream and waits for the server's settings until ctx ends.
func (c *Client) NewSimpleConsumer(ctx context.Context, cfg ConsumerConfig) (*SimpleConsumer, error) {
	if strings.TrimSpace(cfg.Group) == "" {
		return nil, errors.New("sdk: NewSimpleConsumer: a consumer group is required")
	}
	if len(cfg.Subscriptions)+len(cfg.SQLSubscriptions) == 0 {
		return nil, errors.New("sdk: NewSimpleConsumer: subscribe to at least one topic")
	}
	for t, expr := range cfg.SQLSubscriptions {
		if _, dup := cfg.Subscriptions[t]; dup {
			return nil, fmt.Errorf("sdk: NewSimpleConsumer: topic %q has both a tag and an SQL92 subscription", t)
		}
		if strings.TrimSpace(expr) == "" {
			return nil, fmt.Errorf("sdk: NewSimpleConsumer: the SQL92 subscription of topic %q is empty", t)
		}
	}
	if cfg.Await <= 0 {
		cfg.Await = DefaultAwait
	}
	s := &SimpleConsumer{cfg: cfg, group: c.resource(cfg.Group)}
	var entries []*v2.SubscriptionEntry
	for t := range cfg.Subscriptions {
		s.topics = append(s.topics, t)
	}
	for t := range cfg.SQLSubscriptions {
		s.topics = append(s.topics, t)
	}
	sort.Strings(s.topics)
	for _, t := range s.topics {
		entries = append(entries, &v2.SubscriptionEntry{Topic: c.resource(t), Expression: s.filter(t)})
	}
	ct := v2.ClientType_SIMPLE_CONSUMER
	settings := &v2.Settings{
		ClientType:     &ct,
		AccessPoint:    accessPoint(c.endpoint),
		RequestTimeout: durationpb.New(c.cfg.requestTimeout),
		PubSub: &v2.Settings_Subscription{Subscription: &v2.Subscription{
			Group: s.group, Subscriptions: entries, LongPollingTimeout: durationpb.New(cfg.Await)}},
		UserAgent: userAgent(),
	}
	m, err := c.join(ctx, "consumer", settings, &v2.HeartbeatRequest{ClientType: ct, Group: s.group}, s.group)
	if err != nil {
		return nil, err
	}
	s.member = m
	return s, nil
}

// filter is the filter expression of a subscribed topic.
func (s *SimpleConsumer) filter(topic string) *v2.FilterExpression {
	if expr, ok := s.cfg.SQLSubscriptions[topic]; ok {
		return &v2.FilterExpression{Type: v2.FilterType_SQL, Expression: expr}
	}
	expr := s.cfg.Subscriptions[topic]
	if strings.TrimSpace(expr) == "" {
		expr = "*"
	}
	return &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: expr}
}

// ClientID is the consumer's client id (x-mq-client-id).
func (s *SimpleConsumer) ClientID() string { return s.sess.clientID }

// Group is the consumer group.
func (s *SimpleConsumer) Group() string { return s.cfg.Group }

// Close notifies the server, ends the Telemetry stream and waits for the
// consumer's goroutines until ctx ends. Messages received and not acked
// become visible again when their invisible duration ends.
func (s *SimpleConsumer) Close(ctx context.Context) error { return s.close(ctx) }

func (s *SimpleConsumer) checkOpen(op string) error {
	if s.isClosed() {
		return fmt.Errorf("sdk: %s: consumer %w", op, ErrClosed)
	}
	return nil
}

// Receive returns up to max messages (1 … 32) of the next subscribed
// topic (round robin), each invisible to other receives of the group for
// invisible (10 s … 12 h) unless acked. When none is ready it waits up to
// Await (never past ctx's deadline) and then returns no messages and no
// error. GZIP bodies are decompressed; one that cannot be is returned as
// sent, together with an error naming it.
func (s *SimpleConsumer) Receive(ctx context.Context, max int, invisible time.Duration) ([]*ReceivedMessage, error) {
	if err := s.checkOpen("Receive"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	topic := s.topics[s.next%len(s.topics)]
	s.next++
	s.mu.Unlock()
	return s.ReceiveFrom(ctx, topic, max, invisible)
}

// ReceiveFrom is Receive from one subscribed topic.
func (s *SimpleConsumer) ReceiveFrom(ctx context.Context, topic string, max int, invisible time.Duration) ([]*ReceivedMessage, error) {
	if err := s.checkOpen("Receive"); err != nil {
		return nil, err
	}
	_, tags := s.cfg.Subscriptions[topic]
	_, sql := s.cfg.SQLSubscriptions[topic]
	if !tags && !sql {
		return nil, fmt.Errorf("sdk: Receive: topic %q is not subscribed", topic)
	}
	margin := receiveMargin
	if s.cfg.Await < minServerPoll {
		margin = shortMargin
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Await+margin) // the earlier of this and ctx's own
	defer cancel()
	req := &v2.ReceiveMessageRequest{
		Group:              s.group,
		MessageQueue:       &v2.MessageQueue{Topic: s.c.resource(topic), Id: -1, Broker: &v2.Broker{}},
		FilterExpression:   s.filter(topic),
		BatchSize:          int32(max),
		InvisibleDuration:  durationpb.New(invisible),
		LongPollingTimeout: durationpb.New(s.cfg.Await),
	}
	stream, err := s.c.ms.ReceiveMessage(s.c.outgoing(ctx, s.sess.clientID), req)
	if err != nil {
		return nil, grpcErr("ReceiveMessage", err)
	}
	var (
		st   *v2.Status
		msgs []*ReceivedMessage
		bad  error
	)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The messages of an interrupted stream stay invisible until
			// their duration ends; report them lost to this call.
			return nil, grpcErr("ReceiveMessage", err)
		}
		switch c := resp.GetContent().(type) {
		case *v2.ReceiveMessageResponse_Status:
			st = c.Status
		case *v2.ReceiveMessageResponse_Message:
			m, err := fromV2(c.Message)
			if err != nil && bad == nil {
				bad = fmt.Errorf("ReceiveMessage: message %s: body: %w", m.ID, err)
			}
			msgs = append(msgs, m)
		}
	}
	switch {
	case st.GetCode() == v2.Code_MESSAGE_NOT_FOUND:
		return nil, nil
	case st.GetCode() != v2.Code_OK:
		return nil, statusErr("ReceiveMessage", st)
	}
	return msgs, bad
}

// Ack acknowledges a delivery: the message is done for the group. The
// server's verdict is returned (e.g. ErrInvalidReceiptHandle when the
// invisible duration already ended and the message will be redelivered).
func (s *SimpleConsumer) Ack(ctx context.Context, m *ReceivedMessage) error {
	errs, err := s.ack(ctx, m.Topic, []*v2.AckMessageEntry{{MessageId: m.ID, ReceiptHandle: m.ReceiptHandle}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AckHandles acknowledges deliveries of topic by receipt handle in one
// call. It returns one result per handle (nil: acked) and an error when
// the call itself failed.
func (s *SimpleConsumer) AckHandles(ctx context.Context, topic string, handles ...string) ([]error, error) {
	entries := make([]*v2.AckMessageEntry, len(handles))
	for i, h := range handles {
		entries[i] = &v2.AckMessageEntry{ReceiptHandle: h}
	}
	return s.ack(ctx, topic, entries)
}

func (s *SimpleConsumer) ack(ctx context.Context, topic string, entries []*v2.AckMessageEntry) ([]error, error) {
	if err := s.checkOpen("AckMessage"); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	ctx, cancel := s.c.withTimeout(ctx)
	defer cancel()
	resp, err := s.c.ms.AckMessage(s.c.outgoing(ctx, s.sess.clientID), &v2.AckMessageRequest{
		Group: s.group, Topic: s.c.resource(topic), Entries: entries})
	if err != nil {
		return nil, grpcErr("AckMessage", err)
	}
	out := make([]error, len(entries))
	res := resp.GetEntries()
	if len(res) != len(entries) {
		// A refused request (bad topic or group) has no entries.
		if err := statusErr("AckMessage", resp.GetStatus()); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("AckMessage: %d results for %d entries", len(res), len(entries))
	}
	for i, e := range res {
		out[i] = statusErr("AckMessage", e.GetStatus())
	}
	return out, nil
}

// ChangeInvisibleDuration makes a delivery invisible for d from now (0 …
// 12 h; 0 makes it visible again at once: a negative acknowledgement).
// On success m.ReceiptHandle is replaced by the new handle (the old one
// no longer acks) and m.InvisibleDuration set to d.
func (s *SimpleConsumer) ChangeInvisibleDuration(ctx context.Context, m *ReceivedMessage, d time.Duration) error {
	if err := s.checkOpen("ChangeInvisibleDuration"); err != nil {
		return err
	}
	ctx, cancel := s.c.withTimeout(ctx)
	defer cancel()
	resp, err := s.c.ms.ChangeInvisibleDuration(s.c.outgoing(ctx, s.sess.clientID), &v2.ChangeInvisibleDurationRequest{
		Group: s.group, Topic: s.c.resource(m.Topic), ReceiptHandle: m.ReceiptHandle,
		InvisibleDuration: durationpb.New(d), MessageId: m.ID})
	if err != nil {
		return grpcErr("ChangeInvisibleDuration", err)
	}
	if err := statusErr("ChangeInvisibleDuration", resp.GetStatus()); err != nil {
		return err
	}
	if h := resp.GetReceiptHandle(); h != "" {
		m.ReceiptHandle = h
	}
	m.InvisibleDuration = d
	return nil
}
