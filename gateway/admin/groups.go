package admin

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/forwarding"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// Groups routes the views of stored messages over a cluster's data
// groups (Options.Groups; nil: the Broker holds every queue). A message
// lookup asks every group: the brokers of those this member serves, and
// each other member leading some, forwarded (with the caller's metadata,
// so that member checks the caller again) and answered from its own
// groups only; a browse goes to the group holding its queue.
type Groups interface {
	// Local is the brokers of the groups this member serves.
	Local() []Inspector
	// Remote is a connection to each other member leading groups this
	// member does not serve (none for a forwarded call: forwarding).
	Remote(ctx context.Context) []grpc.ClientConnInterface
	// Queue is where queue q of topic is served: a broker here, or a
	// connection to the member leading its group.
	Queue(ctx context.Context, topic string, q int32) (Inspector, grpc.ClientConnInterface, error)
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
		resp := new(adminv1.LookupMessageResponse)
		if err := conn.Invoke(forwarding.Context(ctx), adminv1.AdminService_LookupMessage_FullMethodName, req, resp); err != nil {
			return nil, forwardedStatus(err)
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
