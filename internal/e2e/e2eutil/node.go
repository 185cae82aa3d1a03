package e2eutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

// NodeRun is one run of internal/e2e/nodeclient/scenarios.js: a scenario
// driven by the official RocketMQ 5 Node.js client.
type NodeRun struct {
	// Scenario names the scenario; Endpoint is the gRPC address the
	// client dials (MQ_ENDPOINT).
	Scenario, Endpoint string
	// Env adds KEY=VALUE pairs (MQ_TOPIC, MQ_GROUP, ...).
	Env []string
	// OnReady, when set, runs when the scenario prints "READY"; the
	// scenario then gets "GO" on its standard input.
	OnReady func()
}

// NodeDir is the directory of the Node.js scenarios and their pinned
// client (installed into node_modules by `npm ci`, which .ci/deps runs).
func NodeDir() string { return filepath.Join(testutil.RepoRoot(), "internal", "e2e", "nodeclient") }

// RunNode runs r and decodes the JSON object the scenario prints last
// into out. It fails the test when node or the client is missing, when
// the scenario fails, or when its result does not decode (testutil.Start
// then logs the mqgate processes' output at cleanup).
func RunNode(t *testing.T, r NodeRun, out any) {
	t.Helper()
	bin := testutil.Command(t, "the tests with the official Node.js client", "Node.js 18 or later; Debian: apt-get install nodejs npm", "node")
	dir := NodeDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "rocketmq-client-nodejs", "package.json")); err != nil {
		testutil.Missing(t, "the official Node.js client is not installed", "this test", "`npm ci` in internal/e2e/nodeclient; .ci/deps runs it")
	}
	ctx := testutil.Context(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, bin, "scenarios.js", r.Scenario)
	cmd.Dir = dir
	// The client's default logger writes under $HOME; the scenarios give
	// it a quiet one, HOME is a temp dir in case anything else writes.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "MQ_ENDPOINT="+r.Endpoint)
	cmd.Env = append(cmd.Env, r.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last []byte
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if string(line) == "READY" && r.OnReady != nil {
			r.OnReady()
			if _, err := io.WriteString(stdin, "GO\n"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if len(line) > 0 {
			last = append(last[:0], line...)
		}
	}
	runErr := cmd.Wait()
	var failure struct {
		Error string `json:"error"`
		Code  any    `json:"code"`
	}
	if runErr != nil || json.Unmarshal(last, &failure) != nil || failure.Error != "" {
		t.Fatalf("node scenarios.js %s: %v\nresult: %s\nerror: %s (code %v)\nstderr:\n%s",
			r.Scenario, runErr, last, failure.Error, failure.Code, stderr.String())
	}
	if err := json.Unmarshal(last, out); err != nil {
		t.Fatalf("node scenarios.js %s: decoding %s: %v", r.Scenario, last, err)
	}
}
