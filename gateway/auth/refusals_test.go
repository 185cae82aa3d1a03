package auth

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/internal/testutil"
)

func TestRefusedCountsAndRateLimitsLogs(t *testing.T) {
	a, now := testAuth(t)
	clk := now
	a.now = func() time.Time { return clk }
	var buf testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		a.Refused(ctx, log, Refusal{Listener: "grpc", Peer: "10.0.0.1:5", Call: "/x/Y", Err: errors.New("bad signature")})
	}
	a.Refused(ctx, log, Refusal{Listener: "remoting", Peer: "10.0.0.2:6", Call: "request code 10", Authorization: true, Err: errors.New("may not publish")})
	clk = clk.Add(time.Second)
	a.Refused(ctx, log, Refusal{Listener: "remoting", Call: "request code 11", Err: errors.New("x")})

	want := map[string]uint64{"grpc/authentication": 30, "grpc/authorization": 0, "remoting/authentication": 1, "remoting/authorization": 1}
	for _, c := range a.RefusalCounts() {
		if w := want[c.Listener+"/"+c.Reason]; c.Count != w {
			t.Errorf("%s/%s: %d, want %d", c.Listener, c.Reason, c.Count, w)
		}
		delete(want, c.Listener+"/"+c.Reason)
	}
	if len(want) != 0 {
		t.Errorf("series missing: %v", want)
	}
	out := buf.String()
	if n := strings.Count(out, `msg="auth: call refused"`); n != maxRefusalLogsPerSecond+1 {
		t.Errorf("%d refusal lines, want %d (the budget, then one in the next second):\n%s", n, maxRefusalLogsPerSecond+1, out)
	}
	if !strings.Contains(out, "count=11") || !strings.Contains(out, "peer=10.0.0.1:5") || !strings.Contains(out, "reason=authentication") {
		t.Errorf("log lacks the summary of the 11 dropped lines or the refusal's details:\n%s", out)
	}
	var off *Authenticator
	off.Refused(ctx, log, Refusal{Err: errors.New("x")}) // auth off: nothing, no panic
}
