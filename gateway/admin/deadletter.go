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
	page, err := s.b.DeadLetters(ctx, group, int(req.GetMax()))
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
	group, err := deadLetterArgs(req.GetGroup(), req.GetMax())
	if err != nil {
		return nil, err
	}
	res, err := s.b.RedriveDeadLetters(ctx, group, int(req.GetMax()))
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
