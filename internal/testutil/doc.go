// Package testutil holds helpers for mqgate's tests: building the mqgate
// binary once per test process (BinaryWithTags: with build tags, for
// tests that need a test hook), starting it on free loopback ports with a
// temporary data dir, reading its structured logs, and stopping or killing
// it. It is imported only from _test.go files and from
// internal/e2e/e2eutil (itself a helper of the end-to-end tests).
//
// Files: mqgate.go (building the binary, starting and stopping mqgate
// processes, ports), certs.go (test certificate authorities), eventually.go
// (waiting for a condition).
//
// It must not import broker/, storage/ or gateway/ packages: end-to-end
// tests drive the real process from outside. Nor may it import the
// official RocketMQ clients: tests that link mqgate's own
// gen/apache/rocketmq/v2 (sdk/, cmd/mqgate) import it too.
package testutil
