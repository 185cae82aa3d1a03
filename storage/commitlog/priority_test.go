package commitlog

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/vfs"
)

// threadNices returns the nice value of each of the process's threads.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		// The fields after the command name, which is in parentheses:
		// state is field 3 and nice field 19.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		n, err := strconv.Atoi(f[19-3])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[tid] = n
	}
	return out
}

// atNice counts the process's threads at nice value n.
func atNice(t *testing.T, n int) int {
	c := 0
	for _, v := range threadNices(t) {
		if v == n {
			c++
		}
	}
	return c
}

// awaitAtNice waits until want threads run at nice value n.
func awaitAtNice(t *testing.T, n, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := atNice(t, n); got != want; got = atNice(t, n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d threads at nice %d, want %d", got, n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// In sync mode the syncer runs on a thread of its own with the nice value
// asked for (a higher one needs no privilege), appends stay durable, and
// the thread ends with the log.
func TestSyncerPriority(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	const nice = 7
	before := atNice(t, nice)
	o := syncOpts(vfs.NewMem(), 1<<20)
	o.SyncerNice = nice
	l, _ := openLog(t, o, Recovery{})
	l.Start()
	recs := appendN(t, l, 20, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, w := l.Durable(), l.Written(); d != w || len(recs) != 20 {
		t.Fatalf("durable %d, written %d", d, w)
	}
	awaitAtNice(t, nice, before+1)
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	awaitAtNice(t, nice, before)
}

// refusedChild marks the process TestSyncerPriorityRefused starts
// without CAP_SYS_NICE.
const refusedChild = "MQGATE_TEST_SYNCER_REFUSED"

// Without the privilege a higher priority needs, the syncer says so once
// and works as before: no thread gets the nice value, appends stay
// durable. As root the case runs in a copy of the test binary started as
// nobody, which has no capabilities.
func TestSyncerPriorityRefused(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	const nice = -10
	if os.Getenv(refusedChild) == "" && os.Geteuid() == 0 {
		runAsNobody(t, "^TestSyncerPriorityRefused$")
		return
	}
	if atNice(t, nice) > 0 {
		t.Skipf("a thread already runs at nice %d", nice)
	}
	var logs bytes.Buffer
	o := syncOpts(vfs.NewMem(), 1<<20)
	o.SyncerNice = nice
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, _ := openLog(t, o, Recovery{})
	l.Start()
	appendN(t, l, 20, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, w := l.Durable(), l.Written(); d != w {
		t.Fatalf("durable %d, written %d", d, w)
	}
	if err := l.Stop(false); err != nil {
		t.Fatal(err)
	}
	if n := atNice(t, nice); n > 0 {
		t.Skipf("%d threads got nice %d: this process may lower its nice value (RLIMIT_NICE)", n, nice)
	}
	if n := strings.Count(logs.String(), "keeps the process's priority"); n != 1 {
		t.Fatalf("%d log lines about the refused priority, want 1:\n%s", n, logs.String())
	}
}

// runAsNobody runs the tests matching run in a copy of this test binary,
// as user and group 65534, and fails t if they fail.
func runAsNobody(t *testing.T, run string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "commitlog.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run", run, "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), refusedChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot start a process as nobody here: %v", err)
	}
	if err != nil {
		t.Fatalf("%s as nobody: %v\n%s", run, err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("%s as nobody ran no test:\n%s", run, out)
	}
}
