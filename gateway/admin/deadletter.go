package admin

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// ListDeadLetters lists a group's pending dead letters
// (broker.DeadLetters).
func (s *Service) ListDeadLetters(ctx context.Context, req *adminv1.ListDeadLettersRequest) (*adminv1.ListDeadLettersResponse, error) {
	group, err := deadLetterArgs(req.GetGroup(), req.GetMax())
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, auth.Access{Group: group}); err != nil {
		return nil, err
	}
	if s.opts.Groups != nil {
		max := int(req.GetMax())
		if max <= 0 {
			max = 32
		}
		return inGroups(ctx, s, req, adminv1.AdminService_ListDeadLetters_FullMethodName, deadLettersAt, mergeDeadLetters(max))
	}
	return deadLettersAt(ctx, s.b, req)
}

// deadLettersAt is ListDeadLetters at broker b.
func deadLettersAt(ctx context.Context, b Broker, req *adminv1.ListDeadLettersRequest) (*adminv1.ListDeadLettersResponse, error) {
	group := req.GetGroup()
	page, err := b.DeadLetters(ctx, group, int(req.GetMax()))
	if err != nil {
		return nil, toStatus(err, "consumer group", group)
	}
	out := &adminv1.ListDeadLettersResponse{Topic: page.Topic, Pending: page.Pending, Messages: make([]*adminv1.StoredMessage, 0, len(page.Messages))}
	for _, m := range page.Messages {
		out.Messages = append(out.Messages, storedToV1(broker.FoundMessage{Delivered: *m}, MaxLookupBody))
	}
	return out, nil
}

// RedriveDeadLetters sends a group's oldest pending dead letters back to
// their topics (broker.RedriveDeadLetters). A redrive that stopped at a
// failed send after sending some answers with those: they are stored and
// marked redriven, and the next call meets the failure again first.
func (s *Service) RedriveDeadLetters(ctx context.Context, req *adminv1.RedriveDeadLettersRequest) (*adminv1.RedriveDeadLettersResponse, error) {
	if _, err := deadLetterArgs(req.GetGroup(), req.GetMax()); err != nil {
		return nil, err
	}
	if s.opts.Groups != nil {
		return s.redriveInGroups(ctx, req)
	}
	return redriveAt(ctx, s.b, req)
}

// redriveInGroups redrives each data group's dead letters (each group
// dead-letters into a queue of its own), one group after the other, until
// max are sent back; the groups not asked count in what is pending.
func (s *Service) redriveInGroups(ctx context.Context, req *adminv1.RedriveDeadLettersRequest) (*adminv1.RedriveDeadLettersResponse, error) {
	left := int32(req.GetMax())
	if left <= 0 {
		left = 32
	}
	// Each group's part: at a broker this member serves, or forwarded.
	type part struct {
		redrive func(max int32) (*adminv1.RedriveDeadLettersResponse, error)
		list    func() (*adminv1.ListDeadLettersResponse, error)
	}
	var parts []part
	for _, b := range s.opts.Groups.Local() {
		parts = append(parts, part{
			redrive: func(max int32) (*adminv1.RedriveDeadLettersResponse, error) {
				return redriveAt(ctx, b, &adminv1.RedriveDeadLettersRequest{Group: req.GetGroup(), Max: max})
			},
			list: func() (*adminv1.ListDeadLettersResponse, error) {
				return deadLettersAt(ctx, b, &adminv1.ListDeadLettersRequest{Group: req.GetGroup(), Max: 1})
			},
		})
	}
	for _, conn := range s.opts.Groups.Remote(ctx) {
		parts = append(parts, part{
			redrive: func(max int32) (*adminv1.RedriveDeadLettersResponse, error) {
				return forwardTo[adminv1.RedriveDeadLettersResponse](ctx, conn, adminv1.AdminService_RedriveDeadLetters_FullMethodName,
					&adminv1.RedriveDeadLettersRequest{Group: req.GetGroup(), Max: max})
			},
			list: func() (*adminv1.ListDeadLettersResponse, error) {
				return forwardTo[adminv1.ListDeadLettersResponse](ctx, conn, adminv1.AdminService_ListDeadLetters_FullMethodName,
					&adminv1.ListDeadLettersRequest{Group: req.GetGroup(), Max: 1})
			},
		})
	}
	out := &adminv1.RedriveDeadLettersResponse{}
	for _, p := range parts {
		if left <= 0 { // asked for nothing more: its pending count
			r, err := p.list()
			if err != nil {
				return nil, err
			}
			out.Pending += r.GetPending()
			continue
		}
		r, err := p.redrive(left)
		if err != nil {
			return nil, err
		}
		out.Pending += r.GetPending()
		out.Redriven = append(out.Redriven, r.GetRedriven()...)
		left -= int32(len(r.GetRedriven()))
	}
	return out, nil
}

// redriveAt is RedriveDeadLetters at broker b.
func redriveAt(ctx context.Context, b Broker, req *adminv1.RedriveDeadLettersRequest) (*adminv1.RedriveDeadLettersResponse, error) {
	group := req.GetGroup()
	res, err := b.RedriveDeadLetters(ctx, group, int(req.GetMax()))
	if err != nil && len(res.Redriven) == 0 {
		return nil, toStatus(err, "consumer group", group)
	}
	if err != nil {
		slog.WarnContext(ctx, "admin: redrive stopped early", "group", group, "redriven", len(res.Redriven), "err", err)
	}
	out := &adminv1.RedriveDeadLettersResponse{Pending: res.Pending, Redriven: make([]*adminv1.RedrivenMessage, 0, len(res.Redriven))}
	for _, m := range res.Redriven {
		out.Redriven = append(out.Redriven, &adminv1.RedrivenMessage{MessageId: m.MessageID, Topic: m.Topic, QueueId: m.QueueID, QueueOffset: m.QueueOffset})
	}
	return out, nil
}

func deadLetterArgs(group string, max int32) (string, error) {
	if strings.TrimSpace(group) == "" {
		return "", status.Error(codes.InvalidArgument, "consumer group name is required")
	}
	if max < 0 || max > broker.MaxDeadLetters {
		return "", status.Errorf(codes.InvalidArgument, "consumer group %q: max %d: want 0 (32) to %d", group, max, broker.MaxDeadLetters)
	}
	return group, nil
}
