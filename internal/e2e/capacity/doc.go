// Package capacity is the cluster capacity benchmark (`make
// bench-cluster`): it starts the real mqgate binary as single nodes and as
// clusters, each member in a cgroup of its own (its CPU optionally capped,
// standing in for a small machine), drives them with the official Go
// client's producers (sync sends, every member's address joined by ';'),
// alternates the configurations round by round in one run, and reports
// sends per second, latency percentiles and each member's CPU time per
// message from the cgroup's accounting, with each configuration's ratio
// to the first one of the same round.
//
// The benchmark is TestCapacity, skipped unless MQGATE_BENCH_CLUSTER is
// set; its settings are environment variables (capacity_test.go). Files:
// cgroup.go (cgroup v1 cpu/cpuacct and v2 cpu.max groups, made and removed
// by the run), config.go (the configurations' syntax), capacity_test.go
// (the run and its report).
//
// capacity may import internal/testutil and internal/e2e/e2eutil and the
// official clients; it must not import the server's packages (gateway/,
// broker/, storage/): it measures the binary.
package capacity
