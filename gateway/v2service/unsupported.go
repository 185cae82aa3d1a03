package v2service

import (
	"context"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// RPCs mqgate does not implement. Each answers NOT_IMPLEMENTED (50100) as
// its status payload with gRPC OK — never a fake success — so a client
// that calls one gets a clear, non-transport error.

// SyncLiteSubscription is for lite consumers; lite topics are
// not implemented, and Telemetry refuses lite client types.
func (s *MessagingService) SyncLiteSubscription(context.Context, *v2.SyncLiteSubscriptionRequest) (*v2.SyncLiteSubscriptionResponse, error) {
	return &v2.SyncLiteSubscriptionResponse{Status: statusNotYet}, nil
}
