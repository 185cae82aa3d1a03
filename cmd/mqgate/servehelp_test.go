package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Every setting is in exactly one section of serve -h, and the help
// shows each with its default in units and its environment variable.
func TestServeHelpGroupsEverySetting(t *testing.T) {
	seen := map[string]string{}
	for _, g := range serveHelpGroups {
		for _, n := range g.names {
			if _, ok := findSetting(n); !ok {
				t.Errorf("section %s names %q, which is not a setting", g.title, n)
			}
			if prev, dup := seen[n]; dup {
				t.Errorf("%q is in sections %s and %s", n, prev, g.title)
			}
			seen[n] = g.title
		}
	}
	for _, s := range settings {
		if _, ok := seen[s.name]; !ok {
			t.Errorf("setting %q is in no section of serve -h (serveHelpGroups)", s.name)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("serve -h: exit %d, %s", code, errb.String())
	}
	help := out.String()
	for _, want := range []string{"\nListeners:\n", "\nStorage:\n", "\nCluster:\n", "\nAuth:\n", "\nTelemetry:\n", "\nLimits:\n",
		"--retention DURATION", "(default 72h)", "--segment-size SIZE", "(default 1GiB)", "--auto-create ", "[MQGATE_AUTO_CREATE]"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	if strings.Contains(help, "(default false)") || strings.Contains(help, "0m0s") {
		t.Errorf("serve -h shows a false default or a duration without its units trimmed:\n%s", help)
	}
}

// --print-config writes booleans and integers as YAML booleans and
// integers, the rest as strings, and reads back as the same settings.
func TestPrintConfigTypes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--data-dir", t.TempDir(), "--auto-create", "--print-config"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["auto-create"] != true || m["join"] != false || m["disk-usage-limit"] != 90 || m["retention"] != "72h" || m["flush"] != "async" {
		t.Fatalf("typed values: auto-create %#v, join %#v, disk-usage-limit %#v, retention %#v, flush %#v\n%s",
			m["auto-create"], m["join"], m["disk-usage-limit"], m["retention"], m["flush"], out.String())
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{72 * time.Hour: "72h", 2 * time.Minute: "2m", 90 * time.Second: "1m30s",
		500 * time.Microsecond: "500µs", 0: "0s", time.Hour + time.Second: "1h0m1s", 2 * time.Second: "2s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
