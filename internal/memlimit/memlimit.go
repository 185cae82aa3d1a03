package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Share is the part of the cgroup's limit the soft limit is set to: the
// rest is for what the Go runtime does not count (stacks of threads in
// system calls, the page cache the cgroup charges, the staging ring in
// /dev/shm).
const Share = 0.8

// unlimited is at or above what cgroup v1 reports for no limit.
const unlimited = int64(1) << 62

// CgroupLimit is the memory limit of the cgroup this process runs in, as
// fsys (the root file system, "/" stripped) shows it; ok is false when
// there is none or it cannot be read.
func CgroupLimit(fsys fs.FS) (limit int64, ok bool) {
	self, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	v2, v1 := cgroupPaths(self)
	var candidates []string
	if v2 != "" {
		candidates = append(candidates, path.Join("sys/fs/cgroup", v2, "memory.max"), "sys/fs/cgroup/memory.max")
	}
	if v1 != "" {
		candidates = append(candidates, path.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"), "sys/fs/cgroup/memory/memory.limit_in_bytes")
	}
	for _, p := range candidates {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		n, ok := parseLimit(b)
		return n, ok
	}
	return 0, false
}

// cgroupPaths reads /proc/self/cgroup: the unified (v2) path ("0::/p")
// and the v1 memory controller's ("N:...memory...:/p").
func cgroupPaths(b []byte) (v2, v1 string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		p = strings.TrimPrefix(path.Clean(p), "/")
		switch {
		case id == "0" && ctrls == "":
			v2 = path.Join(".", p)
		case hasController(ctrls, "memory"):
			v1 = path.Join(".", p)
		}
	}
	return v2, v1
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseLimit reads a memory limit file: a number of bytes, or "max" (v2)
// or a number at or above unlimited (v1) for none.
func parseLimit(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false
	}
	return n, true
}

// Default is the soft limit to set when GOMEMLIMIT is unset and the
// cgroup has a limit: Share of it. It returns 0 and why not otherwise,
// or the limit and a description for the log.
func Default(getenv func(string) string, fsys fs.FS) (int64, string) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return 0, "GOMEMLIMIT is set (" + v + ")"
	}
	limit, ok := CgroupLimit(fsys)
	if !ok {
		return 0, "no cgroup memory limit"
	}
	soft := int64(float64(limit) * Share)
	return soft, fmt.Sprintf("%d%% of the cgroup's memory limit of %d bytes", int(Share*100), limit)
}
