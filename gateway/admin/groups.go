package admin

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/forwarding"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// Groups routes the views of stored messages over a cluster's data
// groups (Options.Groups; nil: the Broker holds every queue). A message
// lookup and a topic's or group's description ask every group: the
// brokers of those this member serves, and each other member leading
// some, forwarded (with the caller's metadata, so that member checks the
// caller again) and answered from its own groups only, the answers
// merged; a browse goes to the group holding its queue.
type Groups interface {
	// Local is the brokers of the groups this member serves.
	Local() []Broker
	// Remote is a connection to each other member leading groups this
	// member does not serve (none for a forwarded call: forwarding).
	Remote(ctx context.Context) []grpc.ClientConnInterface
	// Queue is where queue q of topic is served: a broker here, or a
	// connection to the member leading its group.
	Queue(ctx context.Context, topic string, q int32) (Broker, grpc.ClientConnInterface, error)
}

// lookupInGroups is LookupMessage over data groups: every group's
// matches, newest first, at most max.
func (s *Service) lookupInGroups(ctx context.Context, req *adminv1.LookupMessageRequest, br broker.LookupRequest) (*adminv1.LookupMessageResponse, error) {
	out := &adminv1.LookupMessageResponse{}
	for _, b := range s.opts.Groups.Local() {
		found, err := b.LookupMessage(ctx, br)
		if err != nil {
			return nil, lookupStatus(err, req)
		}
		for _, f := range found {
			if s.sees(ctx, auth.Access{Subscribe: f.Topic}) {
				out.Messages = append(out.Messages, storedToV1(f, MaxLookupBody))
			}
		}
	}
	for _, conn := range s.opts.Groups.Remote(ctx) {
		resp, err := forwardTo[adminv1.LookupMessageResponse](ctx, conn, adminv1.AdminService_LookupMessage_FullMethodName, req)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, resp.GetMessages()...)
	}
	slices.SortStableFunc(out.Messages, func(a, b *adminv1.StoredMessage) int {
		return b.GetStoreTime().AsTime().Compare(a.GetStoreTime().AsTime())
	})
	if max := lookupMax(br.Max); len(out.Messages) > max {
		out.Messages = out.Messages[:max]
	}
	return out, nil
}

// lookupMax is the most messages a lookup answers for a request's max.
func lookupMax(n int) int {
	if n <= 0 {
		n = 32
	}
	return min(n, broker.MaxLookup)
}

// forwardedStatus is the answer to a call another member could not
// serve: its own status when it answered one, else that it could not be
// reached (retry).
func forwardedStatus(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unavailable && st.Code() != codes.DeadlineExceeded {
		return err
	}
	return status.Errorf(codes.Unavailable, "a member leading some of the data groups did not answer: retry (%v)", err)
}

// inGroups answers req from every data group: at each broker this
// member serves (local) and at each other member leading groups
// (forwarded as it came), merged by merge.
func inGroups[Req, Resp proto.Message](ctx context.Context, s *Service, req Req, method string,
	local func(context.Context, Broker, Req) (Resp, error), merge func([]Resp) Resp) (Resp, error) {
	var parts []Resp
	var zero Resp
	for _, b := range s.opts.Groups.Local() {
		r, err := local(ctx, b, req)
		if err != nil {
			return zero, err
		}
		parts = append(parts, r)
	}
	for _, conn := range s.opts.Groups.Remote(ctx) {
		r := zero.ProtoReflect().New().Interface().(Resp)
		if err := conn.Invoke(forwarding.Context(ctx), method, req, r); err != nil {
			return zero, forwardedStatus(err)
		}
		parts = append(parts, r)
	}
	if len(parts) == 0 {
		return zero, status.Error(codes.Unavailable, "no data group has a known leader (an election is under way): retry")
	}
	return merge(parts), nil
}

// Each group's broker describes every queue of a topic, those of other
// groups empty: a queue's entry is the one of the group holding it, the
// one with the highest offsets. Counts add up over the groups.

func mergeTopicDescriptions(parts []*adminv1.DescribeTopicResponse) *adminv1.DescribeTopicResponse {
	out := proto.Clone(parts[0]).(*adminv1.DescribeTopicResponse)
	out.Messages = 0
	for _, p := range parts {
		out.Messages += p.GetMessages()
		if p != parts[0] {
			out.Queues = append(out.Queues, p.GetQueues()...)
			out.Groups = append(out.Groups, p.GetGroups()...)
		}
	}
	out.Queues = mergeQueueOffsets(out.Queues)
	out.Groups = mergeProgress(out.Groups, func(p *adminv1.GroupTopicProgress) string { return p.GetGroup() })
	return out
}

