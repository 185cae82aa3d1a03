package testutil

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu sync.Mutex
	builds  = map[string]*build{} // by tags
)

// build is one build of the binary, made once per test process.
type build struct {
	once sync.Once
	path string
	err  error
}

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binary builds ./cmd/mqgate once per test process (with the race detector
// when the test binary has it) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	return BinaryWithTags(t)
}

// BinaryWithTags is Binary built with the build tags given (go build
// -tags), once per test process and set of tags. Tests that need a test
// hook build with its tag, e.g. mqgate_testhooks for a skewed clock
// (internal/clock).
func BinaryWithTags(t testing.TB, tags ...string) string {
	t.Helper()
	key := strings.Join(tags, ",")
	buildMu.Lock()
	b := builds[key]
	if b == nil {
		b = &build{}
		builds[key] = b
	}
	buildMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "mqgate-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "mqgate")
		args := []string{"build", "-o", b.path}
		if RaceEnabled {
			args = append(args, "-race")
		}
		if key != "" {
			args = append(args, "-tags", key)
		}
		args = append(args, "./cmd/mqgate")
		cmd := exec.Command("go", args...)
		cmd.Dir = RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var stagingDirs sync.Map // data dir → staging ring dir

// stagingDirFor is the --staging-dir of the processes run on dataDir: one
// per data dir, since a restart must find the ring a kill -9 left; on
// /dev/shm (a tmpfs, as in production) when it can be written, and
// removed when the test that made it ends, so that processes killed at
// cleanup leave no ring behind in shared memory.
func stagingDirFor(t testing.TB, dataDir string) string {
	if v, ok := stagingDirs.Load(dataDir); ok {
		return v.(string)
	}
	dir, err := os.MkdirTemp("/dev/shm", "mqgate-test-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) }) // after the process is killed: cleanups run last first
	}
	stagingDirs.Store(dataDir, dir)
	t.Cleanup(func() { stagingDirs.Delete(dataDir) })
	return dir
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// Proc is a running mqgate process.
type Proc struct {
	t       testing.TB
	Cmd     *exec.Cmd
	DataDir string
	// Addresses from the "mqgate ready" log line.
	GRPC, HTTP, Remoting string
	// Metrics is the /metrics listener's address.
	Metrics string

	mu     sync.Mutex
	lines  []map[string]any
	raw    bytes.Buffer
	cond   *sync.Cond
	done   chan struct{}
	waited error
}

// StartOptions tune Start.
type StartOptions struct {
	// DataDir reuses a directory (restart tests); empty makes a temp one.
	DataDir string
	// Args are extra flags after the listener flags.
	Args []string
	// Env adds KEY=VALUE pairs.
	Env []string
	// NoRemoting disables the remoting listener.
	NoRemoting bool
	// ReadyTimeout bounds the wait for the ready line (default 60 s).
	ReadyTimeout time.Duration
	// Binary is the mqgate binary to run (BinaryWithTags); empty: Binary.
	Binary string
	// LogFile: when the test fails, the process's log is appended to this
	// file instead of the test's output (for long logs).
	LogFile string
	// Launcher, when set, is a command the binary is run under, followed
	// by its arguments (for example prlimit --nofile=1024:1024 --): it
	// must exec the binary, so that the process is mqgate's.
	Launcher []string
}

// Start runs `mqgate serve` on 127.0.0.1:0 ports and waits until it logs
// that it is ready. The process is killed at test cleanup if still running.
func Start(t testing.TB, o StartOptions) *Proc {
	t.Helper()
	bin := o.Binary
	if bin == "" {
		bin = Binary(t)
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	args := []string{"serve", "--data-dir", o.DataDir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug", "--drain-notice", "0s"}
	if o.NoRemoting {
		args = append(args, "--remoting-addr", "")
	} else {
		args = append(args, "--remoting-addr", "127.0.0.1:0")
	}
	if !hasFlag(o.Args, "--staging-dir") {
		args = append(args, "--staging-dir", stagingDirFor(t, o.DataDir))
	}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	if len(o.Launcher) > 0 {
		cmd = exec.Command(o.Launcher[0], append(append(o.Launcher[1:len(o.Launcher):len(o.Launcher)], bin), args...)...)
	}
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, Cmd: cmd, DataDir: o.DataDir, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.readLogs(stderr)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waited = err
		p.mu.Unlock()
		close(p.done)
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			// One log per process: a restarted member's data dir has
			// several.
			name := fmt.Sprintf("%s, pid %d", o.DataDir, cmd.Process.Pid)
			if o.LogFile == "" {
				t.Logf("mqgate log (%s):\n%s", name, p.Log())
			} else if err := appendLog(o.LogFile, name, p.Log()); err != nil {
				t.Logf("mqgate log (%s): %v:\n%s", name, err, p.Log())
			} else {
				t.Logf("mqgate log (%s) appended to %s", name, o.LogFile)
			}
		}
	})
	to := o.ReadyTimeout
	if to == 0 {
		to = 60 * time.Second
	}
	ready, ok := p.WaitLog(to, func(m map[string]any) bool { return m["msg"] == "mqgate ready" || m["msg"] == "mqgate failed to start" })
	if !ok || ready["msg"] != "mqgate ready" {
		t.Fatalf("mqgate did not become ready:\n%s", p.Log())
	}
	p.GRPC, _ = ready["grpc"].(string)
	p.HTTP, _ = ready["http"].(string)
	p.Remoting, _ = ready["remoting"].(string)
	p.Metrics, _ = ready["metrics"].(string)
	return p
}

// appendLog appends the log of the process name (its data dir and pid)
// to file.
func appendLog(file, name, log string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "=== mqgate log (%s)\n%s", name, log)
	return errors.Join(err, f.Close())
}

