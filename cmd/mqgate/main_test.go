package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestBareBinaryPrintsUsage: mqgate with no command prints the usage with
// every command on stderr and exits 2 (it starts no server); --help
// prints it on stdout; a server flag without serve is refused.
func TestBareBinaryPrintsUsage(t *testing.T) {
	commands := []string{"serve", "topic", "group", "bench", "send", "receive", "ack", "message", "version", "help"}
	hasCommands := func(s string) bool {
		for _, c := range commands {
			if !strings.Contains(s, "\n  mqgate "+c+" ") {
				t.Logf("usage lacks %q", c)
				return false
			}
		}
		return true
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), nil, &out, &errb); code != 2 || out.Len() != 0 || !hasCommands(errb.String()) {
		t.Fatalf("bare mqgate: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	for _, h := range []string{"--help", "-h", "help"} {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), []string{h}, &out, &errb); code != 0 || !hasCommands(out.String()) {
			t.Fatalf("mqgate %s: exit %d, stdout %q, stderr %q", h, code, out.String(), errb.String())
		}
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"--data-dir", t.TempDir()}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "mqgate serve --data-dir") {
		t.Fatalf("mqgate --data-dir: exit %d, stderr %q", code, errb.String())
	}
}

// TestServeRefusesOpenNonLoopbackWithoutAuth: without --auth-file a
// non-loopback listen address is a start-up error naming the setting (and
// nothing is created), unless --insecure-listen-all.
func TestServeRefusesOpenNonLoopbackWithoutAuth(t *testing.T) {
	dir := t.TempDir() + "/data"
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--data-dir", dir, "--grpc-addr", "0.0.0.0:0", "--print-config"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "grpc-addr") || !strings.Contains(errb.String(), "--insecure-listen-all") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"serve", "--data-dir", dir, "--grpc-addr", "0.0.0.0:0", "--insecure-listen-all", "--print-config"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "insecure-listen-all: true\n") {
		t.Fatalf("with --insecure-listen-all: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

// `mqgate version` and `mqgate --version` print the same build line: the
// version (main.version wins when set at link time) and the Go version.
func TestVersionAndDashDashVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "v0.9.1-test"
	var lines []string
	for _, arg := range []string{"version", "--version"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{arg}, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("mqgate %s: exit %d, stderr %q", arg, code, errb.String())
		}
		lines = append(lines, out.String())
	}
	if lines[0] != lines[1] || !strings.HasPrefix(lines[0], "mqgate v0.9.1-test (") || !strings.Contains(lines[0], runtime.Version()) {
		t.Fatalf("version %q, --version %q", lines[0], lines[1])
	}
}
