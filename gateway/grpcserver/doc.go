// Package grpcserver is mqgate's gRPC transport: the one grpc.Server every
// gRPC service of the node is registered on (apache.rocketmq.v2
// MessagingService from gateway/v2service, mqgate.rest.v1 from
// gateway/restmessaging, mqgate.admin.v1 from gateway/admin), its options (TLS
// and plaintext on one port, keepalive, message sizes, stream workers),
// the interceptor chain, health and reflection.
//
// Files: server.go (options, interceptor order, drain admission, the
// per-call client id and request id: ClientID, RequestID; callctx.go sets
// them for direct calls; callInfoTap, which reads the client id and
// whether a trace context came from the headers the transport decoded,
// once per call; the handshake deadline, static flow-control windows and
// streams per connection), limits.go (the receive limit, the
// auth tap that refuses unsigned sends, and sends from users who may
// publish nowhere, before their messages are read), reads.go (the request
// budget: a unary request is read by an interceptor once the receive
// limit is reserved under its caller's share, an unsigned one is refused
// unread), calltelemetry.go (the call metric and trace-context
// interceptor; otelgrpc's stats handler only while spans are exported; in
// a node the metric is kept in atomic counters and exported through
// internal/telemetry's external histograms), calllog.go (the call log),
// auth.go (request signatures and what a call touches), clientid.go (the client-id interceptors and the
// status-only response of every MessagingService method, which the
// interceptors answer with for CLIENT_ID_REQUIRED and UNAUTHORIZED),
// inprocess.go (RegisterService and InProcess: unary calls from the node's
// REST API served on the caller's goroutine through the same tap, stats
// handler and interceptor chain, without encoding or HTTP/2),
// bufpool.go (the non-clearing buffer pool given to grpc-go), tls.go
// (certificates and the dual TLS/plaintext credentials).
//
// The transport knows the v2 protocol only as far as its interceptors
// must answer in it (statuses carried with gRPC OK; an unsigned send with
// auth on is refused by the tap with UNAUTHENTICATED before it is read,
// a request over the receive limit gets RESOURCE_EXHAUSTED); the
// handlers and their Kind → status mapping live in gateway/v2service,
// which imports this package for ClientID and RequestID. grpcserver must
// not import a service or listener package (v2service, restmessaging, admin,
// httpserver, remoting), broker/ or storage/; client state lives in
// gateway/session.
package grpcserver
