// Package grpcserver is mqgate's gRPC edge: server options (TLS and
// plaintext on one port, keepalive, message sizes), the interceptor chain,
// health and reflection, and the apache.rocketmq.v2 MessagingService whose
// handlers convert between v2 messages and broker calls.
//
// Files: server.go (options, interceptor order), limits.go (the receive
// limit, the auth tap that refuses unsigned sends before their messages
// are read, the in-flight bytes budget), calltelemetry.go (the
// call metric and trace-context interceptor; otelgrpc's stats handler only
// while spans are exported), bufpool.go (the non-clearing buffer pool
// given to grpc-go), clientid.go (the client-id
// interceptors and the status-only response of every method), service.go
// (MessagingService, its Broker port and constants), one file per RPC
// family — route.go (QueryRoute, QueryAssignment), client.go (Heartbeat,
// Telemetry, NotifyClientTermination), producer.go (SendMessage,
// RecallMessage), consumer.go (Receive, Ack, ChangeInvisibleDuration,
// ForwardMessageToDeadLetterQueue), transaction.go (EndTransaction and
// the broker's transaction check-back port over the session registry's
// Telemetry streams), offset.go (PullMessage, UpdateOffset, GetOffset,
// QueryOffset), unsupported.go (NOT_IMPLEMENTED for SyncLiteSubscription)
// — validate.go (names, namespaces), convert.go (v2 ↔ domain) and
// status.go (errors → v2 statuses and gRPC codes, through gateway/v2status,
// the one mqerr.Kind → code table).
//
// Business outcomes travel as the response's status with gRPC OK (spec
// §1.6); gRPC errors are used only for draining (UNAVAILABLE), Telemetry
// settings validation (INVALID_ARGUMENT / INTERNAL), unsigned sends with
// auth on (UNAUTHENTICATED, from the tap), requests over the receive limit
// (RESOURCE_EXHAUSTED) and transport failures. Resources are keyed "ns%name" inside mqgate when a namespace
// is set; outgoing Resources carry the bare name and the namespace.
//
// The v2 and domain types meet only in this package's convert files, and
// every error leaving a handler is mapped in status.go. It must not import
// storage/ or another listener package (rest, remoting, admin); client
// state lives in gateway/session.
package grpcserver
