package httpserver

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// inProcessBuffer is the in-memory pipe's buffer per direction.
const inProcessBuffer = 1 << 20

// maxInProcessMsg bounds one message on the in-process connection: above
// the gRPC server's own receive limit (grpcserver.RecvLimit) and a receive
// of 32 messages of 4 MiB.
const maxInProcessMsg = 256 << 20

// InProcess is how REST calls reach the node's own gRPC server: an
// in-memory listener the gRPC server serves (no socket, no TLS) and a
// client connection dialed through it. Calls pass the gRPC server's whole
// interceptor chain (request id, logging, drain admission, recovery) and
// stats handler (spans, RPC metrics), exactly like calls from the network.
type InProcess struct {
	lis  *bufconn.Listener
	conn *grpc.ClientConn
}

// NewInProcess creates the listener and the (lazily connecting) client.
// Serve Listener() on the gRPC server; Close the InProcess after the HTTP
// server stopped.
func NewInProcess() (*InProcess, error) {
	lis := bufconn.Listen(inProcessBuffer)
	conn, err := grpc.NewClient("passthrough:///mqgate-in-process",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxInProcessMsg), grpc.MaxCallSendMsgSize(maxInProcessMsg)),
		// Nothing to retry or configure in process; this saves the retry
		// buffering on every call.
		grpc.WithDisableRetry(),
		grpc.WithDisableServiceConfig(),
	)
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("in-process gRPC connection: %w", err)
	}
	return &InProcess{lis: lis, conn: conn}, nil
}

// Listener is what the gRPC server serves for REST.
func (p *InProcess) Listener() net.Listener { return p.lis }

// Conn is the client side, for Options.API.
func (p *InProcess) Conn() *grpc.ClientConn { return p.conn }

// Close closes the client connection. The listener belongs to the gRPC
// server serving it, which closes it when it stops (an unserved bufconn
// listener holds only memory).
func (p *InProcess) Close() error { return p.conn.Close() }
