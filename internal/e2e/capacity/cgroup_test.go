package capacity

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeTree makes the files of a cgroup mount under a temp dir: v1 with
// cpu and cpuacct apart ("v1"), together ("v1-comounted"), or v2.
func fakeTree(t *testing.T, kind string) string {
	t.Helper()
	root := t.TempDir()
	put := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switch kind {
	case "v1":
		put("cpu/cpu.cfs_quota_us", "-1\n")
		put("cpuacct/cpuacct.usage", "0\n")
	case "v1-comounted":
		put("cpu/cpu.cfs_quota_us", "-1\n")
		put("cpu/cpuacct.usage", "0\n")
	case "v2":
		put("cgroup.controllers", "cpuset cpu io memory pids\n")
		put("cgroup.subtree_control", "memory\n")
	}
	return root
}

func TestFindHierarchy(t *testing.T) {
	for _, c := range []struct {
		kind    string
		version int
		apart   bool
	}{{"v1", 1, true}, {"v1-comounted", 1, false}, {"v2", 2, false}} {
		root := fakeTree(t, c.kind)
		h, err := FindHierarchy(root)
		if err != nil || h.Version != c.version || c.version == 1 && (h.CPU == h.Acct) != !c.apart {
			t.Errorf("%s: %+v, %v", c.kind, h, err)
		}
	}
	if _, err := FindHierarchy(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no cgroup") {
		t.Errorf("no cgroup mount: %v", err)
	}
	root := fakeTree(t, "v2")
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindHierarchy(root); err == nil || !strings.Contains(err.Error(), "no cpu controller") {
		t.Errorf("v2 without cpu: %v", err)
	}
}

// A group made in a (fake) v1 hierarchy gets the cap, its launcher puts
// the process it runs into both controllers' groups and runs the binary
// with its arguments, and Remove leaves nothing behind.
func TestGroupCapLaunchAndRemove(t *testing.T) {
	root := fakeTree(t, "v1")
	h, err := FindHierarchy(root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.NewParent("bench")
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.NewGroup("m1", 0.3)
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if q, per := read("cpu/bench/m1/cpu.cfs_quota_us"), read("cpu/bench/m1/cpu.cfs_period_us"); q != "30000" || per != "100000" {
		t.Fatalf("quota %s per period %s, want 30000 per 100000", q, per)
	}
	launcher, err := g.Launcher(t.TempDir(), "/bin/echo")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(launcher, "it's", "run")
	out, err := cmd.Output()
	if err != nil || string(out) != "it's run\n" {
		t.Fatalf("launcher: %q, %v", out, err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	if a, b := read("cpu/bench/m1/cgroup.procs"), read("cpuacct/bench/m1/cgroup.procs"); a != pid || b != pid {
		t.Fatalf("cgroup.procs %q and %q, want the launched process %s", a, b, pid)
	}
	// On a real cgroup mount the files go with the directory; here they
	// are ordinary files, removed by hand.
	for _, d := range []string{"cpu/bench/m1", "cpuacct/bench/m1"} {
		ents, _ := os.ReadDir(filepath.Join(root, d))
		for _, e := range ents {
			os.Remove(filepath.Join(root, d, e.Name()))
		}
	}
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"cpu/bench", "cpuacct/bench"} {
		if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
}

func TestGroupReadV2(t *testing.T) {
	root := fakeTree(t, "v2")
	h, err := FindHierarchy(root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.NewParent("bench")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control")); !strings.Contains(string(b), "cpu") {
		t.Fatalf("the cpu controller not enabled for the bench's groups: %q", b)
	}
	g, err := p.NewGroup("m1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "bench/m1/cpu.max")); string(b) != "max 100000" {
		t.Fatalf("cpu.max %q for an uncapped group", b)
	}
	stat := "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2500\n"
	if err := os.WriteFile(filepath.Join(root, "bench/m1/cpu.stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := g.Read()
	want := CPU{Usage: 1500 * time.Microsecond, Periods: 10, ThrottledPeriod: 4, Throttled: 2500 * time.Microsecond}
	if err != nil || c != want {
		t.Fatalf("read %+v, %v; want %+v", c, err, want)
	}
}

func TestParseProcStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses.
	line := "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 125 0 0 20 0 9 0 100 0 0\n"
	d, err := parseProcStat([]byte(line))
	if err != nil || d != 3750*time.Millisecond {
		t.Fatalf("%v, %v; want 3.75s", d, err)
	}
	for _, bad := range []string{"", "4242 no parens", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 -1 5", "1 (x) S 1 2 3 4 5 6 7 8 9 99999999999999999999 5"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (mqgate) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 125 0 0 20 0 9 0 100 0 0\n"))
	f.Add([]byte("1 ((a) b)) R 0 0 0 0 0 0 0 0 0 0 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseProcStat(b)
		if err == nil && d < 0 {
			t.Fatalf("negative CPU time %v from %q", d, b)
		}
	})
}

func FuzzStatFields(f *testing.F) {
	f.Add([]byte("nr_periods 10\nnr_throttled 4\nthrottled_time 2500\n"))
	f.Add([]byte("usage_usec 1500\nbogus\n a b c\nx -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k := range statFields(b) {
			if k == "" || strings.ContainsAny(k, " \t\n") {
				t.Fatalf("field name %q from %q", k, b)
			}
		}
	})
}
