package restmessaging

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/forwarding"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// Groups is a cluster of several data groups as the service routes its
// calls over them (Config.Groups; nil: one broker serves everything). A
// call concerns the group holding the queues it touches: a send the one
// its message group names (else one this member serves), an ack or an
// invisibility change the one the receipt handle's queue is in, a
// receive any group holding queues of the topic. The group's broker
// serves it where this member serves the group; elsewhere the request is
// forwarded, as it came (the caller's metadata too, so the member serving
// it authenticates it again), to the REST service of the member leading
// the group. A member never forwards a forwarded request again: its
// Groups answer only with the groups it serves (forwarding.Forwarded).
type Groups interface {
	// Send is where a send of msgs to topic goes.
	Send(ctx context.Context, topic string, msgs []*model.Message) (Target, error)
	// Receive is where a receive of topic may find messages: the groups
	// this member serves first, then the members leading the others.
	Receive(ctx context.Context, topic string) ([]Target, error)
	// Handle is where a call carrying receipt handle h of topic goes.
	Handle(ctx context.Context, topic, h string) (Target, error)
}

// Target is where a call goes: B, a broker this member serves, or the
// member Member over Conn.
type Target struct {
	B      Broker
	Conn   grpc.ClientConnInterface
	Member uint64
}

// receiveFromGroups is ReceiveMessages over data groups: a first pass
// takes what any of the targets has without waiting; finding nothing, it
// waits on the first (a group this member serves, when it serves one)
// up to the receive's wait.
func (s *Service) receiveFromGroups(ctx context.Context, req *restv1.ReceiveMessagesRequest, rr broker.ReceiveRequest) (*restv1.ReceiveMessagesResponse, error) {
	targets, err := s.groups.Receive(ctx, rr.Topic)
	if err != nil {
		return nil, s.errorOf(ctx, err)
	}
	if len(targets) == 0 {
		return &restv1.ReceiveMessagesResponse{}, nil
	}
	if len(targets) > 1 {
		start := time.Now()
		now := rr
		now.Wait = 0
		for _, t := range targets {
			resp, err := s.receiveAt(ctx, req, t, now)
			if err != nil && t.B == nil {
				continue // a member that cannot answer now: the others may have messages
			}
			if err != nil || len(resp.GetMessages()) > 0 {
				return resp, err
			}
		}
		rr.Wait = max(rr.Wait-time.Since(start), 0) // the wait asked for, not more
	}
	return s.receiveAt(ctx, req, targets[0], rr)
}

// receiveAt receives rr at t: from its broker, or forwarded with rr's
// wait.
func (s *Service) receiveAt(ctx context.Context, req *restv1.ReceiveMessagesRequest, t Target, rr broker.ReceiveRequest) (*restv1.ReceiveMessagesResponse, error) {
	if t.B != nil {
		return s.receiveLocal(ctx, t.B, rr)
	}
	fr := proto.Clone(req).(*restv1.ReceiveMessagesRequest)
	fr.WaitDuration = durationpb.New(rr.Wait)
	resp, err := forwarding.Call[restv1.ReceiveMessagesResponse](ctx, t.Conn, restv1.MessagingService_ReceiveMessages_FullMethodName, fr)
	return resp, s.forwardError(ctx, err)
}

// ackInGroups is AckMessages' broker step over data groups: each handle
// is acked where its group is served, each broker and each member asked
// once for its handles; one status per handle.
func (s *Service) ackInGroups(ctx context.Context, req *restv1.AckMessagesRequest, handles []string) []*restv1.Status {
	out := make([]*restv1.Status, len(handles))
	type batch struct {
		t   Target
		idx []int
	}
	local := map[Broker]*batch{}
	remote := map[uint64]*batch{}
	var order []*batch
	for i, h := range handles {
		t, err := s.groups.Handle(ctx, req.GetTopic(), h)
		if err != nil {
			out[i], _ = s.statusOf(ctx, err)
			continue
		}
		var b *batch
		if t.B != nil {
			if b = local[t.B]; b == nil {
				b = &batch{t: t}
				local[t.B] = b
				order = append(order, b)
			}
		} else if b = remote[t.Member]; b == nil {
			b = &batch{t: t}
			remote[t.Member] = b
			order = append(order, b)
		}
		b.idx = append(b.idx, i)
	}
	for _, b := range order {
		hs := make([]string, len(b.idx))
		for j, i := range b.idx {
			hs[j] = handles[i]
		}
		if b.t.B != nil {
			errs := b.t.B.Ack(ctx, req.GetGroup(), req.GetTopic(), hs)
			for j, i := range b.idx {
				var err error
				if j < len(errs) {
					err = errs[j]
				}
				out[i], _ = s.statusOf(ctx, err)
			}
			continue
		}
		fr := &restv1.AckMessagesRequest{Group: req.GetGroup(), Topic: req.GetTopic(), ReceiptHandles: hs}
		resp, err := forwarding.Call[restv1.AckMessagesResponse](ctx, b.t.Conn, restv1.MessagingService_AckMessages_FullMethodName, fr)
		for j, i := range b.idx {
			if err != nil || j >= len(resp.GetResults()) {
				out[i] = s.forwardStatus(ctx, err)
				continue
			}
			out[i] = resp.GetResults()[j].GetStatus()
		}
	}
	return out
}

// forwardStatus is the status of a forwarded call's failure: the
// member's own when it answered one, else that the group's leader could
// not be reached (retry).
func (s *Service) forwardStatus(ctx context.Context, err error) *restv1.Status {
	if err == nil {
		err = errors.New("the member answered no result")
	}
	for _, d := range status.Convert(err).Details() {
		if st, ok := d.(*restv1.Status); ok {
			return st
		}
	}
	st, _ := s.statusOf(ctx, mqerr.Wrap(mqerr.KindReplicationLost, err, "the data group's leader cannot be reached: retry"))
	return st
}

// forwardError is forwardStatus as the error a call answers.
func (s *Service) forwardError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	for _, d := range status.Convert(err).Details() {
		if _, ok := d.(*restv1.Status); ok {
			return err // the member's own answer
		}
	}
	return s.errorOf(ctx, mqerr.Wrap(mqerr.KindReplicationLost, err, "the data group's leader cannot be reached: retry"))
}
