// Package badinput throws bad input at the real `mqgate serve` binary
// on loopback: oversized, malformed, truncated, slow and unauthenticated
// requests on the gRPC, REST and remoting listeners, and floods
// (limits_test.go): silent connections on every listener under a low
// descriptor limit, connections that never finish their handshake,
// hundreds of concurrent 5 MiB sends, unsigned 16 MiB remoting frames.
// Each case asserts a clear error with the right status, and that the
// process stays up and serves a signed client afterwards; the process's
// peak RSS (VmHWM) is logged. Requests that name messages by commit-log
// offset or key are thrown at it as a consume-only user, who must read
// nothing of a topic it may not consume.
//
// The package has no non-test code. It drives gRPC with the official Go
// client's protocol package (a raw client: the official one validates
// sizes locally; the send floods go over net/http's HTTP/2 client, so
// that 750 calls share one request body) and remoting with mqgate's test
// client; like internal/e2e
// it must not import mqgate's gen/apache/rocketmq/v2.
package badinput
