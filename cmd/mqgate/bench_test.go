package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/cmd/mqgate/internal/bench"
	"github.com/mqgate/mqgate/internal/testutil"
)

// The load generator itself must keep working; its figures are not judged
// here (performance lives in `make bench`).
func TestBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, mode := range []string{"produce", "consume", "e2e", "http", "remoting"} {
		t.Run(mode, func(t *testing.T) {
			out, err := exec.Command(testutil.Binary(t), "bench", mode, "--json", "--duration", "400ms", "--warmup", "0s",
				"--producers", "2", "--consumers", "2", "--backlog", "2000", "--rate", "200").Output()
			if err != nil {
				t.Fatalf("bench %s: %v\n%s", mode, err, out)
			}
			var r bench.Result
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("output: %v\n%s", err, out)
			}
			if r.Mqgate.Messages == 0 || r.Mqgate.Errors != 0 || r.Mode != mode {
				t.Fatalf("result %+v", r)
			}
			// A consumed backlog that runs out ends the window: the
			// rate covers the time it lasted, never more messages than
			// were preloaded.
			if mode == "consume" && (r.Mqgate.Messages > 2000 || r.Mqgate.Seconds > 0.4+0.1) {
				t.Fatalf("consume window %+v", r.Mqgate)
			}
			if r.Echo == nil || r.Echo.Messages == 0 || r.Echo.Errors != 0 || r.Ratio <= 0 {
				t.Fatalf("no echo baseline: %+v", r)
			}
			// produce and consume run the plain echo beside the v2 one
			// (--echo both, the default).
			if plain := mode == "produce" || mode == "consume"; plain != (r.PlainEcho != nil) ||
				plain && (r.PlainEcho.Messages == 0 || r.PlainEcho.Errors != 0 || r.PlainRatio <= 0) {
				t.Fatalf("plain echo: %+v", r)
			}
			// The e2e echo relays what was sent: its latencies are real
			// send→receive samples, not canned answers.
			if mode == "e2e" && (r.Echo.P99us <= 0 || r.Echo.Messages > r.Mqgate.Messages*2+100) {
				t.Fatalf("e2e echo figures %+v", r.Echo)
			}
		})
	}
}

// produce --sdk-linger sends through the SDK's batching producer, to the
// v2 echo and to mqgate.
func TestBenchSDKLinger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	out, err := exec.Command(testutil.Binary(t), "bench", "produce", "--sdk-linger", "1ms", "--sdk-window", "32", "--json",
		"--duration", "400ms", "--warmup", "0s", "--producers", "2").Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var r bench.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	if r.Mqgate.Messages == 0 || r.Mqgate.Errors != 0 || r.Echo == nil || r.Echo.Messages == 0 || r.Echo.Errors != 0 || r.Ratio <= 0 {
		t.Fatalf("result %+v", r)
	}
	// The plain echo's canned answers fit fixed batch sizes only, not the
	// SDK's batches: it does not run beside --sdk-linger.
	if r.PlainEcho != nil {
		t.Fatalf("a plain echo ran beside --sdk-linger: %+v", r.PlainEcho)
	}
}

// --rounds alternates echo and mqgate runs and reports the median round.
func TestBenchRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	out, err := exec.Command(testutil.Binary(t), "bench", "consume", "--json", "--rounds", "3", "--duration", "300ms", "--warmup", "0s",
		"--consumers", "2", "--backlog", "1000").Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var r bench.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	if len(r.Rounds) != 3 {
		t.Fatalf("%d rounds, want 3: %+v", len(r.Rounds), r)
	}
	var below, above int
	for i, rd := range r.Rounds {
		// Every round has its own backlog to consume.
		if rd.Echo == nil || rd.Mqgate.Messages == 0 || rd.Mqgate.Errors != 0 || rd.Mqgate.Messages > 1000 {
			t.Fatalf("round %d: %+v", i+1, rd)
		}
		switch {
		case rd.Ratio < r.Ratio:
			below++
		case rd.Ratio > r.Ratio:
			above++
		}
	}
	if below > 1 || above > 1 || r.Mqgate.Messages == 0 {
		t.Fatalf("reported ratio %.3f is not the median of %+v", r.Ratio, r.Rounds)
	}
}

