package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	"github.com/mqgate/mqgate/internal/testutil"
)

func TestParseTopicArgs(t *testing.T) {
	cases := []struct {
		args []string
		want topicCommand
		err  string // substring; "" means success
	}{
		{args: []string{"create", "orders"}, want: topicCommand{sub: "create", name: "orders", typ: "NORMAL"}},
		{args: []string{"create", "orders", "--type", "fifo", "--queues", "4"}, want: topicCommand{sub: "create", name: "orders", typ: "FIFO", queues: 4}},
		{args: []string{"create", "--queues=3", "orders", "--type=MIXED", "--json"}, want: topicCommand{sub: "create", name: "orders", typ: "MIXED", queues: 3}},
		{args: []string{"create", "orders", "--server", "10.0.0.1:9000", "--tls"}, want: topicCommand{sub: "create", name: "orders", typ: "NORMAL"}},
		{args: []string{"list"}, want: topicCommand{sub: "list"}},
		{args: []string{"describe", "orders"}, want: topicCommand{sub: "describe", name: "orders"}},
		{args: []string{"delete", "orders"}, want: topicCommand{sub: "delete", name: "orders"}},
		{args: []string{}, err: "missing subcommand"},
		{args: []string{"frobnicate"}, err: "unknown subcommand"},
		{args: []string{"create"}, err: "exactly one topic NAME"},
		{args: []string{"create", "a", "b"}, err: "exactly one topic NAME"},
		{args: []string{"create", "a", "--type", "PRIORITY"}, err: "--type"},
		{args: []string{"create", "a", "--lite-ttl", "1h"}, err: "--lite-ttl"},
		{args: []string{"create", "chat", "--type", "lite", "--lite-ttl", "1h"}, want: topicCommand{sub: "create", name: "chat", typ: "LITE", liteTTL: time.Hour}},
		{args: []string{"lite", "chat", "--prefix", "conv-", "--limit", "5", "--after", "conv-3"}, want: topicCommand{sub: "lite", name: "chat", prefix: "conv-", limit: 5, after: "conv-3"}},
		{args: []string{"lite", "chat", "--limit", "0"}, err: "--limit"},
		{args: []string{"lite"}, err: "exactly one topic NAME"},
		{args: []string{"create", "a", "--queues", "-1"}, err: "--queues"},
		{args: []string{"create", "a", "--queues", "many"}, err: "invalid value"},
		{args: []string{"create", "a", "--nope"}, err: "not defined"},
		{args: []string{"list", "x"}, err: "no arguments"},
		{args: []string{"delete"}, err: "exactly one topic NAME"},
	}
	for _, c := range cases {
		got, err := parseTopicArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, errUsage) {
				t.Errorf("%q: err %v, want usage error containing %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if got.sub != c.want.sub || got.name != c.want.name || got.typ != c.want.typ || got.queues != c.want.queues ||
			got.liteTTL != c.want.liteTTL || got.prefix != c.want.prefix || got.after != c.want.after || (c.want.limit != 0 && got.limit != c.want.limit) {
			t.Errorf("%q: got %+v, want %+v", c.args, got, c.want)
		}
		if strings.Contains(strings.Join(c.args, " "), "10.0.0.1:9000") && (got.client.server != "10.0.0.1:9000" || !got.client.tls) {
			t.Errorf("%q: client flags %+v", c.args, got.client)
		}
		if !strings.Contains(strings.Join(c.args, " "), "--server") && got.client.server != "127.0.0.1:8081" {
			t.Errorf("%q: default server %q", c.args, got.client.server)
		}
		if strings.Contains(strings.Join(c.args, " "), "--json") != got.client.json {
			t.Errorf("%q: json %v", c.args, got.client.json)
		}
	}
	if _, err := parseTopicArgs([]string{"create", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestParseGroupArgs(t *testing.T) {
	cases := []struct {
		args []string
		want groupCommand
		err  string
	}{
		{args: []string{"create", "g"}, want: groupCommand{sub: "create", name: "g"}},
		{args: []string{"create", "g", "--fifo", "--max-delivery-attempts", "2", "--retry", "Exponential"},
			want: groupCommand{sub: "create", name: "g", fifo: true, maxAttempts: 2, retry: "exponential"}},
		{args: []string{"create", "--retry=customized", "g"}, want: groupCommand{sub: "create", name: "g", retry: "customized"}},
		{args: []string{"list", "--json"}, want: groupCommand{sub: "list"}},
		{args: []string{"describe", "g"}, want: groupCommand{sub: "describe", name: "g"}},
		{args: []string{"delete", "g"}, want: groupCommand{sub: "delete", name: "g"}},
		{args: []string{"create", "g", "--retry", "linear"}, err: "--retry"},
		{args: []string{"create", "g", "--max-delivery-attempts", "-3"}, err: "--max-delivery-attempts"},
		{args: []string{"create"}, err: "exactly one group NAME"},
		{args: []string{"remove", "g"}, err: "unknown subcommand"},
	}
	for _, c := range cases {
		got, err := parseGroupArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if got.sub != c.want.sub || got.name != c.want.name || got.fifo != c.want.fifo || got.maxAttempts != c.want.maxAttempts || got.retry != c.want.retry {
			t.Errorf("%q: got %+v, want %+v", c.args, got, c.want)
		}
	}
}

func TestParseGroupResetOffsetArgs(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	earliest, latest := adminv1.ResetPosition_RESET_POSITION_EARLIEST, adminv1.ResetPosition_RESET_POSITION_LATEST
	cases := []struct {
		args []string
		want resetTarget
		err  string
	}{
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to", "earliest"}, want: resetTarget{topic: "orders", position: earliest}},
		{args: []string{"reset-offset", "--to=LATEST", "--topic=orders", "g", "--json"}, want: resetTarget{topic: "orders", position: latest}},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "2026-12-01T10:00:00Z"}, want: resetTarget{topic: "orders", time: at}},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "2026-12-01T11:00:00.25+01:00"},
			want: resetTarget{topic: "orders", time: at.Add(250 * time.Millisecond)}},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "1796119200000"}, want: resetTarget{topic: "orders", time: at}},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "1796119200001"}, want: resetTarget{topic: "orders", time: at.Add(time.Millisecond)}},
		{args: []string{"reset-offset", "g", "--to", "earliest"}, err: "needs --topic TOPIC"},
		{args: []string{"reset-offset", "g", "--topic", " ", "--to", "earliest"}, err: "needs --topic TOPIC"},
		{args: []string{"reset-offset", "g", "--topic", "orders"}, err: "--to-time TIME, --to earliest|latest, or --queue N --to-offset OFFSET"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to", "latest", "--to-time", "1796119200000"}, err: "exclude each other"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to", "first"}, err: `--to "first": want earliest or latest`},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "yesterday"}, err: "RFC 3339"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "2026-12-01T10:00:00"}, err: "RFC 3339"}, // no offset: ambiguous
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "1796119200"}, err: "Unix seconds? append 000"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-time", "99999999999999999999"}, err: "out of range"},
		{args: []string{"reset-offset", "--topic", "orders", "--to", "latest"}, err: "exactly one group NAME"},
		{args: []string{"reset-offset", "g", "h", "--topic", "orders", "--to", "latest"}, err: "exactly one group NAME"},
		{args: []string{"describe", "g", "--topic", "orders"}, err: "not defined"}, // the reset flags belong to reset-offset
	}
	for _, c := range cases {
		got, err := parseGroupArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, errUsage) {
				t.Errorf("%q: err %v, want usage error containing %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		r := got.reset
		if got.sub != "reset-offset" || got.name != "g" || r.topic != c.want.topic || r.position != c.want.position || !r.time.Equal(c.want.time) {
			t.Errorf("%q: got %+v, want %+v", c.args, got, c.want)
		}
		// The request carries the position, or else the time.
		req := r.request(got.name)
		if req.GetGroup() != "g" || req.GetTopic() != c.want.topic || req.GetPosition() != c.want.position ||
			(c.want.position == 0) != (req.GetTime() != nil) || (req.GetTime() != nil && !req.GetTime().AsTime().Equal(c.want.time)) {
			t.Errorf("%q: request %v", c.args, req)
		}
	}
}

