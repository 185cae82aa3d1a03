// Package testutil holds helpers for mqgate's tests: building the mqgate
// binary once per test process, starting it on free loopback ports with a
// temporary data dir, reading its structured logs, and stopping or killing
// it. It is imported only from _test.go files.
//
// It must not import broker/, storage/ or gateway/ packages: end-to-end
// tests drive the real process from outside.
package testutil
