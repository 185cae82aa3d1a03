package grpcserver

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Every MessagingService RPC can be answered with only a status (the
// interceptors need it for CLIENT_ID_REQUIRED).
func TestStatusOnlyCoversEveryMethod(t *testing.T) {
	for _, m := range v2.MessagingService_ServiceDesc.Methods {
		full := "/" + v2.MessagingService_ServiceDesc.ServiceName + "/" + m.MethodName
		if statusOnlyResponse(full, statusClientID) == nil {
			t.Errorf("statusOnlyResponse does not know %s", full)
		}
	}
	for _, s := range v2.MessagingService_ServiceDesc.Streams {
		full := "/" + v2.MessagingService_ServiceDesc.ServiceName + "/" + s.StreamName
		rec := &sentStream{}
		if err := sendStatusOnly(full, rec, statusClientID); err != nil {
			t.Fatal(err)
		}
		if len(rec.sent) == 0 {
			t.Errorf("sendStatusOnly wrote nothing for %s", full)
		}
	}
}

// sentStream records what a handler sends.
type sentStream struct {
	grpc.ServerStream
	sent []any
}

func (r *sentStream) Context() context.Context { return context.Background() }
func (r *sentStream) SendMsg(m any) error      { r.sent = append(r.sent, m); return nil }
