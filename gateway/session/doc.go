// Package session is mqgate's registry of live clients of the v2 gRPC
// edge (the classic remoting listener keeps its own, per connection). A
// client is keyed by its client id (`x-mq-client-id`) and holds:
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
// session must not import gen/, grpc, protobuf, broker/ or any listener
// package: it is shared by the gRPC and remoting edges.
package session
