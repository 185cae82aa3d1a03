// Package v2service implements apache.rocketmq.v2.MessagingService: the
// handlers that convert between v2 messages and broker calls. It is
// registered on the gRPC transport of gateway/grpcserver, whose
// interceptors (auth, drain admission, client id, call log) run before
// every handler; it reads the caller's client id and request id through
// grpcserver.ClientID and grpcserver.RequestID.
//
// Files: service.go (MessagingService, its Broker port and the protocol
// constants), one file per RPC family — route.go (QueryRoute,
// QueryAssignment), client.go (Heartbeat, Telemetry,
// NotifyClientTermination), producer.go (SendMessage, RecallMessage),
// consumer.go (Receive, Ack, ChangeInvisibleDuration,
// ForwardMessageToDeadLetterQueue), transaction.go (EndTransaction and the
// broker's transaction check-back port over the session registry's
// Telemetry streams), offset.go (PullMessage, UpdateOffset, GetOffset,
// QueryOffset), lite.go (SyncLiteSubscription, its LiteBroker port, and
// the NotifyUnsubscribeLiteCommand sent to a client whose lite topic
// expired), groups.go (a cluster of several data groups: the Groups port,
// the group each request concerns by the groups' placement.Layout,
// forwarding to the member serving it, counted for the metrics,
// the routes naming each queue at its group's leader, and the steering
// of the Go client's channels to the leaders), unsupported.go (what an
// unserved RPC answers)
// — validate.go (names, namespaces), convert.go (v2 ↔ domain) and
// status.go (errors → v2 statuses and gRPC codes, through gateway/errcodes,
// the one mqerr.Kind → code table shared with gateway/restmessaging and
// gateway/admin; that table stays its own package because those edges
// must not import this one).
//
// Business outcomes travel as the response's status with gRPC OK, as
// upstream answers them; gRPC errors are used only for draining (UNAVAILABLE), Telemetry
// settings validation (INVALID_ARGUMENT / INTERNAL), transport
// failures, and the UNAVAILABLE that steers a Go client's channel that
// reached the wrong member of a cluster of several data groups (nothing
// done: it reconnects and tries again). Resources are keyed "ns%name" inside mqgate when a namespace
// is set; outgoing Resources carry the bare name and the namespace.
//
// Clients are tracked in gateway/session's registry: every call marks its
// client seen (the transport's client-id interceptor), Telemetry streams
// become the clients' control links. Classic remoting clients are tracked
// separately by gateway/remoting (see its doc.go).
//
// The component tests drive the service through the real transport
// (grpcserver.New) over bufconn against the real broker, so the
// interceptors that need a MessagingService (auth, drain, client id) are
// tested here too.
//
// Files: codec.go holds ServerCodec, the hand encoder of the receive frames
// that carry messages.
//
// The v2 and domain types meet only in this package's convert files, and
// every error leaving a handler is mapped in status.go. It may import
// gateway/grpcserver (the transport); it must not import storage/ or
// another listener package (httpserver, restmessaging, remoting, admin).
package v2service
