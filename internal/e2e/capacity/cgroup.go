package capacity

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where the cgroup controllers are looked for: cgroup v1 mounts each
// controller at CgroupRoot/<controller> (cpu and cpuacct apart, or
// together as cpu,cpuacct behind both names); cgroup v2 is mounted at
// CgroupRoot itself.
const CgroupRoot = "/sys/fs/cgroup"

// Hierarchy is where the bench makes its cgroups: cgroup v1's cpu and
// cpuacct controllers, or a cgroup v2 directory whose children may use
// the cpu controller.
type Hierarchy struct {
	// Version is 1 or 2.
	Version int
	// V1: the cpu controller's and the cpuacct controller's directories
	// (the same one when they are mounted together).
	CPU, Acct string
	// V2: the directory the groups are made in.
	Unified string
}

// FindHierarchy finds a cgroup hierarchy under root the bench can make
// groups in (root is CgroupRoot outside tests). It tries v1 first (cpu
// and cpuacct mounted), then v2 (the cpu controller available at root).
// The error says what was missing.
func FindHierarchy(root string) (Hierarchy, error) {
	cpu, acct := filepath.Join(root, "cpu"), filepath.Join(root, "cpuacct")
	if exists(filepath.Join(cpu, "cpu.cfs_quota_us")) {
		if exists(filepath.Join(cpu, "cpuacct.usage")) {
			acct = cpu
		}
		if !exists(filepath.Join(acct, "cpuacct.usage")) {
			return Hierarchy{}, fmt.Errorf("cgroup v1: %s has no cpuacct.usage and no cpuacct controller is mounted at %s", cpu, acct)
		}
		return Hierarchy{Version: 1, CPU: cpu, Acct: acct}, nil
	}
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !hasWord(string(b), "cpu") {
			return Hierarchy{}, fmt.Errorf("cgroup v2 at %s: no cpu controller available (controllers: %s)", root, strings.TrimSpace(string(b)))
		}
		return Hierarchy{Version: 2, Unified: root}, nil
	}
	return Hierarchy{}, fmt.Errorf("no cgroup v1 cpu controller (%s) and no cgroup v2 (%s)", filepath.Join(cpu, "cpu.cfs_quota_us"), filepath.Join(root, "cgroup.controllers"))
}

// Parent is a directory of groups made by one run of the bench; Remove
// removes it with the groups it holds.
type Parent struct {
	h    Hierarchy
	dirs []string // the parent's directories (one per controller)
	kids []*Group
}

// NewParent makes the bench's directory named name in h.
func (h Hierarchy) NewParent(name string) (*Parent, error) {
	p := &Parent{h: h}
	var roots []string
	switch h.Version {
	case 1:
		roots = []string{h.CPU}
		if h.Acct != h.CPU {
			roots = append(roots, h.Acct)
		}
	case 2:
		roots = []string{h.Unified}
	default:
		return nil, fmt.Errorf("cgroup version %d", h.Version)
	}
	for _, r := range roots {
		d := filepath.Join(r, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			p.Remove()
			return nil, fmt.Errorf("make cgroup: %w", err)
		}
		p.dirs = append(p.dirs, d)
	}
	if h.Version == 2 {
		// The groups below the parent use the cpu controller: it must be
		// enabled in the root's and the parent's subtrees.
		for _, d := range []string{h.Unified, p.dirs[0]} {
			if err := enableCPU(d); err != nil {
				p.Remove()
				return nil, err
			}
		}
	}
	return p, nil
}

func enableCPU(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	if b, err := os.ReadFile(f); err == nil && hasWord(string(b), "cpu") {
		return nil
	}
	if err := os.WriteFile(f, []byte("+cpu"), 0o644); err != nil {
		return fmt.Errorf("cgroup v2: enable the cpu controller in %s: %w", dir, err)
	}
	return nil
}

// Group is one process's cgroup.
type Group struct {
	h    Hierarchy
	Name string
	// cpu is the directory with the quota (v1 cpu, v2 the group), acct
	// the one with the usage (v1 cpuacct, v2 the group).
	cpu, acct string
	dirs      []string
}