func mergeGroupDescriptions(parts []*adminv1.DescribeGroupResponse) *adminv1.DescribeGroupResponse {
	out := proto.Clone(parts[0]).(*adminv1.DescribeGroupResponse)
	dlq := out.GetDeadLetterQueue()
	for _, p := range parts[1:] {
		out.Topics = append(out.Topics, p.GetTopics()...)
		if d := p.GetDeadLetterQueue(); d != nil && dlq != nil {
			dlq.Exists = dlq.Exists || d.GetExists()
			dlq.Messages += d.GetMessages()
		}
	}
	out.Topics = mergeProgress(out.Topics, func(p *adminv1.GroupTopicProgress) string { return p.GetTopic() })
	return out
}

// mergeQueueOffsets keeps, for each queue, the entry with the highest
// offsets, in queue order.
func mergeQueueOffsets(qs []*adminv1.QueueOffsets) []*adminv1.QueueOffsets {
	by := map[int32]*adminv1.QueueOffsets{}
	for _, q := range qs {
		if cur, ok := by[q.GetQueueId()]; !ok || q.GetMaxOffset() > cur.GetMaxOffset() {
			by[q.GetQueueId()] = q
		}
	}
	return sortedValues(by, func(q *adminv1.QueueOffsets) int32 { return q.GetQueueId() })
}

// mergeProgress adds up the progress entries of one key (a group or a
// topic): counts summed, each queue the entry of the group holding it,
// the oldest in-flight message the oldest stored.
func mergeProgress(ps []*adminv1.GroupTopicProgress, key func(*adminv1.GroupTopicProgress) string) []*adminv1.GroupTopicProgress {
	by := map[string]*adminv1.GroupTopicProgress{}
	var order []string
	for _, p := range ps {
		cur, ok := by[key(p)]
		if !ok {
			by[key(p)] = proto.Clone(p).(*adminv1.GroupTopicProgress)
			order = append(order, key(p))
			continue
		}
		cur.Ready += p.GetReady()
		cur.InFlight += p.GetInFlight()
		cur.Held += p.GetHeld()
		cur.Backlog += p.GetBacklog()
		cur.Queues = append(cur.Queues, p.GetQueues()...)
		if o := p.GetOldestInFlight(); o != nil && (cur.OldestInFlight == nil ||
			o.GetMessage().GetStoreTime().AsTime().Before(cur.GetOldestInFlight().GetMessage().GetStoreTime().AsTime())) {
			cur.OldestInFlight = o
		}
	}
	slices.Sort(order)
	out := make([]*adminv1.GroupTopicProgress, 0, len(order))
	for _, k := range order {
		p := by[k]
		qs := map[int32]*adminv1.GroupQueueProgress{}
		for _, q := range p.Queues {
			if cur, ok := qs[q.GetQueueId()]; !ok || q.GetMaxOffset() > cur.GetMaxOffset() ||
				(q.GetMaxOffset() == cur.GetMaxOffset() && q.GetConsumedOffset() > cur.GetConsumedOffset()) {
				qs[q.GetQueueId()] = q
			}
		}
		p.Queues = sortedValues(qs, func(q *adminv1.GroupQueueProgress) int32 { return q.GetQueueId() })
		out = append(out, p)
	}
	return out
}

// sortedValues are m's values in the order of id.
func sortedValues[V any](m map[int32]V, id func(V) int32) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b V) int { return int(id(a)) - int(id(b)) })
	return out
}

// mergeResets joins each group's moved queues, in queue order.
func mergeResets(parts []*adminv1.ResetOffsetResponse) *adminv1.ResetOffsetResponse {
	out := &adminv1.ResetOffsetResponse{}
	for _, p := range parts {
		out.Queues = append(out.Queues, p.GetQueues()...)
	}
	slices.SortFunc(out.Queues, func(a, b *adminv1.QueueReset) int { return int(a.GetQueueId()) - int(b.GetQueueId()) })
	return out
}

// mergeDeadLetters joins each group's pending dead letters (each group
// dead-letters into a queue of its own), oldest first, at most max.
func mergeDeadLetters(max int) func([]*adminv1.ListDeadLettersResponse) *adminv1.ListDeadLettersResponse {
	return func(parts []*adminv1.ListDeadLettersResponse) *adminv1.ListDeadLettersResponse {
		out := &adminv1.ListDeadLettersResponse{Topic: parts[0].GetTopic()}
		for _, p := range parts {
			out.Pending += p.GetPending()
			out.Messages = append(out.Messages, p.GetMessages()...)
		}
		slices.SortStableFunc(out.Messages, func(a, b *adminv1.StoredMessage) int {
			return a.GetStoreTime().AsTime().Compare(b.GetStoreTime().AsTime())
		})
		if len(out.Messages) > max {
			out.Messages = out.Messages[:max]
		}
		return out
	}
}

// forwardTo calls method on the member behind conn with req as it came.
func forwardTo[Resp any, PResp interface {
	*Resp
	proto.Message
}](ctx context.Context, conn grpc.ClientConnInterface, method string, req proto.Message) (PResp, error) {
	resp, err := forwarding.Call[Resp, PResp](ctx, conn, method, req)
	if err != nil {
		return nil, forwardedStatus(err)
	}
	return resp, nil
}
