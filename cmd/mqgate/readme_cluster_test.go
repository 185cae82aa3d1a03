package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

// The README's "Cluster" section, run for real: its exports (the peer
// token) hold for the lines after them, its `mqgate serve`
// lines start the processes (each host:port of the section replaced by
// a free one, each data dir by a temporary one), then its commands run
// against them: status names a leader, a message sent through one member
// is received through another.
func TestReadmeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	// The section's lines in order: members start as they come, and each
	// command is retried until it succeeds (the members elect a leader
	// right after they start; a joined member catches up first).
	var lines []string
	serves, cmds := 0, 0
	for _, b := range readmeSection(t, "## Cluster") {
		if b.lang != "sh" {
			continue
		}
		for _, l := range shellLines(b.body) {
			switch {
			case strings.HasPrefix(l, "export "):
			case strings.HasPrefix(l, "./mqgate serve "):
				serves++
			case strings.HasPrefix(l, "./mqgate "):
				cmds++
			default:
				t.Fatalf("README: a command the test does not know how to run: %q", l)
			}
			lines = append(lines, l)
		}
	}
	if serves != 4 || cmds < 5 {
		t.Fatalf("README cluster section lost its examples: %d serve lines, %d commands", serves, cmds)
	}
	addrs := map[string]string{}
	rewrite := func(l string) string {
		return regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllStringFunc(l, func(a string) string {
			if _, ok := addrs[a]; !ok {
				addrs[a] = testutil.StableAddr(t)
			}
			return addrs[a]
		})
	}
	dir := t.TempDir()
	var all strings.Builder
	var env []string // the section's exports, for the lines after them
	started := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "export ") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
			out, err := exec.Command("sh", "-c", l+"\n"+`printf %s "$`+name+`"`).Output()
			if err != nil || len(out) == 0 {
				t.Fatalf("README %q: %v (%q)", l, err, out)
			}
			env = append(env, name+"="+string(out))
			continue
		}
		if strings.HasPrefix(l, "./mqgate serve ") {
			args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(rewrite(l), "./mqgate serve ")), "&"))
			for j := range args {
				if args[j] == `""` {
					args[j] = ""
				}
				if j > 0 && args[j-1] == "--data-dir" {
					args[j] = filepath.Join(dir, args[j])
				}
			}
			if started == 0 {
				// The test's own metrics listener, not the default port.
				args = append(args, "--metrics-addr", "127.0.0.1:0")
			}
			started++
			testutil.Start(t, testutil.StartOptions{DataDir: filepath.Join(dir, "unused"), Args: args, Env: env})
			continue
		}
		line := strings.Replace(rewrite(l), "./mqgate ", testutil.Binary(t)+" ", 1)
		deadline := time.Now().Add(60 * time.Second)
		for {
			cmd := exec.Command("sh", "-c", line)
			cmd.Env = append(os.Environ(), env...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if err == nil {
				all.WriteString(out.String())
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("README command %q: %v\nstdout: %s\nstderr: %s", l, err, out.String(), errb.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, want := range []string{"leader: ", "sent message ", `"body":"Hello, cluster!"`, "member 4 votes", "member 1 removed"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("README cluster commands' output lacks %q:\n%s", want, all.String())
		}
	}
}