// Batched sends and split acks: every call is counted, and the echo
// makes the same calls as mqgate.
func TestBenchBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, c := range []struct {
		name string
		args []string
		// check is run on the echo's and on mqgate's figures.
		check func(t *testing.T, f bench.Figures)
	}{
		{"produce-batch32", []string{"produce", "--batch", "32", "--producers", "2"}, func(t *testing.T, f bench.Figures) {
			if f.Batch != 32 || f.Calls == 0 || f.Messages != f.Calls*32 || f.AckCalls != 0 {
				t.Fatalf("%s: %d messages in %d calls, batch %d: %+v", f.Target, f.Messages, f.Calls, f.Batch, f)
			}
		}},
		{"consume-ack-batch32", []string{"consume", "--ack-batch", "32", "--consumers", "2", "--backlog", "3000"}, func(t *testing.T, f bench.Figures) {
			// One ack per non-empty receive of up to 32.
			receives := f.Calls - f.AckCalls
			if f.AckBatch != 32 || f.AckCalls == 0 || f.AckCalls > receives || f.Messages > f.AckCalls*32 || f.Messages < f.AckCalls {
				t.Fatalf("%s: %d messages, %d calls of which %d acks: %+v", f.Target, f.Messages, f.Calls, f.AckCalls, f)
			}
			// The echo's receives always return 32 messages.
			if f.Target == "echo" && (receives != f.AckCalls || f.Messages != f.AckCalls*32) {
				t.Fatalf("%s: %d messages, %d calls of which %d acks: %+v", f.Target, f.Messages, f.Calls, f.AckCalls, f)
			}
		}},
		{"consume-ack-each", []string{"consume", "--ack-batch", "1", "--pipeline-acks=false", "--consumers", "2", "--backlog", "2000"}, func(t *testing.T, f bench.Figures) {
			// One awaited ack per message, plus receives of up to 32.
			receives := f.Calls - f.AckCalls
			if f.AckBatch != 1 || f.AckCalls == 0 || f.AckCalls != f.Messages || receives*32 < f.Messages ||
				f.Target == "echo" && receives*32 != f.Messages {
				t.Fatalf("%s: %d messages, %d calls of which %d acks: %+v", f.Target, f.Messages, f.Calls, f.AckCalls, f)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"bench"}, c.args...)
			args = append(args, "--json", "--duration", "400ms", "--warmup", "0s")
			out, err := exec.Command(testutil.Binary(t), args...).Output()
			if err != nil {
				t.Fatalf("bench %v: %v\n%s", c.args, err, out)
			}
			var r bench.Result
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("output: %v\n%s", err, out)
			}
			if r.Echo == nil || r.Ratio <= 0 {
				t.Fatalf("no echo baseline: %+v", r)
			}
			for _, f := range []bench.Figures{*r.Echo, r.Mqgate} {
				if f.Messages == 0 || f.Errors != 0 || f.Seconds <= 0 {
					t.Fatalf("%s: %+v", f.Target, f)
				}
				c.check(t, f)
				// The per-call figures are the per-message ones over the
				// same window.
				perCall := float64(f.Messages) / float64(f.Calls)
				if !near(f.CallsPerSecond*perCall, f.PerSecond) || f.CPUusPerMsg > 0 && !near(f.CPUusPerCall, f.CPUusPerMsg*perCall) {
					t.Fatalf("%s: per-call figures do not match the per-message ones: %+v", f.Target, f)
				}
			}
		})
	}
}

func near(a, b float64) bool { return a > 0 && b > 0 && a/b > 0.999 && a/b < 1.001 }

// Batch flags belong to their modes.
func TestBenchBatchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"consume", "--batch", "32"},
		{"produce", "--batch", "0"},
		{"produce", "--ack-batch", "8"},
		{"consume", "--ack-batch", "0"},
		{"http", "--batch", "32"},
	} {
		cmd := exec.Command(testutil.Binary(t), append([]string{"bench"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "batch") {
			t.Errorf("bench %v: %v, want exit 2 naming the flag\n%s", args, err, out)
		}
	}
}
