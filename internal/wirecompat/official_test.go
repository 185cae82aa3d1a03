package wirecompat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mqgate/mqgate/internal/wirecompat"
)

// messagingMethods is every MessagingService RPC the official Go client
// v5.1.3 knows. SyncLiteSubscription is newer and checked in newest_test.go.
var messagingMethods = []string{
	"QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage",
	"AckMessage", "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset",
	"GetOffset", "QueryOffset", "EndTransaction", "Telemetry",
	"NotifyClientTermination", "ChangeInvisibleDuration", "RecallMessage",
}

// TestMatchesOfficialClient builds cmd/wirecompat (which links both our
// generated package and the official client's) and runs it with the
// registration-conflict override, failing on any reported difference.
func TestMatchesOfficialClient(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build cmd/wirecompat: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "wirecompat")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/wirecompat")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wirecompat: %v\n%s", err, out)
	}

	run := exec.Command(bin, "-json")
	run.Env = append(os.Environ(), "GOLANG_PROTOBUF_REGISTRATION_CONFLICT=warn")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	var exitErr *exec.ExitError
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 1) {
		t.Fatalf("wirecompat: %v\nstderr (last 2 KiB): %s", err, tail(stderr.Bytes(), 2048))
	}

	var rep wirecompat.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding report: %v\n%s", err, stdout.Bytes())
	}
	for _, d := range rep.Diffs {
		t.Errorf("differs from the official client: %v", d)
	}
	if (err == nil) != (len(rep.Diffs) == 0) {
		t.Errorf("exit status %v does not match %d reported differences", err, len(rep.Diffs))
	}

	// The check must have covered the whole contract, not an empty set.
	c := rep.Checked
	if c.Files != 3 || c.Services != 2 || c.Messages < 60 || c.Fields < 180 ||
		c.Oneofs < 5 || c.Enums < 13 || c.EnumValues < 100 || c.Methods < 17 {
		t.Errorf("checked set too small: %+v", c)
	}
	for _, m := range messagingMethods {
		if !slices.Contains(rep.Methods, "apache.rocketmq.v2.MessagingService."+m) {
			t.Errorf("method %s was not checked", m)
		}
	}
	if !slices.Contains(rep.Methods, "apache.rocketmq.v2.Admin.ChangeLogLevel") {
		t.Errorf("Admin.ChangeLogLevel was not checked")
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
