package grpcserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mqgate/mqgate/internal/testutil"
)

// A panic in a handler becomes INTERNAL with the server's message, is
// logged with its stack and the call's outcome, and is counted in
// rpc.server.call.duration as INTERNAL; the server keeps serving.
func TestInterceptorsRecoverPanic(t *testing.T) {
	var logs testutil.SyncBuffer
	reader := sdkmetric.NewManualReader()
	srv := New(Options{
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	// A one-method service whose handler panics when asked to.
	srv.GRPC.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Panicky",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(_ context.Context, req any) (any, error) {
				if req.(*wrapperspb.StringValue).GetValue() == "panic" {
					panic("asked to panic")
				}
				return req, nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Panicky/Do"}, h)
		}}},
	}, struct{}{})
	conn := serveBufconn(t, srv)
	call := func(v string) error {
		return conn.Invoke(callCtx(t), "/test.Panicky/Do", wrapperspb.String(v), new(wrapperspb.StringValue))
	}

	err := call("panic")
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "logged by the server") {
		t.Fatalf("panicking call: %v, want INTERNAL", err)
	}
	if out := logs.String(); !strings.Contains(out, "panic in gRPC handler") || !strings.Contains(out, "asked to panic") ||
		!strings.Contains(out, "grpc.code=Internal") {
		t.Fatalf("log does not show the panic and the call's outcome:\n%s", out)
	}
	if err := call("calm"); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	got := durations(t, reader)
	const method = "test.Panicky/Do"
	if got[method+"|INTERNAL|INTERNAL"] != 1 || got[method+"|OK|"] != 1 {
		t.Fatalf("rpc.server.call.duration counts %v", got)
	}
}
