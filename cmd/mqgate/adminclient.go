package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/sdk"
)

// Exit statuses of the client subcommands.
const (
	exitOK    = 0
	exitFail  = 1 // the server refused, or could not be reached
	exitUsage = 2
)

const defaultServer = "127.0.0.1:8081"

// clientFlags are the flags every admin subcommand takes.
type clientFlags struct {
	server    string
	tls       bool
	json      bool
	timeout   time.Duration
	accessKey string
	secretKey string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", defaultServer, "address (HOST:PORT) of the running mqgate's gRPC port; a cluster's members' separated by ';' are tried in order")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (the certificate is not verified)")
	fs.BoolVar(&c.json, "json", false, "print the result as JSON")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up after this long")
	fs.StringVar(&c.accessKey, "access-key", os.Getenv("MQGATE_ACCESS_KEY"), "access key to sign calls with, when the server runs with --auth-file (env MQGATE_ACCESS_KEY)")
	fs.StringVar(&c.secretKey, "secret-key", os.Getenv("MQGATE_SECRET_KEY"), "secret key of --access-key; prefer the environment variable MQGATE_SECRET_KEY, which other users cannot read from the process list")
}

// signed reports whether calls are to be signed.
func (c clientFlags) signed() bool { return c.accessKey != "" || c.secretKey != "" }

// newFlagSet returns a flag set that reports errors instead of exiting or
// printing: the caller prints one message and the command's usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments ("topic create NAME --queues 4" and "topic create
// --queues 4 NAME" both work) and returns the positional ones. A bad flag
// is a usage error; -h or --help is flag.ErrHelp.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// adminConn is a connection to a running mqgate's AdminService.
type adminConn struct {
	flags  clientFlags
	conn   *grpc.ClientConn
	client adminv1.AdminServiceClient
}

func dialAdmin(c clientFlags) (*adminConn, error) {
	creds := insecure.NewCredentials()
	if c.tls {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // mqgate's default certificate is self-signed
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.signed() {
		opts = append(opts, grpc.WithPerRPCCredentials(sdk.Credentials(c.accessKey, c.secretKey)))
	}
	target, topts := sdk.DialTarget(c.server)
	conn, err := grpc.NewClient(target, append(opts, topts...)...)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %v", c.server, err)
	}
	return &adminConn{flags: c, conn: conn, client: adminv1.NewAdminServiceClient(conn)}, nil
}

func (a *adminConn) Close() { _ = a.conn.Close() }

// callAdmin runs one AdminService RPC, named by its method expression,
// under the --timeout:
//
//	resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ListTopics, &adminv1.ListTopicsRequest{})
func callAdmin[Req, Resp any](ctx context.Context, a *adminConn, rpc func(adminv1.AdminServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, a.flags.timeout)
	defer cancel()
	return rpc(a.client, ctx, req)
}

// explainError turns an RPC failure into one line for the user: the
// server's own message for refusals, and a hint about `mqgate serve` when
// nothing answers at the address.
func explainError(err error, c clientFlags) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	switch st.Code() {
	case codes.Unavailable:
		msg := st.Message()
		switch {
		case strings.Contains(msg, "connection refused"):
			return fmt.Sprintf("nothing is listening at %s (connection refused): is `mqgate serve` running at that address? (set --server HOST:PORT)", c.server)
		case strings.Contains(msg, "draining"):
			return fmt.Sprintf("mqgate at %s is shutting down: %s", c.server, msg)
		case !unreachable(msg):
			return fmt.Sprintf("mqgate at %s is running but cannot serve this now: %s", c.server, msg)
		}
		return fmt.Sprintf("cannot reach mqgate at %s (%s): is `mqgate serve` running at that address?", c.server, msg)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer from %s within %s: is `mqgate serve` running at that address?", c.server, c.timeout)
	case codes.Unimplemented:
		// gRPC answers "unknown method" when the service is there but
		// the method is not: an mqgate from before the command's RPC.
		if strings.HasPrefix(st.Message(), "unknown method") {
			return fmt.Sprintf("the mqgate at %s does not offer this command (%s): it runs an older version", c.server, st.Message())
		}
		return fmt.Sprintf("the server at %s does not offer the mqgate admin API (%s): is it an mqgate gRPC port?", c.server, st.Message())
	}
	return fmt.Sprintf("%s (%s)", st.Message(), st.Code())
}

// printJSON writes m as indented protojson. protojson varies its
// whitespace on purpose; json.Indent makes the output stable for scripts.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// errUsage marks argument errors (exit status 2).
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// usageExit reports a command line that did not parse: help (-h, --help,
// help) prints the usage to stdout and exits 0; anything else prints the
// error and the usage to stderr and exits 2.
func usageExit(name, usage string, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "mqgate %s: %v\n\n%s", name, strings.TrimPrefix(err.Error(), "usage: "), usage)
	return exitUsage
}

// runClient runs a parsed subcommand against the server and maps the
// outcome to an exit status, printing errors as "mqgate <cmd>: <reason>".
func runClient(ctx context.Context, name string, c clientFlags, stderr io.Writer, fn func(ctx context.Context, a *adminConn) error) int {
	a, err := dialAdmin(c)
	if err != nil {
		fmt.Fprintf(stderr, "mqgate %s: %v\n", name, err)
		return exitUsage
	}
	defer a.Close()
	if err := fn(ctx, a); err != nil {
		fmt.Fprintf(stderr, "mqgate %s: %s\n", name, explainError(err, c))
		return exitFail
	}
	return exitOK
}

// newTable aligns the text output's columns (two spaces apart).
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func formatTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().Local().Format(time.RFC3339)
}

// resourceName parses the rest of a topic or group command line (flags
// may be interleaved with the NAME): list takes no NAME, every other
// subcommand exactly one.
func resourceName(fs *flag.FlagSet, args []string, kind, sub string) (string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	if sub == "list" {
		if len(pos) != 0 {
			return "", usageErr("%s list takes no arguments, got %q", kind, pos)
		}
		return "", nil
	}
	if len(pos) != 1 {
		return "", usageErr("%s %s needs exactly one %s NAME, got %d arguments", kind, sub, kind, len(pos))
	}
	return pos[0], nil
}
