package sdk_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/internal/testutil"
)

// endpoint is what the examples dial. TestMain points it at a real mqgate
// it starts (with --auto-create, like `make run`), shared by the examples
// and the tests in sdk_test.go.
var endpoint = "127.0.0.1:8081"

// server is the shared mqgate process (nil in -short mode).
var server *testutil.Proc

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// -short skips end-to-end tests; the examples need the server, so
		// run only the Test functions unless -run says otherwise.
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^Test")
		}
		os.Exit(m.Run())
	}
	tb := &mainTB{}
	server = testutil.Start(tb, testutil.StartOptions{NoRemoting: true, Args: []string{"--auto-create"}})
	endpoint = server.GRPC
	if err := setupExamples(); err != nil {
		tb.Fatalf("creating the examples' topics and groups: %v", err)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "mqgate log:\n%s\n", server.Log())
	}
	tb.cleanup()
	os.Exit(code)
}

// setupExamples creates what auto-create cannot: the FIFO and DELAY
// topics and the FIFO group of the examples.
func setupExamples() error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := adminv1.NewAdminServiceClient(conn)
	for _, t := range []*adminv1.CreateTopicRequest{
		{Name: "payments", Type: "FIFO", Queues: 4},
		{Name: "reminders", Type: "DELAY"},
	} {
		if _, err := a.CreateTopic(ctx, t); err != nil {
			return err
		}
	}
	_, err = a.CreateGroup(ctx, &adminv1.CreateGroupRequest{Name: "ledger", Fifo: true})
	return err
}

func needServer(t *testing.T) {
	t.Helper()
	if server == nil {
		t.Skip("end-to-end (needs the mqgate binary; skipped with -short)")
	}
}

// mainTB lets TestMain use testutil.Start, which wants a testing.TB, for
// the process shared by every test and example. It implements the
// methods Start and Proc use; the embedded nil TB is never called.
type mainTB struct {
	testing.TB
	cleanups []func()
}

func (t *mainTB) Helper()                    {}
func (t *mainTB) Failed() bool               { return false }
func (t *mainTB) Cleanup(f func())           { t.cleanups = append(t.cleanups, f) }
func (t *mainTB) Logf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (t *mainTB) Fatal(args ...any)          { t.fail(fmt.Sprint(args...)) }
func (t *mainTB) Fatalf(f string, args ...any) {
	t.fail(fmt.Sprintf(f, args...))
}

func (t *mainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "mqgate-sdk-test-")
	if err != nil {
		t.fail(err.Error())
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (t *mainTB) fail(msg string) {
	fmt.Fprintln(os.Stderr, "sdk TestMain:", msg)
	t.cleanup()
	os.Exit(1)
}

func (t *mainTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}
