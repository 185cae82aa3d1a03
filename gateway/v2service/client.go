package v2service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Heartbeat keeps the client alive (the interceptor already marked it
// seen). Lenient, as upstream is: the Go push consumer claims to be a
// SIMPLE_CONSUMER and its recovery heartbeat is empty, so the request's
// client type is not checked and an unknown client is simply recorded;
// only a malformed non-empty group name is refused.
//
// With several data groups, a heartbeat on a channel meant for another
// member is answered UNAVAILABLE, which makes the Go client connect the
// channel anew (misplaced).
func (s *MessagingService) Heartbeat(ctx context.Context, req *v2.HeartbeatRequest) (*v2.HeartbeatResponse, error) {
	if s.misplaced(ctx) {
		return nil, s.steer()
	}
	if g := req.GetGroup(); g != nil && g.GetName() != "" {
		if _, err := checkGroup(g); err != nil {
			return &v2.HeartbeatResponse{Status: statusOf(ctx, s.log, err)}, nil
		}
	}
	return &v2.HeartbeatResponse{Status: statusOK}, nil
}

// NotifyClientTermination forgets the client and releases what it held
// (auto-renewed deliveries) through the registry's OnGone. Always OK.
func (s *MessagingService) NotifyClientTermination(ctx context.Context, _ *v2.NotifyClientTerminationRequest) (*v2.NotifyClientTerminationResponse, error) {
	s.sess.Terminate(grpcserver.ClientID(ctx))
	return &v2.NotifyClientTerminationResponse{Status: statusOK}, nil
}

// telemetrySender adapts the Telemetry stream to session.Stream; the
// session.Link wrapping it serialises writes, and the handler writes its
// own replies through the same Link.
type telemetrySender struct {
	ss grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]
}

func (t telemetrySender) Send(cmd session.Command) error {
	c, ok := cmd.(*v2.TelemetryCommand)
	if !ok {
		return fmt.Errorf("telemetry: cannot send a %T", cmd)
	}
	return t.ss.Send(c)
}

type recvResult struct {
	cmd *v2.TelemetryCommand
	err error
}