// --queue restricts any target to one queue; --to-offset needs it.
func TestParseGroupResetOffsetQueueArgs(t *testing.T) {
	cases := []struct {
		args   []string
		queue  int32
		offset int64 // -1: not an offset reset
		err    string
	}{
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "2", "--to-offset", "1234"}, queue: 2, offset: 1234},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "0", "--to-offset", "0"}, queue: 0, offset: 0},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "3", "--to", "latest"}, queue: 3, offset: -1},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to", "latest"}, queue: -1, offset: -1},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--to-offset", "5"}, err: "--to-offset needs --queue N"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "1", "--to-offset", "-5"}, err: "want a queue offset"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "1", "--to-offset", "x"}, err: "want a queue offset"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "1", "--to-offset", "5", "--to", "latest"}, err: "exclude each other"},
		{args: []string{"reset-offset", "g", "--topic", "orders", "--queue", "-2", "--to", "latest"}, err: "--queue -2"},
	}
	for _, c := range cases {
		got, err := parseGroupArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, errUsage) {
				t.Errorf("%q: err %v, want usage error containing %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		req := got.reset.request(got.name)
		if (c.queue < 0) != (req.QueueId == nil) || c.queue >= 0 && req.GetQueueId() != c.queue {
			t.Errorf("%q: request queue %v, want %d", c.args, req.QueueId, c.queue)
		}
		if _, isOffset := req.GetTo().(*adminv1.ResetOffsetRequest_Offset); isOffset != (c.offset >= 0) || isOffset && req.GetOffset() != c.offset {
			t.Errorf("%q: request %v, want offset %d", c.args, req, c.offset)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"topic", "create"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(errb.String(), "exactly one topic NAME") || !strings.Contains(errb.String(), "Usage:") {
		t.Fatalf("stderr %q", errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"group", "help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "--max-delivery-attempts") ||
		!strings.Contains(out.String(), "mqgate group reset-offset NAME --topic TOPIC [--queue N] (--to-time TIME | --to earliest|latest | --to-offset OFFSET)") {
		t.Fatalf("group help: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "reset their offsets") {
		t.Fatalf("help: %d %q", code, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"group", "reset-offset", "g", "--to", "earliest"}, &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "mqgate group: group reset-offset needs --topic TOPIC") || !strings.Contains(errb.String(), "Usage:") {
		t.Fatalf("reset-offset without --topic: %d %q", code, errb.String())
	}
}

func TestConnectionRefusedNamesServe(t *testing.T) {
	addr := testutil.UnusedAddr(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"topic", "list", "--server", addr, "--timeout", "5s"}, &out, &errb)
	if code != exitFail {
		t.Fatalf("exit %d, want %d", code, exitFail)
	}
	if msg := errb.String(); !strings.Contains(msg, addr) || !strings.Contains(msg, "mqgate serve") {
		t.Fatalf("stderr %q does not say whether mqgate serve runs at %s", msg, addr)
	}
}

// fakeAdmin answers the admin API from memory, to test the commands'
// output and error reporting without a server.
type fakeAdmin struct {
	adminv1.UnimplementedAdminServiceServer
	topics map[string]*adminv1.Topic
	reset  *adminv1.ResetOffsetRequest // the last ResetOffset request
}

// ResetOffset answers two queues, or NotFound for topic "nope".
func (f *fakeAdmin) ResetOffset(_ context.Context, r *adminv1.ResetOffsetRequest) (*adminv1.ResetOffsetResponse, error) {
	f.reset = r
	if r.Topic == "nope" {
		return nil, status.Errorf(codes.NotFound, "topic %q does not exist", r.Topic)
	}
	return &adminv1.ResetOffsetResponse{Queues: []*adminv1.QueueReset{
		{QueueId: 0, PreviousOffset: 1200, Offset: 7}, {QueueId: 1, PreviousOffset: 1180, Offset: 0}}}, nil
}

func (f *fakeAdmin) CreateTopic(_ context.Context, r *adminv1.CreateTopicRequest) (*adminv1.CreateTopicResponse, error) {
	if _, ok := f.topics[r.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "topic %q already exists", r.Name)
	}
	q := r.Queues
	if q == 0 {
		q = 8
	}
	t := &adminv1.Topic{Name: r.Name, Type: r.Type, Queues: q, Permission: "READ_WRITE"}
	f.topics[r.Name] = t
	return &adminv1.CreateTopicResponse{Topic: t}, nil
}

func (f *fakeAdmin) ListTopics(context.Context, *adminv1.ListTopicsRequest) (*adminv1.ListTopicsResponse, error) {
	var out []*adminv1.Topic
	for _, t := range f.topics {
		out = append(out, t)
	}
	return &adminv1.ListTopicsResponse{Topics: out}, nil
}

func TestTopicCommandsAgainstFakeServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(gs, &fakeAdmin{topics: map[string]*adminv1.Topic{}})
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	addr := lis.Addr().String()
	runCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code := run(ctx, append(args, "--server", addr), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := runCmd("topic", "create", "orders", "--type", "fifo", "--queues", "4")
	if code != 0 || out != "created topic orders (type FIFO, 4 queues)\n" {
		t.Fatalf("create: %d %q", code, out)
	}
	code, _, errs := runCmd("topic", "create", "orders")
	if code != exitFail || !strings.Contains(errs, `topic "orders" already exists`) {
		t.Fatalf("duplicate create: %d %q", code, errs)
	}
	code, out, _ = runCmd("topic", "list")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "orders") || !strings.Contains(out, "FIFO") {
		t.Fatalf("list: %d %q", code, out)
	}
	code, out, _ = runCmd("topic", "list", "--json")
	if code != 0 || !strings.Contains(out, `"name": "orders"`) {
		t.Fatalf("list --json: %d %q", code, out)
	}
	code, _, errs = runCmd("group", "list")
	if code != exitFail || !strings.Contains(errs, "does not offer the mqgate admin API") && !strings.Contains(errs, "Unimplemented") {
		t.Fatalf("unimplemented: %d %q", code, errs)
	}
}

// fakeAdminServer serves what register adds on a local port and returns a
// runner of mqgate commands against it.
func fakeAdminServer(t *testing.T, register func(*grpc.Server)) func(args ...string) (int, string, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code := run(ctx, append(args, "--server", lis.Addr().String()), &out, &errb)
		return code, out.String(), errb.String()
	}
}

func TestGroupResetOffsetAgainstFakeServer(t *testing.T) {
	f := &fakeAdmin{}
	runCmd := fakeAdminServer(t, func(gs *grpc.Server) { adminv1.RegisterAdminServiceServer(gs, f) })

	code, out, errs := runCmd("group", "reset-offset", "billing", "--topic", "orders", "--to-time", "2026-12-01T10:00:00Z")
	if want := "QUEUE  PREVIOUS  OFFSET\n0      1200      7\n1      1180      0\n"; code != exitOK || out != want {
		t.Fatalf("reset-offset: %d %q %q, want %q", code, out, errs, want)
	}
	if f.reset.GetGroup() != "billing" || f.reset.GetTopic() != "orders" || !f.reset.GetTime().AsTime().Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("server got %v", f.reset)
	}
	code, out, _ = runCmd("group", "reset-offset", "billing", "--topic", "orders", "--to", "earliest", "--json")
	if code != exitOK || !strings.Contains(out, `"queues": [`) || !strings.Contains(out, `"previousOffset": "1200"`) {
		t.Fatalf("reset-offset --json: %d %q", code, out)
	}
	if f.reset.GetPosition() != adminv1.ResetPosition_RESET_POSITION_EARLIEST || f.reset.GetTime() != nil {
		t.Fatalf("server got %v", f.reset)
	}
	code, _, errs = runCmd("group", "reset-offset", "billing", "--topic", "nope", "--to", "latest")
	if code != exitFail || errs != "mqgate group reset-offset: topic \"nope\" does not exist (NotFound)\n" {
		t.Fatalf("unknown topic: %d %q", code, errs)
	}
}

// An mqgate from before an admin RPC answers "unknown method": the CLI
// says so rather than doubting the port is mqgate's.
func TestOlderServerWithoutTheRPC(t *testing.T) {
	runCmd := fakeAdminServer(t, func(gs *grpc.Server) {
		// The service with no methods: every call is an unknown method.
		gs.RegisterService(&grpc.ServiceDesc{ServiceName: adminv1.AdminService_ServiceDesc.ServiceName, HandlerType: (*any)(nil)}, struct{}{})
	})
	code, _, errs := runCmd("group", "reset-offset", "billing", "--topic", "orders", "--to", "latest")
	if code != exitFail || !strings.Contains(errs, "does not offer this command") || !strings.Contains(errs, "older version") {
		t.Fatalf("older server: %d %q", code, errs)
	}
}
