package main

import (
	"encoding/json"
	"os/exec"
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
			// The e2e echo relays what was sent: its latencies are real
			// send→receive samples, not canned answers.
			if mode == "e2e" && (r.Echo.P99us <= 0 || r.Echo.Messages > r.Mqgate.Messages*2+100) {
				t.Fatalf("e2e echo figures %+v", r.Echo)
			}
		})
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
