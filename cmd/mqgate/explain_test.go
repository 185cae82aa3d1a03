package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/sdk"
)

// TestExplainServerRefusals: a status the server answered is reported as
// what it says (the disk is full, the store cannot write), never as a
// server that cannot be reached; grpc-go's own connection failures still
// are.
func TestExplainServerRefusals(t *testing.T) {
	c := clientFlags{server: "127.0.0.1:8081", timeout: 10 * time.Second}
	const diskFull = "service not available now: the disk is full, new messages are refused until space is freed " +
		"(consumers still receive and acknowledge); nothing was stored (storage: disk full: 3.0 MiB free on the data disk, below its reserve of 4.0 MiB)"
	const noSpace = "reading consumer group g1: persisting group g1: meta: write groups.snap.tmp: no space left on device"
	refused := `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:8081: connect: connection refused"`
	noHost := `connection error: desc = "transport: Error while dialing: dial tcp: lookup nohost: no such host"`
	for _, tc := range []struct {
		name      string
		got       string
		want      []string
		wantNot   []string
		unreached bool
	}{
		{name: "admin: disk full", got: explainError(status.Error(codes.ResourceExhausted, diskFull), c),
			want: []string{"the disk is full", "nothing was stored"}},
		{name: "admin: store cannot write", got: explainError(status.Error(codes.Unavailable, noSpace), c),
			want: []string{"mqgate at 127.0.0.1:8081 is running but cannot serve this now", "no space left on device"}},
		{name: "admin: connection refused", got: explainError(status.Error(codes.Unavailable, refused), c),
			want: []string{"nothing is listening at 127.0.0.1:8081"}, unreached: true},
		{name: "admin: no such host", got: explainError(status.Error(codes.Unavailable, noHost), c),
			want: []string{"cannot reach mqgate at 127.0.0.1:8081"}, unreached: true},
		{name: "sdk: send on a full disk", got: explainSDK(&sdk.SendError{Topic: "t", MessageIDs: []string{"ID1"}, Attempts: 1,
			Outcome: sdk.ErrOutcomeUnknown, Err: &sdk.StatusError{Op: "SendMessage", Code: sdk.Code(v2.Code_INTERNAL_SERVER_ERROR), Message: diskFull}}, c, what{topic: "t"}),
			want: []string{"mqgate at 127.0.0.1:8081 refused the message", "the disk is full", "INTERNAL_SERVER_ERROR"}, wantNot: []string{"no answer", "may have been stored"}},
		{name: "sdk: internal error", got: explainSDK(&sdk.SendError{Topic: "t", MessageIDs: []string{"ID1"}, Attempts: 1,
			Outcome: sdk.ErrOutcomeUnknown, Err: &sdk.StatusError{Op: "SendMessage", Code: sdk.Code(v2.Code_INTERNAL_ERROR), Message: "internal error (logged by the server, request id r1)"}}, c, what{topic: "t"}),
			want: []string{"answered internal error", "may have been stored", "mqgate message show ID1"}, wantNot: []string{"no answer"}},
		{name: "sdk: handshake on a full disk", got: explainSDK(fmt.Errorf("sdk: consumer Telemetry handshake with %s: Telemetry: %w: %s", c.server, sdk.ErrUnavailable, noSpace), c, what{group: "g1"}),
			want: []string{"is running but cannot serve this now", "no space left on device"}},
		{name: "sdk: connection refused", got: explainSDK(fmt.Errorf("sdk: cannot reach %s: %w: %s", c.server, sdk.ErrUnavailable, refused), c, what{}),
			want: []string{"nothing is listening"}, unreached: true},
		{name: "sdk: not connected", got: explainSDK(fmt.Errorf("sdk: cannot reach %s: %w: not connected before the deadline (%v)", c.server, sdk.ErrUnavailable, errors.New("context deadline exceeded")), c, what{}),
			want: []string{"cannot reach mqgate"}, unreached: true},
	} {
		for _, w := range tc.want {
			if !strings.Contains(tc.got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, tc.got, w)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(tc.got, w) {
				t.Errorf("%s: %q says %q", tc.name, tc.got, w)
			}
		}
		if says := strings.Contains(tc.got, "is `mqgate serve` running"); says != tc.unreached {
			t.Errorf("%s: %q: asks whether mqgate serve runs: %v, want %v", tc.name, tc.got, says, tc.unreached)
		}
	}
}
