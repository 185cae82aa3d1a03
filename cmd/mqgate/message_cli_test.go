package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseSendArgs(t *testing.T) {
	sc, err := parseSendArgs([]string{"--topic", "t", "--key", "a", "--key", "b", "--property", "x=1", "--property", "y=a=b", "--group", "g", "--delay", "30s", "--tag", "T", "body text", "--json"})
	if err != nil {
		t.Fatal(err)
	}
	if sc.topic != "t" || strings.Join(sc.keys, ",") != "a,b" || sc.props["x"] != "1" || sc.props["y"] != "a=b" || sc.group != "g" ||
		sc.delay != 30*time.Second || sc.tag != "T" || sc.body != "body text" || sc.stdin || !sc.client.json || sc.client.server != defaultServer {
		t.Fatalf("%+v", sc)
	}
	m := sc.message("x")
	if m.MessageGroup != "g" || time.Until(m.DeliveryTime) < 29*time.Second || len(m.Keys) != 2 || m.Properties["y"] != "a=b" {
		t.Fatalf("message %+v", m)
	}
	if sc, err := parseSendArgs([]string{"--topic", "t", "-", "--server", "h:1"}); err != nil || !sc.stdin || sc.client.server != "h:1" {
		t.Fatalf("stdin: %+v %v", sc, err)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"x"}, "--topic is required"},
		{[]string{"--topic", "t"}, "give the message BODY"},
		{[]string{"--topic", "t", "a", "b"}, "one BODY per command"},
		{[]string{"--topic", "t", ""}, "the BODY is empty"},
		{[]string{"--topic", "t", "--property", "novalue", "x"}, "want KEY=VALUE"},
		{[]string{"--topic", "t", "--delay", "-1s", "x"}, "negative"},
		{[]string{"--topic", "t", "--delay", "soon", "x"}, "invalid value"},
	} {
		if _, err := parseSendArgs(c.args); err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want a usage error containing %q", c.args, err, c.err)
		}
	}
	if _, err := parseSendArgs([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestParseReceiveAndAckArgs(t *testing.T) {
	rc, err := parseReceiveArgs([]string{"--group", "g", "--topic", "t"})
	if err != nil || rc.max != 32 || rc.wait != 5*time.Second || rc.invisible != 30*time.Second || rc.noAck || rc.follow || rc.tag != "*" {
		t.Fatalf("defaults: %+v %v", rc, err)
	}
	rc, err = parseReceiveArgs([]string{"--group", "g", "--topic", "t", "--max", "3", "--wait", "0", "--invisible", "1m", "--no-ack", "--follow", "--tag", "a||b"})
	if err != nil || rc.max != 3 || rc.wait != 0 || rc.invisible != time.Minute || !rc.noAck || !rc.follow || rc.tag != "a||b" {
		t.Fatalf("%+v %v", rc, err)
	}
	if rc, err = parseReceiveArgs([]string{"--group", "g", "--topic", "t", "--sql", "a > 1"}); err != nil || rc.sql != "a > 1" {
		t.Fatalf("--sql: %+v %v", rc, err)
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--topic", "t"}, "--group"},
		{[]string{"--group", "g"}, "--topic"},
		{[]string{"--group", "g", "--topic", "t", "--max", "33"}, "--max 33"},
		{[]string{"--group", "g", "--topic", "t", "--invisible", "5s"}, "--invisible 5s"},
		{[]string{"--group", "g", "--topic", "t", "extra"}, "no arguments"},
		{[]string{"--group", "g", "--topic", "t", "--tag", "a", "--sql", "b > 1"}, "not both"},
	} {
		if _, err := parseReceiveArgs(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("receive %q: %v, want %q", c.args, err, c.err)
		}
	}
	ac, err := parseAckArgs([]string{"--group", "g", "--topic", "t", "h1", "h2"})
	if err != nil || strings.Join(ac.handles, ",") != "h1,h2" {
		t.Fatalf("ack: %+v %v", ac, err)
	}
	if _, err := parseAckArgs([]string{"--group", "g", "--topic", "t"}); err == nil || !strings.Contains(err.Error(), "HANDLE") {
		t.Fatalf("ack without handles: %v", err)
	}
	mc, err := parseMessageArgs([]string{"show", "id-1", "--topic", "t", "--max", "5"})
	if err != nil || mc.query != "id-1" || mc.topic != "t" || mc.max != 5 {
		t.Fatalf("message show: %+v %v", mc, err)
	}
	for _, args := range [][]string{{}, {"list"}, {"show"}, {"show", "a", "b"}, {"show", "a", "--max", "0"}} {
		if _, err := parseMessageArgs(args); err == nil || !errors.Is(err, errUsage) {
			t.Errorf("message %q: %v", args, err)
		}
	}
}

func TestUsageOfMessageCommands(t *testing.T) {
	for _, cmd := range [][]string{{"send", "-h"}, {"receive", "--help"}, {"ack", "-h"}, {"message", "help"}} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), cmd, &out, &errb); code != exitOK || !strings.Contains(out.String(), "Usage:") {
			t.Errorf("%q: %d %q %q", cmd, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"receive", "--topic", "t"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--group") {
		t.Errorf("missing --group: %d %q", code, errb.String())
	}
}

// The progress line: count and rate over the last interval; nothing is
// printed (and no goroutine runs) when stderr is not a terminal.
func TestRateLine(t *testing.T) {
	var buf bytes.Buffer
	r := newRate(&buf, "sent", false)
	r.add(10)
	start := r.last
	if got := r.line(start.Add(2 * time.Second)); got != "sent 10 messages (5/s)" {
		t.Fatalf("line %q", got)
	}
	r.add(3)
	if got := r.line(start.Add(3 * time.Second)); got != "sent 13 messages (3/s)" {
		t.Fatalf("line %q", got)
	}
	r.finish()
	if buf.Len() != 0 {
		t.Fatalf("printed %q to a non-terminal", buf.String())
	}
	if isTerminal(&buf) {
		t.Fatal("a buffer is not a terminal")
	}
}
