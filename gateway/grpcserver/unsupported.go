package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// RPCs of later issues. Each answers NOT_IMPLEMENTED (50100) as its status
// payload with gRPC OK — never a fake success — so a client that calls one
// gets a clear, non-transport error (spec §1.6).

// QueryAssignment is for push consumers (spec §5.7).
func (s *MessagingService) QueryAssignment(context.Context, *v2.QueryAssignmentRequest) (*v2.QueryAssignmentResponse, error) {
	return &v2.QueryAssignmentResponse{Status: statusNotYet}, nil
}

// PullMessage is offset-based consumption (spec §5.13): a single status
// frame, then gRPC OK.
func (s *MessagingService) PullMessage(_ *v2.PullMessageRequest, stream grpc.ServerStreamingServer[v2.PullMessageResponse]) error {
	return stream.Send(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Status{Status: statusNotYet}})
}

// UpdateOffset stores a committed offset (spec §5.13).
func (s *MessagingService) UpdateOffset(context.Context, *v2.UpdateOffsetRequest) (*v2.UpdateOffsetResponse, error) {
	return &v2.UpdateOffsetResponse{Status: statusNotYet}, nil
}

// GetOffset reads a committed offset (spec §5.13).
func (s *MessagingService) GetOffset(context.Context, *v2.GetOffsetRequest) (*v2.GetOffsetResponse, error) {
	return &v2.GetOffsetResponse{Status: statusNotYet}, nil
}

// QueryOffset resolves a queue position (spec §5.13).
func (s *MessagingService) QueryOffset(context.Context, *v2.QueryOffsetRequest) (*v2.QueryOffsetResponse, error) {
	return &v2.QueryOffsetResponse{Status: statusNotYet}, nil
}

// EndTransaction commits or rolls back a half message (spec §5.5).
func (s *MessagingService) EndTransaction(context.Context, *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	return &v2.EndTransactionResponse{Status: statusNotYet}, nil
}

// RecallMessage cancels a delay message (spec §5.6).
func (s *MessagingService) RecallMessage(context.Context, *v2.RecallMessageRequest) (*v2.RecallMessageResponse, error) {
	return &v2.RecallMessageResponse{Status: statusNotYet}, nil
}

// SyncLiteSubscription is for lite consumers (spec §5.14).
func (s *MessagingService) SyncLiteSubscription(context.Context, *v2.SyncLiteSubscriptionRequest) (*v2.SyncLiteSubscriptionResponse, error) {
	return &v2.SyncLiteSubscriptionResponse{Status: statusNotYet}, nil
}
