// Package e2e holds mqgate's end-to-end tests: each starts the real
// `mqgate serve` binary on free loopback ports (internal/testutil), creates
// topics and groups with the `mqgate topic|group` commands, and drives it
// with the official RocketMQ 5 Go client v5.1.3 — plus a raw gRPC client
// built on that client's own generated protocol package where the official
// client validates locally, hides a status (SimpleConsumer.Ack ignores it)
// or cannot send a malformed request. The web console's test drives
// headless Chromium through chromedp.
//
// The package has no non-test code; what it shares with the other
// end-to-end packages lives in internal/e2e/e2eutil. Its tests must import
// only the official client (and its protocol package),
// gen/mqgate/admin/v1, internal/testutil, internal/e2e/e2eutil and
// libraries: importing mqgate's own
// gen/apache/rocketmq/v2 as well would register the same protobuf names
// twice and panic at init. They are skipped with -short.
package e2e
