package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// endpoint is what the examples dial. TestMain points it at a real mqgate
// it starts (with --auto-create, like `make run`), shared by the examples
// and the tests in sdk_test.go.
var endpoint = "127.0.0.1:8081"

// server is the shared mqgate process (nil when the end-to-end tests do
// not run: -short, or no mqgate source tree to build it from).
var server *mqgateProc

// skipReason says why server is nil.
var skipReason = "end-to-end (needs the mqgate binary; skipped with -short)"

func TestMain(m *testing.M) {
	flag.Parse()
	bin, why := "", ""
	if !testing.Short() {
		bin, why = mqgateBinary()
	}
	if testing.Short() || bin == "" {
		if bin == "" && !testing.Short() {
			skipReason = why
			fmt.Fprintln(os.Stderr, "sdk: end-to-end tests and examples skipped:", why)
		}
		// The examples need the server, so run only the Test functions
		// unless -run says otherwise.
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^Test")
		}
		os.Exit(m.Run())
	}
	p, err := startMqgate(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk TestMain:", err)
		os.Exit(1)
	}
	server = p
	endpoint = p.grpc
	if err := setupExamples(); err != nil {
		fmt.Fprintf(os.Stderr, "sdk TestMain: creating the examples' topics and groups: %v\nmqgate log:\n%s\n", err, p.log())
		p.stop()
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "mqgate log:\n%s\n", p.log())
	}
	p.stop()
	os.Exit(code)
}

// setupExamples creates what auto-create cannot: the FIFO and DELAY
// topics and the FIFO groups of the examples and tests.
func setupExamples() error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := adminv1.NewAdminServiceClient(conn)
	for _, t := range []*adminv1.CreateTopicRequest{
		{Name: "payments", Type: "FIFO", Queues: 4},
		{Name: "reminders", Type: "DELAY"},
		{Name: "sdk-linger-fifo", Type: "FIFO", Queues: 4},
	} {
		if _, err := a.CreateTopic(ctx, t); err != nil {
			return err
		}
	}
	for _, g := range []string{"ledger", "sdk-linger-fifo-g"} {
		if _, err := a.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: g, Fifo: true}); err != nil {
			return err
		}
	}
	return nil
}

func needServer(t *testing.T) {
	t.Helper()
	if server == nil {
		t.Skip(skipReason)
	}
}

// testContext returns a context that ends after d, cancelled at cleanup.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mqgateBinary returns the mqgate binary the end-to-end tests run:
// $MQGATE_BIN when set, else one built from the mqgate source tree this
// module sits in (the repository's sdk/ directory). The SDK module does
// not depend on the server's, so outside that tree (a module cache
// copy) there is nothing to build and it returns "" and why.
func mqgateBinary() (string, string) {
	if bin := os.Getenv("MQGATE_BIN"); bin != "" {
		return bin, ""
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(gomod, []byte("module github.com/mqgate/mqgate\n")) {
		return "", "no mqgate source tree above sdk/ to build the server from (set MQGATE_BIN to an mqgate binary)"
	}
	dir, err := os.MkdirTemp("", "mqgate-sdk-bin-")
	if err != nil {
		return "", err.Error()
	}
	bin := filepath.Join(dir, "mqgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mqgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "sdk TestMain: go build ./cmd/mqgate: %v\n%s", err, out)
		os.Exit(1)
	}
	return bin, ""
}

// mqgateProc is the mqgate process the end-to-end tests share.
type mqgateProc struct {
	cmd     *exec.Cmd
	dataDir string
	grpc    string
	done    chan struct{}

	mu  sync.Mutex // guards raw
	raw bytes.Buffer
}

// startMqgate runs `mqgate serve` on loopback ports the kernel picks and
// waits for its "mqgate ready" log line, which names them.
func startMqgate(bin string) (*mqgateProc, error) {
	dataDir, err := os.MkdirTemp("", "mqgate-sdk-test-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--remoting-addr", "", "--staging-dir", filepath.Join(dataDir, "staging"),
		"--log-format", "json", "--log-level", "debug", "--drain-notice", "0s", "--auto-create")
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &mqgateProc{cmd: cmd, dataDir: dataDir, done: make(chan struct{})}
	ready := make(chan map[string]any, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			p.mu.Lock()
			p.raw.Write(sc.Bytes())
			p.raw.WriteByte('\n')
			p.mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && (m["msg"] == "mqgate ready" || m["msg"] == "mqgate failed to start") {
				select {
				case ready <- m:
				default:
				}
			}
		}
		_ = cmd.Wait()
	}()
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case m := <-ready:
		if m["msg"] == "mqgate ready" {
			p.grpc, _ = m["grpc"].(string)
			return p, nil
		}
	case <-p.done:
	case <-timer.C:
	}
	p.stop()
	return nil, errors.New("mqgate did not become ready:\n" + p.log())
}

func (p *mqgateProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

func (p *mqgateProc) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = os.RemoveAll(p.dataDir)
	if strings.Contains(p.cmd.Path, "mqgate-sdk-bin-") {
		_ = os.RemoveAll(filepath.Dir(p.cmd.Path))
	}
}
