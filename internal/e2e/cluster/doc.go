// Package cluster holds the end-to-end tests of cluster mode: three real
// mqgate processes on loopback forming one replica group, driven by the
// official Go client (v5) through every member's address, with members
// killed (kill -9) and restarted under load, or cut off from the others
// by fault proxies on their raft links (newProxiedGroup).
//
// TestNemesis (nemesis_test.go) is the Jepsen-style test: a seeded plan of
// kills, pauses, partitions, leadership transfers and clock skew under a
// mixed workload, every client operation recorded and the history judged
// by internal/e2e/nemesis. It runs a binary built with the
// mqgate_testhooks tag, whose broker clock an environment variable can
// shift (internal/clock).
package cluster