// Telemetry is the client's control stream. Every Settings is
// validated, stored as the client's full settings and answered on the same
// stream with a `settings` command carrying the server-owned values; the
// most recent stream becomes the client's target for server commands. The
// stream ends (gRPC OK) as soon as the admission gate drains, so a
// graceful stop is not held up by streams that live as long as clients.
func (s *MessagingService) Telemetry(stream grpc.BidiStreamingServer[v2.TelemetryCommand, v2.TelemetryCommand]) error {
	ctx := stream.Context()
	id := grpcserver.ClientID(ctx)
	if !s.gate.Admit() { // counted with the refused unary calls
		return status.Error(codes.Unavailable, "mqgate is draining for shutdown; reconnect to another instance")
	}
	var link *session.Link
	defer func() {
		if link != nil {
			link.Close()
		}
	}()

	// Recv blocks and cannot be interrupted except by ending the RPC, so a
	// helper goroutine reads while this one also watches the gate. The
	// helper ends when the stream does, which gRPC guarantees once this
	// handler returns.
	in := make(chan recvResult, 1)
	go func() {
		for {
			cmd, err := stream.Recv()
			select {
			case in <- recvResult{cmd, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	for {
		var r recvResult
		select {
		case <-s.gate.Draining():
			return nil
		case <-ctx.Done():
			return nil
		case r = <-in:
		}
		if errors.Is(r.err, io.EOF) {
			return nil // client completed: complete our side too
		}
		if r.err != nil {
			return nil // client error or cancel: drop the stream
		}
		s.sess.Touch(id)
		switch c := r.cmd.GetCommand().(type) {
		case *v2.TelemetryCommand_Settings:
			reply, view, err := s.settingsReply(ctx, c.Settings)
			if err != nil {
				s.log.WarnContext(ctx, "telemetry settings refused", "client_id", id, "err", err)
				return err
			}
			view.PublishingTopics = publishable(ctx, view.PublishingTopics)
			if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
				view.Addr = p.Addr.String()
			}
			s.sess.UpdateSettings(id, view)
			if link == nil {
				link = s.sess.Attach(id, telemetrySender{stream})
			}
			if err := link.Send(&v2.TelemetryCommand{Status: statusOK, Command: &v2.TelemetryCommand_Settings{Settings: reply}}); err != nil {
				return nil
			}
		case *v2.TelemetryCommand_ThreadStackTrace, *v2.TelemetryCommand_VerifyMessageResult:
			// Answers to admin commands mqgate does not send yet.
			s.log.DebugContext(ctx, "telemetry reply with no pending request", "client_id", id, "nonce", nonceOf(r.cmd))
		default:
			s.log.DebugContext(ctx, "telemetry command ignored", "client_id", id, "type", fmt.Sprintf("%T", c))
		}
	}
}

// publishable keeps the declared publishing topics the stream's user may
// publish to (all of them with auth off). A transaction check carries the
// half message and goes to a producer that declared its topic, and any
// signed user may declare any topic; the declaration itself is not
// refused, so a client that names a topic it may not use still starts
// (its sends are refused one by one).
func publishable(ctx context.Context, topics []string) []string {
	u := auth.FromContext(ctx)
	if u == nil {
		return topics
	}
	var out []string
	for _, t := range topics {
		if u.Allow(auth.Access{Publish: t}) == nil {
			out = append(out, t)
		}
	}
	return out
}

func nonceOf(c *v2.TelemetryCommand) string {
	if t := c.GetThreadStackTrace(); t != nil {
		return t.GetNonce()
	}
	return c.GetVerifyMessageResult().GetNonce()
}

// settingsReply validates a client's Settings (failures are
// gRPC INVALID_ARGUMENT, internal failures INTERNAL) and builds the
// Settings reply plus the registry's view.
func (s *MessagingService) settingsReply(ctx context.Context, in *v2.Settings) (*v2.Settings, *session.Settings, error) {
	ct := in.GetClientType()
	lb, served := s.b.(LiteBroker)
	isLite := ct == v2.ClientType_LITE_PUSH_CONSUMER || ct == v2.ClientType_LITE_SIMPLE_CONSUMER
	if isLite && !served {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s clients are not supported by this server (it serves no lite topics)", ct)
	}
	out := &v2.Settings{
		ClientType:       in.ClientType,
		AccessPoint:      in.GetAccessPoint(),
		RequestTimeout:   in.GetRequestTimeout(),
		UserAgent:        in.GetUserAgent(),
		Metric:           &v2.Metric{On: false},
		ClientProperties: in.GetClientProperties(),
	}
	switch ps := in.GetPubSub().(type) {
	case *v2.Settings_Publishing:
		topics := make([]string, 0, len(ps.Publishing.GetTopics()))
		for _, t := range ps.Publishing.GetTopics() {
			key, err := checkTopic(t)
			if err != nil {
				return nil, nil, status.Error(codes.InvalidArgument, "publishing settings: "+mqerr.Message(err))
			}
			topics = append(topics, key)
		}
		out.PubSub = &v2.Settings_Publishing{Publishing: &v2.Publishing{
			Topics:              ps.Publishing.GetTopics(),
			MaxBodySize:         int32(s.b.Limits().MaxBodySize),
			ValidateMessageType: true,
		}}
		out.BackoffPolicy = producerBackoff()
		return out, settingsToSession(in, "", topics, nil), nil

	case *v2.Settings_Subscription:
		sub := ps.Subscription
		groupKey, err := checkGroup(sub.GetGroup())
		if err != nil {
			return nil, nil, status.Error(codes.InvalidArgument, "subscription settings: "+mqerr.Message(err))
		}
		subs := make(map[string]session.FilterExpression, len(sub.GetSubscriptions()))
		for _, e := range sub.GetSubscriptions() {
			key, err := checkTopic(e.GetTopic())
			if err != nil {
				return nil, nil, status.Error(codes.InvalidArgument, "subscription settings: "+mqerr.Message(err))
			}
			subs[key] = session.FilterExpression{Type: filterTypeToSession(e.GetExpression().GetType()), Expression: e.GetExpression().GetExpression()}
		}
		g, err := s.group(ctx, groupKey)
		switch {
		case err == nil:
		case mqerr.KindOf(err) == mqerr.KindGroupNotFound:
			// Answer with defaults so the client starts; its receives
			// then get CONSUMER_GROUP_NOT_FOUND, which names the problem
			// (a gRPC error here would hang the Go client's Start forever).
			s.log.WarnContext(ctx, "consumer settings for a group that does not exist; replying with defaults", "group", groupKey)
			g = model.Group{Name: groupKey, MaxDeliveryAttempts: model.DefaultMaxDeliveryAttempts, Retry: model.DefaultRetryPolicy()}
		case mqerr.KindOf(err) == mqerr.KindIllegalGroup:
			return nil, nil, status.Error(codes.InvalidArgument, "subscription settings: "+mqerr.Message(err))
		default:
			s.log.ErrorContext(ctx, "reading consumer group for telemetry settings", "group", groupKey, "err", err)
			return nil, nil, status.Error(grpcCodeOf(err), "reading consumer group "+groupKey+": "+mqerr.Message(err))
		}
		fifo := g.FIFO
		batch := int32(ReceiveBatchSize)
		reply := &v2.Subscription{
			Group:              sub.GetGroup(),
			Subscriptions:      sub.GetSubscriptions(),
			Fifo:               &fifo,
			ReceiveBatchSize:   &batch,
			LongPollingTimeout: durationpb.New(MaxLongPolling),
		}
		if isLite {
			// Lite topics are delivered in order per lite topic, and the
			// client checks its quota and names against these.
			quota, maxName := lb.LiteLimits()
			q, n := int32(quota), int32(maxName)
			fifo = true
			reply.LiteSubscriptionQuota, reply.MaxLiteTopicSize = &q, &n
		}
		out.PubSub = &v2.Settings_Subscription{Subscription: reply}
		out.BackoffPolicy = retryPolicyToV2(g)
		return out, settingsToSession(in, groupKey, nil, subs), nil
	}
	return nil, nil, status.Error(codes.InvalidArgument, "there is no publishing or subscription data in settings")
}

// settingsOf returns the client's declared request and long-polling timeouts (the
// default request timeout for clients without Settings: REST, raw callers).
func (s *MessagingService) settingsOf(clientID string) (rt, lpt time.Duration) {
	rt = DefaultRequestTimeout
	if st, ok := s.sess.Settings(clientID); ok {
		if st.RequestTimeout > 0 {
			rt = st.RequestTimeout
		}
		lpt = st.LongPollingTimeout
	}
	return rt, lpt
}
