package connlimit

import (
	"errors"
	"os"
	"syscall"
)

// The defaults are derived from the process's descriptor limit. Go raises
// the soft RLIMIT_NOFILE to the hard limit when a program starts (as
// production servers are configured to run: nginx's worker_rlimit_nofile,
// systemd's LimitNOFILE), so FDLimit is the hard limit unless the process
// lowered it since.

// FDLimit is the number of file descriptors the process may have open
// (the soft RLIMIT_NOFILE).
func FDLimit() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur > 1<<30 {
		return 1 << 30, nil // RLIM_INFINITY: any cap derived from it is as good
	}
	return int(rl.Cur), nil
}

// OpenFDs counts the process's open file descriptors (Linux: the entries
// of /proc/self/fd, the directory's own descriptor excluded).
func OpenFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(1024)
		n += len(names)
		if err != nil {
			if len(names) == 0 {
				break
			}
			return 0, err
		}
	}
	if n == 0 {
		return 0, errors.New("/proc/self/fd lists nothing")
	}
	return n - 1, nil
}

// Listener names, as Defaults and the settings know them.
const (
	GRPC     = "grpc"
	HTTP     = "http"
	Remoting = "remoting"
	Metrics  = "metrics"
	Peer     = "peer"
)

// DefaultReserve is the descriptors kept from connections for a
// descriptor limit of fdLimit: an eighth of it, at least 256. The store
// keeps one descriptor per commit-log segment, consume-queue file and
// index file it has open, and opens more for snapshots and new queues.
func DefaultReserve(fdLimit int) int { return max(256, fdLimit/8) }

// defaultShares are the parts of the descriptors left for connections
// (the limit less the reserve) each listener may take by default, and
// the most it takes: the caps add up to at most what is left, so a flood
// on one listener cannot take the descriptors another needs. An idle gRPC
// connection costs about 100 KiB of buffers and goroutines, a remoting
// one about 40 KiB, which the ceilings bound.
var defaultShares = map[string]struct{ percent, ceiling int }{
	GRPC:     {40, 16384},
	Remoting: {25, 16384},
	HTTP:     {25, 4096},
	Metrics:  {5, 64},
	Peer:     {5, 256},
}

// DefaultCap is the connection cap of the listener named name (GRPC,
// HTTP, Remoting, Metrics, Peer) for a descriptor limit of fdLimit and a
// reserve of reserve: its part of what is left for connections, at least
// 16, at most its ceiling.
func DefaultCap(name string, fdLimit, reserve int) int {
	s, ok := defaultShares[name]
	if !ok {
		return 0
	}
	left := max(0, fdLimit-reserve)
	return max(16, min(s.ceiling, left*s.percent/100))
}

// DefaultAddressShare is the percentage of a listener's cap one client
// address may hold.
const DefaultAddressShare = 50
