package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

// cli runs the real mqgate binary against one server.
type cli struct {
	t    *testing.T
	bin  string
	addr string
}

func (c cli) run(stdin string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(args, "--server", c.addr)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		c.t.Fatalf("mqgate %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// ok runs a command that must succeed and returns its stdout.
func (c cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("mqgate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// fails runs a command that must exit with code and say want on stderr.
func (c cli) fails(code int, want string, args ...string) {
	c.t.Helper()
	got, out, errs := c.run("", args...)
	if got != code || !strings.Contains(errs, want) {
		c.t.Fatalf("mqgate %s: exit %d (want %d)\nstderr %q does not contain %q\nstdout: %s", strings.Join(args, " "), got, code, errs, want, out)
	}
}

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ms []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// Each message command's happy path and its clearest failure, through the
// real binary against a real server (without --auto-create, so missing
// topics and groups are errors with a hint).
func TestMessageCommandsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true})
	c := cli{t: t, bin: testutil.Binary(t), addr: p.GRPC}

	// A topic that does not exist: say how to create it.
	c.fails(exitFail, "create it with `mqgate topic create orders`", "send", "--topic", "orders", "hello")
	c.ok("", "topic", "create", "orders", "--queues", "2")
	c.ok("", "topic", "create", "steps", "--type", "FIFO", "--queues", "2")

	// send: one message, then JSON, then lines of stdin.
	out := c.ok("", "send", "--topic", "orders", "first order")
	if !strings.HasPrefix(out, "sent message ") || !strings.Contains(out, " to orders") {
		t.Fatalf("send: %q", out)
	}
	out = c.ok("", "send", "--topic", "orders", "--tag", "vip", "--key", "order-7", "--key", "cust-1", "--property", "region=eu", "--json", "second order")
	sent := jsonLines(t, out)
	if len(sent) != 1 || len(sent[0]["message_id"].(string)) != 34 || sent[0]["topic"] != "orders" {
		t.Fatalf("send --json: %q", out)
	}
	secondID := sent[0]["message_id"].(string)
	out = c.ok("line one\nline two\n\nline three\n", "send", "--topic", "orders", "-")
	if out != "sent 3 messages to orders (1 empty lines skipped)\n" {
		t.Fatalf("send -: %q", out)
	}
	c.fails(exitUsage, "give the message BODY", "send", "--topic", "orders")
	c.fails(exitUsage, "--topic is required", "send", "x")
	c.fails(exitFail, "needs a FIFO topic", "send", "--topic", "orders", "--group", "g1", "fifo to a normal topic")
	out = c.ok("", "send", "--topic", "steps", "--group", "account-1", "step 1")
	if !strings.Contains(out, " to steps") {
		t.Fatalf("FIFO send: %q", out)
	}

	// receive: a group that does not exist.
	c.fails(exitFail, "create it with `mqgate group create billing`", "receive", "--group", "billing", "--topic", "orders", "--wait", "1s")
	c.ok("", "group", "create", "billing")
	c.fails(exitUsage, "--invisible", "receive", "--group", "billing", "--topic", "orders", "--invisible", "1s")

	// Receive without acking: handles are printed, the messages stay in flight.
	var got []map[string]any
	for len(got) < 5 {
		out = c.ok("", "receive", "--group", "billing", "--topic", "orders", "--no-ack", "--wait", "2s")
		batch := jsonLines(t, out)
		if len(batch) == 0 {
			t.Fatalf("no message; got %d of 5", len(got))
		}
		got = append(got, batch...)
	}
	bodies := map[string]map[string]any{}
	for _, m := range got {
		if h, _ := m["receipt_handle"].(string); !strings.HasPrefix(h, "r1.") || m["delivery_attempt"].(float64) != 1 {
			t.Fatalf("received %v", m)
		}
		bodies[m["body"].(string)] = m
	}
	second := bodies["second order"]
	if second["tag"] != "vip" || second["message_id"] != secondID || second["properties"].(map[string]any)["region"] != "eu" || len(second["keys"].([]any)) != 2 {
		t.Fatalf("second order: %v", second)
	}
	for _, b := range []string{"first order", "line one", "line two", "line three"} {
		if bodies[b] == nil {
			t.Fatalf("%q not received: %v", b, got)
		}
	}

	// describe while 5 are in flight.
	out = c.ok("", "topic", "describe", "orders")
	for _, want := range []string{"messages stored:  5", "QUEUE  MIN OFFSET  MAX OFFSET", "billing  0      5          0            5"} {
		if !strings.Contains(out, want) {
			t.Fatalf("topic describe lacks %q:\n%s", want, out)
		}
	}
	var td struct {
		Queues []struct {
			MinOffset string `json:"minOffset"`
			MaxOffset string `json:"maxOffset"`
		} `json:"queues"`
		Groups []struct {
			Group    string `json:"group"`
			InFlight string `json:"inFlight"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(c.ok("", "topic", "describe", "orders", "--json")), &td); err != nil || len(td.Queues) != 2 || td.Groups[0].InFlight != "5" {
		t.Fatalf("topic describe --json: %v %+v", err, td)
	}
	out = c.ok("", "group", "describe", "billing")
	for _, want := range []string{"dead-letter queue:", "%DLQ%billing", "orders  0      5          0            5"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group describe lacks %q:\n%s", want, out)
		}
	}
	c.fails(exitFail, `"nope"`, "group", "describe", "nope")

	// ack: two handles, then the same again (refused: already acked).
	h1, h2 := got[0]["receipt_handle"].(string), got[1]["receipt_handle"].(string)
	if out = c.ok("", "ack", "--group", "billing", "--topic", "orders", h1, h2); out != "acked 2 of 2 messages\n" {
		t.Fatalf("ack: %q", out)
	}
	c.fails(exitFail, "already acknowledged", "ack", "--group", "billing", "--topic", "orders", h1)
	c.fails(exitUsage, "give at least one receipt HANDLE", "ack", "--group", "billing", "--topic", "orders")

	// message show: by key and by id; a miss is an error.
	out = c.ok("", "message", "show", "order-7")
	if !strings.Contains(out, "message "+secondID+" (STORED)") || !strings.Contains(out, "second order") || !strings.Contains(out, "region=eu") {
		t.Fatalf("message show KEY:\n%s", out)
	}
	// Its state for the group that received it: acknowledged when it was
	// one of the two acked above, else still in flight.
	wantState := "billing: in flight (attempt 1), invisible until "
	if got[0]["message_id"] == secondID || got[1]["message_id"] == secondID {
		wantState = "billing: acknowledged"
	}
	if !strings.Contains(out, "groups:") || !strings.Contains(out, wantState) {
		t.Fatalf("message show KEY lacks %q:\n%s", wantState, out)
	}
	if out = c.ok("", "message", "show", secondID, "--topic", "orders", "--json"); !strings.Contains(out, `"messageId": "`+secondID+`"`) {
		t.Fatalf("message show ID --json:\n%s", out)
	}
	c.fails(exitFail, `no message with id or key "absent"`, "message", "show", "absent")

	// receive and ack: the FIFO topic's message with a new group.
	c.ok("", "group", "create", "ledger", "--fifo")
	out = c.ok("", "receive", "--group", "ledger", "--topic", "steps", "--wait", "2s")
	if ms := jsonLines(t, out); len(ms) != 1 || ms[0]["body"] != "step 1" || ms[0]["message_group"] != "account-1" || ms[0]["receipt_handle"] != nil {
		t.Fatalf("receive (acked): %q", out)
	}
	code, out, errs := c.run("", "receive", "--group", "ledger", "--topic", "steps", "--wait", "0")
	if code != 0 || out != "" || !strings.Contains(errs, "no message for group ledger") {
		t.Fatalf("empty receive: %d %q %q", code, out, errs)
	}
	// receive acked it: nothing in flight, no backlog.
	if out = c.ok("", "group", "describe", "ledger"); !strings.Contains(out, "steps  0      0          0            0") {
		t.Fatalf("after receive (with ack):\n%s", out)
	}
	// receive --sql: a new group sees only the message whose properties
	// match (the one sent with region=eu).
	c.ok("", "group", "create", "eu-desk")
	out = c.ok("", "receive", "--group", "eu-desk", "--topic", "orders", "--sql", "region = 'eu' AND TAGS = 'vip'", "--wait", "2s")
	if ms := jsonLines(t, out); len(ms) != 1 || ms[0]["message_id"] != secondID {
		t.Fatalf("receive --sql: %q", out)
	}
	c.fails(exitFail, "ILLEGAL_FILTER_EXPRESSION", "receive", "--group", "eu-desk", "--topic", "orders", "--sql", "region =", "--wait", "0")
}

// receive --follow prints messages as they arrive and stops cleanly on
// SIGINT.
func TestReceiveFollowStopsOnInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true, Args: []string{"--auto-create"}})
	c := cli{t: t, bin: testutil.Binary(t), addr: p.GRPC}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, "receive", "--group", "tail", "--topic", "live", "--follow", "--wait", "1s", "--server", c.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.ok("a\nb\nc\n", "send", "--topic", "live", "-")
	sc := bufio.NewScanner(stdout)
	var bodies []string
	for len(bodies) < 3 && sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		bodies = append(bodies, m["body"].(string))
	}
	sort.Strings(bodies) // three queues: no order between them
	if strings.Join(bodies, "") != "abc" {
		t.Fatalf("followed %q; stderr %s", bodies, errb.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("receive --follow after SIGINT: %v; stderr %s", err, errb.String())
	}
}

// Nothing listening: the error names the address and `mqgate serve`.
func TestMessageCommandsConnectionRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := cli{t: t, bin: testutil.Binary(t), addr: testutil.UnusedAddr(t)}
	for _, args := range [][]string{
		{"send", "--topic", "t", "x"},
		{"receive", "--group", "g", "--topic", "t"},
		{"ack", "--group", "g", "--topic", "t", "h"},
		{"message", "show", "x"},
		{"topic", "describe", "t"},
	} {
		c.fails(exitFail, "is `mqgate serve` running at that address?", args...)
	}
}

// --server takes a cluster's member list as the official clients do
// ("a;b;c"): the commands connect to the first address that answers, in
// order, so a member that is down is passed over.
func TestMessageCommandsServerList(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true})
	dead := testutil.UnusedAddr(t)
	c := cli{t: t, bin: testutil.Binary(t), addr: dead + ";" + p.GRPC + ";" + testutil.UnusedAddr(t)}
	c.ok("", "topic", "create", "listed", "--queues", "1")
	c.ok("", "group", "create", "lg")
	out := c.ok("", "send", "--topic", "listed", "--json", "through the list")
	sent := jsonLines(t, out)
	if len(sent) != 1 {
		t.Fatalf("send: %q", out)
	}
	out = c.ok("", "receive", "--group", "lg", "--topic", "listed", "--max", "1", "--json")
	got := jsonLines(t, out)
	if len(got) != 1 || got[0]["message_id"] != sent[0]["message_id"] || got[0]["body"] != "through the list" {
		t.Fatalf("receive through the list: %q (sent %q)", out, sent)
	}
	// Nothing listening at any address: the usual hint.
	c = cli{t: t, bin: c.bin, addr: dead + ";" + testutil.UnusedAddr(t)}
	c.fails(exitFail, "is `mqgate serve` running at that address?", "send", "--topic", "listed", "x")
}
