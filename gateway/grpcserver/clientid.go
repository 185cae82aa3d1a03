package grpcserver

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/gateway/session"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

const messagingPrefix = "/" + "apache.rocketmq.v2.MessagingService" + "/"

var statusClientID = &v2.Status{Code: v2.Code_CLIENT_ID_REQUIRED, Message: "the x-mq-client-id header is required"}

// clientIDUnary answers CLIENT_ID_REQUIRED (as the response's status, with
// gRPC OK) on every MessagingService call without x-mq-client-id, and marks
// the client seen otherwise.
func clientIDUnary(sessions *session.Registry) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasPrefix(info.FullMethod, messagingPrefix) {
			return h(ctx, req)
		}
		id := ClientID(ctx)
		if id == "" {
			if resp := statusOnlyResponse(info.FullMethod, statusClientID); resp != nil {
				return resp, nil
			}
		} else if sessions != nil {
			sessions.Touch(id)
		}
		return h(ctx, req)
	}
}

// clientIDStream does the same for the streaming RPCs: ReceiveMessage gets
// a status frame and a delivery timestamp, PullMessage a status frame,
// Telemetry a TelemetryCommand carrying the status; then gRPC OK.
func clientIDStream(sessions *session.Registry) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, messagingPrefix) {
			return h(srv, ss)
		}
		id := ClientID(ss.Context())
		if id == "" {
			return sendStatusOnly(info.FullMethod, ss, statusClientID)
		}
		if sessions != nil {
			sessions.Touch(id)
		}
		return h(srv, ss)
	}
}

// statusOnlyResponse builds the response of a unary MessagingService method
// with only its status set, or nil for a method it does not know (a new
// RPC must be added here: TestStatusOnlyCoversEveryMethod).
func statusOnlyResponse(fullMethod string, st *v2.Status) any {
	switch fullMethod {
	case v2.MessagingService_QueryRoute_FullMethodName:
		return &v2.QueryRouteResponse{Status: st}
	case v2.MessagingService_Heartbeat_FullMethodName:
		return &v2.HeartbeatResponse{Status: st}
	case v2.MessagingService_SendMessage_FullMethodName:
		return &v2.SendMessageResponse{Status: st}
	case v2.MessagingService_QueryAssignment_FullMethodName:
		return &v2.QueryAssignmentResponse{Status: st}
	case v2.MessagingService_AckMessage_FullMethodName:
		return &v2.AckMessageResponse{Status: st}
	case v2.MessagingService_ForwardMessageToDeadLetterQueue_FullMethodName:
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: st}
	case v2.MessagingService_UpdateOffset_FullMethodName:
		return &v2.UpdateOffsetResponse{Status: st}
	case v2.MessagingService_GetOffset_FullMethodName:
		return &v2.GetOffsetResponse{Status: st}
	case v2.MessagingService_QueryOffset_FullMethodName:
		return &v2.QueryOffsetResponse{Status: st}
	case v2.MessagingService_EndTransaction_FullMethodName:
		return &v2.EndTransactionResponse{Status: st}
	case v2.MessagingService_NotifyClientTermination_FullMethodName:
		return &v2.NotifyClientTerminationResponse{Status: st}
	case v2.MessagingService_ChangeInvisibleDuration_FullMethodName:
		// The receipt handle is unknown here; the handlers themselves
		// always echo it.
		return &v2.ChangeInvisibleDurationResponse{Status: st}
	case v2.MessagingService_RecallMessage_FullMethodName:
		return &v2.RecallMessageResponse{Status: st}
	case v2.MessagingService_SyncLiteSubscription_FullMethodName:
		return &v2.SyncLiteSubscriptionResponse{Status: st}
	}
	return nil
}

// sendStatusOnly answers a streaming MessagingService method with only a
// status, in the shape its clients expect, and returns the error to end
// the RPC with (nil: gRPC OK).
func sendStatusOnly(fullMethod string, ss grpc.ServerStream, st *v2.Status) error {
	switch fullMethod {
	case v2.MessagingService_ReceiveMessage_FullMethodName:
		if err := ss.SendMsg(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}}); err != nil {
			return err
		}
		return ss.SendMsg(deliveryTimestampFrame())
	case v2.MessagingService_PullMessage_FullMethodName:
		return ss.SendMsg(&v2.PullMessageResponse{Content: &v2.PullMessageResponse_Status{Status: st}})
	case v2.MessagingService_Telemetry_FullMethodName:
		return ss.SendMsg(&v2.TelemetryCommand{Status: st})
	}
	return nil
}

func deliveryTimestampFrame() *v2.ReceiveMessageResponse {
	return &v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}}
}
