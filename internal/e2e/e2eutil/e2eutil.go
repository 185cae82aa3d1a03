package e2eutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/mqgate/mqgate/internal/testutil"
)

// Main runs a package's tests. The official client logs to
// $user.home/logs/rocketmqlogs by default (read in its package init):
// Main sends its logs, warnings only, to a temporary directory, rebuilds
// its logger, and keeps the directory when a test failed. It also guards
// the client's receives against its own end-of-stream race
// (receiverace.go).
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "mqgate-e2e-client-logs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(rmq.CLIENT_LOG_ROOT, dir)
	os.Setenv(rmq.CLIENT_LOG_LEVEL, "warn")
	rmq.ResetLogger()
	guardReceives()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "official client logs kept in %s\n", dir)
	} else {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Begin starts an end-to-end test: skipped in -short mode and under -race
// (unless MQGATE_E2E_RACE is set), and marked parallel: every test runs
// its own mqgate process.
func Begin(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end (starts the mqgate binary)")
	}
	if testutil.RaceEnabled && os.Getenv("MQGATE_E2E_RACE") == "" {
		// Not ours to fix: v5.1.3 applies a settings reply
		// (producer_options.go:155) and marshals the next periodic settings
		// sync (client.go:188) without synchronisation, and the classic
		// client v2.1.2 races as well; -race reports either as a failure
		// of whichever test is running.
		t.Skip("the official Go clients (v5.1.3, classic v2.1.2) have internal data races; run the end-to-end tests without -race (set MQGATE_E2E_RACE=1 to run them anyway)")
	}
	t.Parallel()
}

var seq atomic.Int64

// Uniq returns a name unique to this process and call. The pid keeps
// names of concurrent test processes apart (the classic client shares one
// instance per client id).
func Uniq(prefix string) string { return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1)) }

// Start runs mqgate (a fresh data dir unless o.DataDir is set) without
// its remoting listener.
func Start(t testing.TB, o testutil.StartOptions) *testutil.Proc {
	t.Helper()
	o.NoRemoting = true
	return testutil.Start(t, o)
}

// CLI runs `mqgate <args> --server <addr>` and fails the test unless it
// exits 0; it returns the combined output.
func CLI(t testing.TB, addr string, args ...string) string {
	t.Helper()
	out, err := CLIResult(t, addr, args...)
	if err != nil {
		t.Fatalf("mqgate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// CLIResult runs `mqgate <args> --server <addr>` and returns its combined
// output and exit error.
func CLIResult(t testing.TB, addr string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(testutil.Binary(t), append(args, "--server", addr)...).CombinedOutput()
	return string(out), err
}

// CLIResultArgs runs `mqgate <args>` as given and returns its combined
// output and exit error.
func CLIResultArgs(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(testutil.Binary(t), args...).CombinedOutput()
	return string(out), err
}

// Config points the official client at addr only.
func Config(addr, group string) *rmq.Config {
	// Credentials must be non-nil: v5.1.3 dereferences them in Sign.
	return &rmq.Config{Endpoint: addr, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// StartProducer starts an official producer, stopped at cleanup.
func StartProducer(t testing.TB, cfg *rmq.Config, opts ...rmq.ProducerOption) rmq.Producer {
	t.Helper()
	pr, err := NewStartedProducer(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.GracefulStop() })
	return pr
}

// NewStartedProducer creates and starts an official Producer, as a user
// would: a start that failed on the client's own settings race (see
// settingsRace) is made again with a new producer, up to three times.
func NewStartedProducer(cfg *rmq.Config, opts ...rmq.ProducerOption) (rmq.Producer, error) {
	for attempt := 1; ; attempt++ {
		pr, err := rmq.NewProducer(cfg, opts...)
		if err != nil {
			return nil, err
		}
		err = pr.Start() // a failed start stops the producer
		if err == nil {
			return pr, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), settingsRace) {
			return nil, fmt.Errorf("producer start: %w", err)
		}
	}
}

// settingsRace is in the error of an official Go producer (v5.1.3) whose
// start lost a race of its own: it sends its settings to each broker of
// its topics' routes in turn, and the answer of one, applied by another
// goroutine, rewrites the retry policy that the next settings share while
// grpc encodes them (producerSettings.applySettingsCommand). It happens
// with several brokers (several data groups), against any server whose
// retry policy differs from the client's initial one, and only before the
// first answer is applied (docs/compatibility.md).
const settingsRace = "marshaling apache.rocketmq.v2.TelemetryCommand: size mismatch"

// StartSimpleConsumer starts an official SimpleConsumer, stopped at
// cleanup.
func StartSimpleConsumer(t testing.TB, cfg *rmq.Config, opts ...rmq.SimpleConsumerOption) rmq.SimpleConsumer {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("consumer start: %v", err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	return c
}

// RPCCode is the v2 status code of an official client's error, or -1.
func RPCCode(err error) int32 {
	if e, ok := rmq.AsErrRpcStatus(err); ok {
		return e.Code
	}
	return -1
}

// IsNoMessage reports whether a Receive found nothing (MESSAGE_NOT_FOUND).
func IsNoMessage(err error) bool { return RPCCode(err) == int32(pb.Code_MESSAGE_NOT_FOUND) }

// Endpoints is the access point a client dialing addr sends in
// QueryRoute.
func Endpoints(t testing.TB, addr string) *pb.Endpoints {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Endpoints{Scheme: pb.AddressScheme_IPv4, Addresses: []*pb.Address{{Host: host, Port: int32(n)}}}
}