// NewGroup makes the group name below p, its CPU capped at cpus (0: not
// capped, only accounted).
func (p *Parent) NewGroup(name string, cpus float64) (*Group, error) {
	g := &Group{h: p.h, Name: name}
	for _, pd := range p.dirs {
		d := filepath.Join(pd, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			g.remove()
			return nil, fmt.Errorf("make cgroup: %w", err)
		}
		g.dirs = append(g.dirs, d)
	}
	p.kids = append(p.kids, g)
	g.cpu, g.acct = g.dirs[0], g.dirs[len(g.dirs)-1]
	const period = 100_000 // µs
	quota := int64(-1)
	if cpus > 0 {
		quota = max(1000, int64(cpus*period))
	}
	var err error
	switch p.h.Version {
	case 1:
		err = errors.Join(write(g.cpu, "cpu.cfs_period_us", strconv.Itoa(period)), write(g.cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)))
	case 2:
		q := "max"
		if quota > 0 {
			q = strconv.FormatInt(quota, 10)
		}
		err = write(g.cpu, "cpu.max", fmt.Sprintf("%s %d", q, period))
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: set the CPU cap: %w", name, err)
	}
	return g, nil
}

// Launcher writes into dir a shell script that puts itself into g and
// then runs bin with its arguments (exec: the same process), and returns
// its path. The process is in the group from its first instruction: the
// Go runtime of a capped member sizes GOMAXPROCS to the cap, as on a small
// machine.
func (g *Group) Launcher(dir, bin string) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, d := range g.dirs {
		fmt.Fprintf(&b, "echo $$ > %s || exit 111\n", shellQuote(filepath.Join(d, "cgroup.procs")))
	}
	fmt.Fprintf(&b, "exec %s \"$@\"\n", shellQuote(bin))
	p := filepath.Join(dir, "launch-"+g.Name)
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CPU is what g's accounting holds: the CPU time its processes used,
// and how often the cap held them back (throttled periods of the
// periods they ran in, and the time held).
type CPU struct {
	Usage           time.Duration
	Periods         int64
	ThrottledPeriod int64
	Throttled       time.Duration
}

// Sub is c minus an earlier reading.
func (c CPU) Sub(o CPU) CPU {
	return CPU{Usage: c.Usage - o.Usage, Periods: c.Periods - o.Periods, ThrottledPeriod: c.ThrottledPeriod - o.ThrottledPeriod, Throttled: c.Throttled - o.Throttled}
}

// Read reads g's accounting.
func (g *Group) Read() (CPU, error) {
	var c CPU
	stat, err := os.ReadFile(filepath.Join(g.cpu, "cpu.stat"))
	if err != nil {
		return c, err
	}
	f := statFields(stat)
	c.Periods, c.ThrottledPeriod = f["nr_periods"], f["nr_throttled"]
	switch g.h.Version {
	case 1:
		c.Throttled = time.Duration(f["throttled_time"])
		b, err := os.ReadFile(filepath.Join(g.acct, "cpuacct.usage"))
		if err != nil {
			return c, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return c, fmt.Errorf("cgroup %s: cpuacct.usage: %w", g.Name, err)
		}
		c.Usage = time.Duration(ns)
	case 2:
		c.Throttled = time.Duration(f["throttled_usec"]) * time.Microsecond
		us, ok := f["usage_usec"]
		if !ok {
			return c, fmt.Errorf("cgroup %s: cpu.stat has no usage_usec", g.Name)
		}
		c.Usage = time.Duration(us) * time.Microsecond
	}
	return c, nil
}

// statFields reads the "name value" lines of a cpu.stat file; lines that
// are not a name and an integer are left out.
func statFields(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// remove removes g's directories; they must hold no process.
func (g *Group) remove() error {
	var errs []error
	for _, d := range g.dirs {
		errs = append(errs, rmdir(d))
	}
	return errors.Join(errs...)
}

// Remove removes every group of p, then p. Their processes must have
// exited.
func (p *Parent) Remove() error {
	var errs []error
	for _, g := range p.kids {
		errs = append(errs, g.remove())
	}
	for _, d := range p.dirs {
		errs = append(errs, rmdir(d))
	}
	return errors.Join(errs...)
}

// rmdir removes a cgroup directory, retrying for a while: a process that
// has just exited leaves its cgroup busy until the kernel has released it.
func rmdir(d string) error {
	var err error
	for range 100 {
		if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func write(dir, file, v string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// ProcCPU is the CPU time (user and system) process pid has used, from
// /proc/PID/stat: the accounting used when no cgroup can be made (the
// runs are then not capped).
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so fields are counted after
// the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 62)
	st, err2 := strconv.ParseUint(f[12], 10, 62)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	if ut+st > math.MaxInt64/uint64(time.Second/clockTicks) {
		return 0, fmt.Errorf("/proc stat: %d ticks", ut+st)
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), nil
}
