// Package session is mqgate's registry of live gRPC clients (the
// apache.rocketmq.v2 clients of gateway/v2service; the transport,
// gateway/grpcserver, marks a client seen on every call). A client is
// keyed by its client id (`x-mq-client-id`) and holds:
//
//   - its latest Settings as a protocol-neutral view (client type, group,
//     subscriptions, publishing topics, timeouts, user agent);
//   - when it was last seen (any call, heartbeat or control-stream frame);
//   - its current control stream (the gRPC Telemetry stream), through which
//     the server pushes commands such as transaction check-backs
//     (SendToProducer reaches one live producer of a topic; the gRPC edge
//     builds the command and adapts this to broker/txn.CheckBackSender,
//     which session cannot import). Sends on one stream are serialised by
//     a Link; commands are opaque values that the edge owning the stream
//     knows how to write.
//
// A client not seen for the liveness timeout (120 s) expires;
// expiry and an explicit termination call Config.OnGone (the node passes
// the broker's ReleaseClient). Time comes from internal/clock; the expiry
// scanner is the registry's one goroutine, started and stopped through
// lifecycle (Start/Stop).
//
// Locking: clients live in a sync.Map (the hot path, Touch, takes no
// lock); client.mu guards one client's current link; Link.mu serialises
// writes to one stream. Locks never nest: each is released before another
// is taken. OnGone runs with no lock held.
//
// Classic remoting clients are not here: gateway/remoting keeps its own
// registry (gateway/remoting/clients.go), because what it must answer is different — the
// members of each producer and consumer group with their subscriptions
// and connection (consumer lists for client-side rebalancing, pulls,
// NOTIFY_CONSUMER_IDS_CHANGED), learnt from HEART_BEAT and dropped when
// the connection closes; a v2 client has one record here, with its
// Settings and its Telemetry stream, and its expiry releases deliveries
// the broker auto-renews for it, which classic clients never hold. The
// two meet only in the broker's transaction check-back, which asks both
// (broker.CheckBackFanOut).
//
// Files: session.go holds the registry, its clients, links and the expiry
// scanner.
//
// session must not import gen/, grpc, protobuf, broker/ or any listener
// package: it stays protocol-neutral, so another edge could use it.
package session
