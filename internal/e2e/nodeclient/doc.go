// Package nodeclient holds mqgate's end-to-end tests driven by the official
// RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8, pinned in
// package.json and package-lock.json): a second official client, on a
// different gRPC stack (@grpc/grpc-js) and with its own message digest
// check, against the same `mqgate serve` binary the Go client tests use.
//
// Each test starts mqgate on free loopback ports (internal/testutil),
// creates its topics and groups with the `mqgate topic|group` commands,
// and runs one scenario of scenarios.js with node (e2eutil.RunNode). The
// script drives only the Node client and prints what it saw as JSON; the
// assertions are here (and in internal/e2e/mesh, which runs a scenario
// through nginx).
//
// The client is installed into node_modules by `npm ci` in this directory,
// which .ci/deps runs (and so `make test`); without node or node_modules
// the tests fail with a hint. Like the other end-to-end tests they are
// skipped with -short and under -race (the race pass has nothing to find in
// a node process; `make test` runs ./internal/e2e/... a second time without
// -race).
//
// The package has no non-test code and imports only internal/testutil,
// internal/e2e/e2eutil and the standard library.
package nodeclient
