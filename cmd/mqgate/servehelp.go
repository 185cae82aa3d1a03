package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mqgate/mqgate/gateway/node"
)

// serveHelpGroups are the sections of `mqgate serve -h`, in order; every
// setting is in exactly one (TestServeHelpGroupsEverySetting).
var serveHelpGroups = []struct {
	title string
	names []string
}{
	{"Listeners", []string{"grpc-addr", "http-addr", "remoting-addr", "metrics-addr", "advertise-addr",
		"insecure-listen-all", "tls-cert", "tls-key", "mcp"}},
	{"Storage", []string{"data-dir", "flush", "flush-interval", "flush-timeout", "staging-dir", "staging-linger",
		"segment-size", "log-cache", "retention", "disk-usage-limit", "disk-reserve"}},
	{"Topics and groups", []string{"auto-create", "lite-expiry-interval"}},
	{"Cluster", []string{"cluster-id", "node-id", "node-id-from-hostname", "peers", "join", "peer-token", "peer-tls-cert",
		"peer-tls-key", "peer-tls-ca", "raft-log-keep", "data-groups", "group-replicas", "replaces", "leader-wait"}},
	{"Auth", []string{"auth-file", "remoting-send-window", "metrics-token"}},
	{"Telemetry", []string{"log-level", "log-format"}},
	{"Limits", []string{"grpc-max-conns", "http-max-conns", "remoting-max-conns", "metrics-max-conns", "peer-max-conns",
		"conn-address-share", "fd-reserve", "handshake-timeout", "grpc-request-budget",
		"grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-max-connection-idle",
		"lite-topic-quota", "lite-subscription-quota"}},
	{"Shutdown", []string{"shutdown-timeout", "drain-notice"}},
}

// printServeHelp writes `mqgate serve -h`: the settings by section, each
// with its value's form, its default in units and its environment
// variable.
func printServeHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: mqgate serve [flags]

Each setting is a flag (--name value), an MQGATE_* environment variable, or a
key in the --config YAML file; precedence is flag > environment > file >
default. Durations take units (500ms, 30s, 2h), sizes too (64MiB, 1GiB).
The other commands: mqgate help.

  --config FILE           YAML file with settings (keys as the flag names)
  --print-config          print the effective configuration as YAML and exit
`)
	def := node.Defaults()
	grouped := map[string]bool{}
	var other []string
	for _, g := range serveHelpGroups {
		for _, n := range g.names {
			grouped[n] = true
		}
	}
	for _, s := range settings {
		if !grouped[s.name] {
			other = append(other, s.name)
		}
	}
	groups := serveHelpGroups
	if len(other) > 0 {
		groups = append(groups[:len(groups):len(groups)], struct {
			title string
			names []string
		}{"Other", other})
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.names {
			s, ok := findSetting(name)
			if !ok {
				continue
			}
			head := "  --" + s.name
			if ph := placeholder(s); ph != "" {
				head += " " + ph
			}
			text := s.usage
			if d := s.get(&def); d != "" && !(s.kind == "bool" && d == "false") {
				text += " (default " + d + ")"
			}
			text += " [" + s.env() + "]"
			writeWrapped(w, head, text)
		}
	}
	fmt.Fprint(w, "\nOpenTelemetry export is set with the standard OTEL_* environment variables (docs/operations.md).\n")
}

func placeholder(s setting) string {
	switch s.kind {
	case "bool":
		return ""
	case "int":
		return "N"
	case "duration":
		return "DURATION"
	case "size":
		return "SIZE"
	}
	return "VALUE"
}

// writeWrapped writes head, then text from column 26 wrapped at 100
// columns (on the next line when head is longer).
func writeWrapped(w io.Writer, head, text string) {
	const col, width = 26, 100
	line := head
	if len(line) >= col-1 {
		fmt.Fprintln(w, line)
		line = ""
	}
	line += strings.Repeat(" ", col-len(line))
	n := len(line)
	for _, word := range strings.Fields(text) {
		if n+len(word) > width && n > col {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			line, n = strings.Repeat(" ", col), col
		}
		line += word + " "
		n += len(word) + 1
	}
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}
