package admin

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/auth"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// Who may call what. The gRPC listener requires an admin user for every
// admin method but the views below (grpcserver.Options.AdminViews), which
// any authenticated user may call: each view checks what it touches with
// the caller's permissions and answers with what the caller may see only.
//
//   - a topic (GetTopic, DescribeTopic) to whoever may publish to or
//     consume it, as its route is; ListTopics lists those topics;
//   - a group (GetGroup, DescribeGroup, ListDeadLetters) to whoever may
//     consume as it; ListGroups lists those groups;
//   - message bodies (LookupMessage, BrowseMessages) to whoever may
//     consume their topic (a group's retry and dead-letter topics go with
//     the group);
//   - a description lists only the groups, or topics, the caller may see,
//     and GetStats only the topics and groups it may see;
//   - WhoAmI to anyone signed in.
//
// ListClients, GetClusterStatus and every change (create, delete, reset,
// redrive, leadership transfer) stay admin only. With auth off everything
// is open.
var views = map[string]bool{
	adminv1.AdminService_ListTopics_FullMethodName:      true,
	adminv1.AdminService_GetTopic_FullMethodName:        true,
	adminv1.AdminService_DescribeTopic_FullMethodName:   true,
	adminv1.AdminService_ListGroups_FullMethodName:      true,
	adminv1.AdminService_GetGroup_FullMethodName:        true,
	adminv1.AdminService_DescribeGroup_FullMethodName:   true,
	adminv1.AdminService_LookupMessage_FullMethodName:   true,
	adminv1.AdminService_BrowseMessages_FullMethodName:  true,
	adminv1.AdminService_ListDeadLetters_FullMethodName: true,
	adminv1.AdminService_GetStats_FullMethodName:        true,
	adminv1.AdminService_WhoAmI_FullMethodName:          true,
}

// OpenToUsers reports whether an authenticated user who is not an admin
// may call the admin method (a gRPC full method name): the views, which
// check what they touch themselves.
func OpenToUsers(fullMethod string) bool { return views[fullMethod] }

// check answers PermissionDenied unless the caller may do acc.
func (s *Service) check(ctx context.Context, acc auth.Access) error {
	if err := s.opts.Auth.Allow(ctx, acc); err != nil {
		return status.Error(codes.PermissionDenied, mqerr.Message(err))
	}
	return nil
}

// sees reports whether the caller may see what acc names.
func (s *Service) sees(ctx context.Context, acc auth.Access) bool {
	return s.opts.Auth.Allow(ctx, acc) == nil
}
