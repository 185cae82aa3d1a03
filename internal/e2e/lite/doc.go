// Package lite holds the end-to-end tests of lite topics: each starts the
// real `mqgate serve` binary (one node, or a 3-member cluster with a peer
// token) on free loopback ports and drives it over the v2 gRPC API.
//
// No RocketMQ client that speaks lite topics is available as a Go or Node
// module, so the tests call mqgate's generated v2 stubs
// (gen/apache/rocketmq/v2) in the order the official Java client calls
// them; each test names the Java source it follows (apache/rocketmq-clients,
// java/client, as of its 5.1 line with lite consumers). This package must
// not import the official Go client's protocol package: both register the
// same protobuf names. Its tests are skipped with -short.
package lite
