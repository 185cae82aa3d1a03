// Package mesh holds mqgate's service-mesh end-to-end tests: the real
// `mqgate serve` binary (internal/testutil) behind a real HTTP/2 L7 proxy —
// nginx from Debian, started by the test with deploy/nginx/nginx.conf
// (ports and paths substituted) — driven by the official RocketMQ 5 Go
// client v5.1.3 configured with only the proxy's address, and by the
// official Node.js client over TLS (a scenario of internal/e2e/nodeclient,
// which needs node and that directory's `npm ci`), plus REST, the shutdown
// drain and OpenTelemetry export to an in-process OTLP receiver.
//
// nginx is required in CI (.ci/deps installs nginx-light); elsewhere the
// proxy tests are skipped without it, saying so.
//
// The package has no non-test code. Like internal/e2e, its tests import
// only the official client (and its protocol package), internal/testutil,
// internal/e2e/e2eutil and libraries — never mqgate's
// gen/apache/rocketmq/v2, which would register the same protobuf names
// twice — and skip under -race (the official client races internally)
// and with -short.
package mesh
