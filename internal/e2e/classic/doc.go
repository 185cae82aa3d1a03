// Package classic holds mqgate's end-to-end tests of the classic
// remoting listener: each starts the real `mqgate serve` binary on free
// loopback ports (internal/testutil) and drives its remoting port with
// the classic RocketMQ Go client (github.com/apache/rocketmq-client-go/v2
// v2.1.2) — and, for interop, the official RocketMQ 5 gRPC client v5.1.3
// against the same process.
//
// The package has no non-test code. Like internal/e2e it must not import
// mqgate's gen/apache/rocketmq/v2 (the v5 client registers the same
// protobuf names). The v2.1.2 remoting client has no protobufs, so the two
// clients live side by side. Both clients race internally: these tests
// skip under -race unless MQGATE_E2E_RACE is set (make test runs
// ./internal/e2e/... a second time without -race).
package classic
