// Package memlimit gives Go's soft memory limit a default from the memory
// the process may use: when GOMEMLIMIT is not set and the process runs in
// a cgroup with a memory limit (a container, a systemd unit with
// MemoryMax), the soft limit is set below it, so that the collector works
// harder before the kernel's limit kills the process (garbage of a flood
// of large requests otherwise grows with the flood's rate).
//
// It reads /proc/self/cgroup and the cgroup's memory file (v2 memory.max,
// v1 memory.limit_in_bytes) through an fs.FS, so tests give it their
// own. It imports only the standard library.
package memlimit
