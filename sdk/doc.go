// Package sdk is mqgate's own small Go client for the RocketMQ 5 v2 gRPC
// API: Dial a server, send with a Producer, receive, acknowledge and
// extend invisibility with a SimpleConsumer, and Close everything with
// one deadline.
//
//	c, err := sdk.Dial(ctx, "127.0.0.1:8081")
//	p, err := c.NewProducer(ctx, sdk.ProducerConfig{Topics: []string{"orders"}})
//	r, err := p.Send(ctx, &sdk.Message{Topic: "orders", Body: []byte("hi")})
//	s, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: "billing", Subscriptions: map[string]string{"orders": "*"}})
//	ms, err := s.Receive(ctx, 16, 30*time.Second)
//	err = s.Ack(ctx, ms[0])
//	err = c.Close(ctx)
//
// # Sends: one deadline, known outcomes
//
// A Send (or SendBatch) has ONE deadline: ctx's, or ProducerConfig.Timeout
// when ctx has none. Every attempt runs under what remains of it; no
// attempt starts after it. Attempts are repeated, with the same message
// id, only when the previous one is known to have stored nothing:
// TOO_MANY_REQUESTS, gRPC UNAVAILABLE answered by the server ("nothing
// happened", mqgate's drain promise) or a request that never left the
// client. Every failure says what may have happened:
//
//   - errors.Is(err, ErrNotStored): the message was not stored (refused,
//     never sent, or only attempts that stored nothing).
//   - errors.Is(err, ErrOutcomeUnknown): the request left and no answer
//     says what happened (deadline, broken connection, internal error),
//     or a replica group did not commit it in time (HA_NOT_AVAILABLE,
//     SLAVE_PERSISTENCE_TIMEOUT, tried again up to the attempts allowed).
//     It may have been stored; retrying may duplicate it (same message id).
//   - errors.Is(err, ErrNotDurable): stored, but the server could not
//     confirm the flush in time (MASTER_PERSISTENCE_TIMEOUT); the receipt
//     is returned too.
//
// # Batching
//
// ProducerConfig.Linger makes a producer batch on its own, as Kafka's
// linger.ms and batch.size do: Send and SendAsync put each message in a
// batch of its topic and message group, sent as one SendMessage call once
// it holds BatchMessages messages or BatchBytes bytes, or Linger after its
// first message. Results and errors stay per message (a batch refused as a
// whole is resent message by message; each message of a batch whose
// outcome is unknown fails with ErrOutcomeUnknown), and the batches of one
// message group are sent one after the other, so the group's order is
// kept.
// SendAsync keeps up to MaxBuffered messages in flight; Flush and Close
// send what is gathered.
//
// # Consumers return errors
//
// Ack and ChangeInvisibleDuration return the server's verdict (for
// example errors.Is(err, ErrInvalidReceiptHandle) for an expired or
// superseded handle); nothing is retried or dropped silently.
//
// # Sessions
//
// Each Producer and SimpleConsumer is one client of the server with its
// own client id: it opens a Telemetry stream, sends its Settings, waits
// for the server's Settings reply (New* fails if none arrives before ctx
// ends), keeps the stream open (reopening it if the server ends it),
// heartbeats every 10 s and answers server commands minimally. Close
// sends NotifyClientTermination, ends the stream and waits for its
// goroutines; what did not finish by ctx's deadline is named in the
// returned *CloseError.
//
// Files: client.go (Dial, options, Close), producer.go (Producer: sends and
// their one deadline), batch.go (a lingering producer's batches,
// SendAsync and Flush), consumer.go (SimpleConsumer: receive, ack, change
// invisibility), telemetry.go (each producer's and consumer's session: its
// Telemetry stream, settings and heartbeats), message.go (messages,
// receipts, message ids), errors.go (outcome sentinels and status errors),
// stats.go (what each RPC attempt did on the wire, which decides whether a
// failed send may have stored its message).
//
// # Imports
//
// sdk imports only the generated stubs (gen/apache/rocketmq/v2), grpc,
// protobuf and the standard library: it is a module of its own, and a
// program using it takes none of the server's dependencies
// (internal/archtest enforces it). It must never import mqgate's server
// packages.
package sdk
