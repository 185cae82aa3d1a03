// Package bench is `mqgate bench`: a load generator that measures a
// mqgate (one it starts as a child process of the same binary, or
// --server) against a plain gRPC echo server run in the same invocation,
// and reports each figure as a ratio to the echo. Cmd is the command; the
// echo server is its hidden subcommand `mqgate bench echo-server`
// (echo.go), started by Cmd as a child process of the same binary, with
// the same transport options as `mqgate serve`.
//
// Files: bench.go (flags, rounds, the produce/consume/e2e workloads and
// their figures), echo.go (the v2 echo MessagingService, which decodes and
// encodes the v2 messages, and the plain echo, which answers with
// responses encoded once, the floor of a gRPC call), sdkbench.go (produce
// --sdk-linger: the SDK's batching producer), proto.go (produce over REST
// and classic remoting for the http and remoting modes).
//
// bench may import gen/, sdk/, gateway/grpcserver (the server's transport
// options) and gateway/remoting's client and codec; like the rest of cmd/
// it must not import broker/ or storage/.
package bench
