// Package cluster holds the end-to-end tests of cluster mode: three real
// mqgate processes on loopback forming one replica group, driven by the
// official Go client (v5) through every member's address, with members
// killed (kill -9) and restarted under load, or cut off from the others
// by fault proxies on their raft links (newProxiedGroup).
package cluster
