// Package e2eutil holds what the end-to-end test packages (internal/e2e,
// internal/e2e/mesh, internal/e2e/classic, internal/e2e/cluster) share: the run policy (skip
// with -short and under -race, parallel), unique names, starting mqgate
// and running its CLI, the official RocketMQ 5 Go client's setup (log
// directory, config, started producers and simple consumers), running
// a scenario of the official Node.js client (RunNode, node.go: the
// scenarios live in internal/e2e/nodeclient), a small file system to
// fill (SmallDisk, smalldisk.go: a tmpfs mounted as root), and driving the
// web console in headless Chromium (browser.go: chromedp, waits on the
// page, the documentation's screenshots).
//
// Files: e2eutil.go holds Main, Begin and the small helpers every end-to-end
// package shares.
//
// It imports the official client v5.1.3, so only those test packages may
// import it: a binary that also links mqgate's gen/apache/rocketmq/v2
// (sdk/, cmd/mqgate, the gateway) would register the same protobuf names
// twice and panic at init. Of mqgate it imports only internal/testutil
// (which, for the same reason, must never import the official clients).
package e2eutil
