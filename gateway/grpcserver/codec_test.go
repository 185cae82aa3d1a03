package grpcserver

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// countingCodec is the proto codec, counting what it does.
type countingCodec struct {
	base                encoding.CodecV2
	marshals, unmarshal atomic.Int32
}

func (c *countingCodec) Name() string { return grpcproto.Name }

func (c *countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.marshals.Add(1)
	return c.base.Marshal(v)
}

func (c *countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.unmarshal.Add(1)
	return c.base.Unmarshal(data, v)
}

// Options.Codec encodes the server's responses and decodes its requests.
func TestServerUsesCodec(t *testing.T) {
	codec := &countingCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	srv := New(Options{Codec: codec})
	srv.GRPC.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Echo/Do"},
				func(_ context.Context, req any) (any, error) { return req, nil })
		}}},
	}, struct{}{})
	conn := serveBufconn(t, srv)
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(callCtx(t), "/test.Echo/Do", wrapperspb.String("hello"), out); err != nil || out.GetValue() != "hello" {
		t.Fatalf("call: %v %q", err, out.GetValue())
	}
	if codec.marshals.Load() != 1 || codec.unmarshal.Load() != 1 {
		t.Fatalf("codec marshaled %d and unmarshaled %d messages, want 1 and 1", codec.marshals.Load(), codec.unmarshal.Load())
	}
}
