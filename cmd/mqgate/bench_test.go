package main

import (
	"encoding/json"
	"os/exec"
	"testing"

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
			var r benchResult
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
			if mode != "e2e" && (r.Echo == nil || r.Echo.Messages == 0 || r.Ratio <= 0) {
				t.Fatalf("no echo baseline: %+v", r)
			}
		})
	}
}