func (p *Proc) readLogs(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Bytes()
		var m map[string]any
		p.mu.Lock()
		p.raw.Write(line)
		p.raw.WriteByte('\n')
		if json.Unmarshal(line, &m) == nil {
			p.lines = append(p.lines, m)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
}

// Log returns everything the process wrote to stderr so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// WaitLog waits until a JSON log line satisfies match, the process exits, or
// timeout passes.
func (p *Proc) WaitLog(timeout time.Duration, match func(map[string]any) bool) (map[string]any, bool) {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := 0
	for {
		for ; seen < len(p.lines); seen++ {
			if match(p.lines[seen]) {
				return p.lines[seen], true
			}
		}
		select {
		case <-p.done:
			// drain lines written before exit
			for ; seen < len(p.lines); seen++ {
				if match(p.lines[seen]) {
					return p.lines[seen], true
				}
			}
			return nil, false
		default:
		}
		if time.Now().After(deadline) {
			return nil, false
		}
		p.cond.Wait()
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Kill9 kills the process with SIGKILL and waits for it.
func (p *Proc) Kill9() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait waits up to timeout for exit and returns the exit code (-1 when it
// did not exit in time).
func (p *Proc) Wait(timeout time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return -1
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Stop sends SIGTERM and requires a clean exit (status 0) within timeout.
func (p *Proc) Stop(timeout time.Duration) {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(timeout); code != 0 {
		p.t.Fatalf("mqgate exit status %d after SIGTERM (want 0):\n%s", code, p.Log())
	}
}

// Context returns a context that ends after d, cancelled at cleanup.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// HasLine reports whether any log line so far contains s.
func (p *Proc) HasLine(s string) bool { return strings.Contains(p.Log(), s) }

// UnusedAddr returns a loopback "host:port" nothing listens on: the port
// is reserved and released again, so a connection to it is refused (or a
// listener started soon after can bind it).
func UnusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

var (
	stableAddrs sync.Map // addresses StableAddr handed out
	portLocksMu sync.Mutex
	portLocks   []*os.File // held open (and locked) until the process exits
)

// lockPort takes the lock file of port for this process; false when
// another process holds it.
func lockPort(port int) bool {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("mqgate-test-port-%d.lock", port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true // no lock to be had: the bind check alone decides
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	portLocksMu.Lock()
	portLocks = append(portLocks, f)
	portLocksMu.Unlock()
	return true
}

// StableAddr returns a loopback "host:port" nothing listens on, for a
// process that must find the same port free again after a restart. The
// port is picked below the kernel's ephemeral range (32768 and up on
// Linux), which neither port-0 listeners nor outgoing connections are
// given, so no other test takes it between the check and the bind. Test
// processes running at once (go test runs packages side by side) do
// not hand out the same port either: each holds a lock file per port it
// handed out, in the temporary directory, until it exits.
func StableAddr(t testing.TB) string {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if _, taken := stableAddrs.LoadOrStore(addr, true); taken {
			continue // handed out already in this test process
		}
		if !lockPort(port) {
			continue // handed out by another test process still running
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}
