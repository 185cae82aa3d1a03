package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

const topicUsage = `Usage:
  mqgate topic create NAME [--type NORMAL|FIFO|DELAY|TRANSACTION|MIXED|LITE] [--queues N]
                           [--lite-ttl DURATION]
  mqgate topic list
  mqgate topic describe NAME
  mqgate topic lite NAME [--prefix P] [--limit N] [--after LITE_TOPIC]
  mqgate topic delete NAME

A LITE topic carries lite topics; --lite-ttl is how long one lives after its
last message (default 24h, negative: forever). "topic lite" lists its lite
topics with each group's backlog, in name order, --limit at a time (default
100); --after continues after the last name printed.

Every command talks to a running mqgate and takes:
  --server HOST:PORT   its gRPC port (default 127.0.0.1:8081)
  --tls                use TLS (the certificate is not verified)
  --access-key AK      sign calls as AK when mqgate runs with --auth-file
                       (env MQGATE_ACCESS_KEY)
  --secret-key SK      the secret key of AK (prefer env MQGATE_SECRET_KEY:
                       flags show in the process list)
  --json               print JSON instead of text
  --timeout DURATION   give up after this long (default 10s)
`

var topicTypes = []string{"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "LITE"}

// topicCommand is a parsed `mqgate topic ...` command line.
type topicCommand struct {
	sub     string // create, list, describe, lite, delete
	name    string
	typ     string // upper case
	queues  int32
	liteTTL time.Duration
	// lite: the page asked for.
	prefix, after string
	limit         int
	client        clientFlags
}

func parseTopicArgs(args []string) (topicCommand, error) {
	var tc topicCommand
	if len(args) == 0 {
		return tc, usageErr("missing subcommand (create, list, describe, lite or delete)")
	}
	tc.sub = args[0]
	fs := newFlagSet("mqgate topic " + tc.sub)
	tc.client.register(fs)
	var typ string
	var queues int
	switch tc.sub {
	case "create":
		fs.StringVar(&typ, "type", "NORMAL", "message type the topic accepts: "+strings.Join(topicTypes, ", "))
		fs.IntVar(&queues, "queues", 0, "number of queues (0: the server default, 8)")
		fs.DurationVar(&tc.liteTTL, "lite-ttl", 0, "LITE topics: how long a lite topic lives after its last message (0: 24h; negative: forever)")
	case "lite":
		fs.StringVar(&tc.prefix, "prefix", "", "only lite topics whose names start with this")
		fs.StringVar(&tc.after, "after", "", "start after this lite topic name (the last one of the previous page)")
		fs.IntVar(&tc.limit, "limit", 100, "lite topics per page (at most 1000)")
	case "list", "describe", "delete":
	case "help", "-h", "--help":
		return tc, flag.ErrHelp
	default:
		return tc, usageErr("unknown subcommand %q (want create, list, describe, lite or delete)", tc.sub)
	}
	name, err := resourceName(fs, args[1:], "topic", tc.sub)
	if err != nil {
		return tc, err
	}
	tc.name = name
	if tc.sub == "create" {
		tc.typ = strings.ToUpper(typ)
		ok := false
		for _, t := range topicTypes {
			ok = ok || t == tc.typ
		}
		if !ok {
			return tc, usageErr("--type %q: want one of %s", typ, strings.Join(topicTypes, ", "))
		}
		if tc.liteTTL != 0 && tc.typ != "LITE" {
			return tc, usageErr("--lite-ttl is for --type LITE only")
		}
		if queues < 0 || queues > 1<<16 {
			return tc, usageErr("--queues %d: want a positive number (or 0 for the server default)", queues)
		}
		tc.queues = int32(queues)
	}
	if tc.sub == "lite" && (tc.limit < 1 || tc.limit > 1000) {
		return tc, usageErr("--limit %d: want 1..1000", tc.limit)
	}
	return tc, nil
}

func topicCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tc, err := parseTopicArgs(args)
	if err != nil {
		return usageExit("topic", topicUsage, err, stdout, stderr)
	}
	return runClient(ctx, "topic "+tc.sub, tc.client, stderr, func(ctx context.Context, a *adminConn) error {
		switch tc.sub {
		case "create":
			req := &adminv1.CreateTopicRequest{Name: tc.name, Type: tc.typ, Queues: tc.queues}
			if tc.liteTTL != 0 {
				req.LiteTtl = durationpb.New(tc.liteTTL)
			}
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.CreateTopic, req)
			if err != nil {
				return err
			}
			if tc.client.json {
				return printJSON(stdout, resp.GetTopic())
			}
			t := resp.GetTopic()
			fmt.Fprintf(stdout, "created topic %s (type %s, %d queues)\n", t.GetName(), t.GetType(), t.GetQueues())
		case "list":
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ListTopics, &adminv1.ListTopicsRequest{})
			if err != nil {
				return err
			}
			if tc.client.json {
				return printJSON(stdout, resp)
			}
			printTopics(stdout, resp.GetTopics())
		case "describe":
			return describeTopic(ctx, a, tc.name, stdout) // describe.go: queue offsets, groups' progress
		case "lite":
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ListLiteTopics, &adminv1.ListLiteTopicsRequest{
				Topic: tc.name, Prefix: tc.prefix, PageToken: tc.after, PageSize: int32(tc.limit)})
			if err != nil {
				return err
			}
			if tc.client.json {
				return printJSON(stdout, resp)
			}
			printLiteTopics(stdout, tc.name, resp)
		case "delete":
			_, err := callAdmin(ctx, a, adminv1.AdminServiceClient.DeleteTopic, &adminv1.DeleteTopicRequest{Name: tc.name})
			if err != nil {
				return err
			}
			if tc.client.json {
				return printJSON(stdout, &adminv1.DeleteTopicResponse{})
			}
			fmt.Fprintf(stdout, "deleted topic %s\n", tc.name)
		}
		return nil
	})
}

func printTopics(w io.Writer, ts []*adminv1.Topic) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no topics")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tTYPE\tQUEUES\tPERMISSION\tCREATED")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.GetName(), t.GetType(), t.GetQueues(), t.GetPermission(),
			formatTime(t.GetCreateTime()))
	}
	_ = tw.Flush()
}

// printLiteTopics prints one page of a LITE topic's lite topics: one line
// per lite topic and group (a lite topic no group consumed has one line
// with "-" for the group).
func printLiteTopics(w io.Writer, parent string, r *adminv1.ListLiteTopicsResponse) {
	fmt.Fprintf(w, "%s: %d lite topics\n", parent, r.GetTotal())
	if len(r.GetLiteTopics()) == 0 {
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "LITE TOPIC\tQUEUE\tMIN\tMAX\tLAST STORED\tEXPIRES\tGROUP\tCONSUMED\tREADY\tIN FLIGHT\tSUBSCRIBERS")
	for _, lt := range r.GetLiteTopics() {
		expires := "never"
		if lt.GetExpireTime() != nil {
			expires = formatTime(lt.GetExpireTime())
		}
		head := fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s", lt.GetName(), lt.GetQueue(), lt.GetMinOffset(), lt.GetMaxOffset(),
			formatTime(lt.GetLastStored()), expires)
		subs := len(lt.GetSubscribers())
		if len(lt.GetGroups()) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t%d\t0\t%d\n", head, lt.GetMaxOffset()-lt.GetMinOffset(), subs)
		}
		for _, g := range lt.GetGroups() {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", head, g.GetGroup(), g.GetConsumedOffset(), g.GetReady(), g.GetInFlight(), subs)
		}
	}
	_ = tw.Flush()
	if r.GetNextPageToken() != "" {
		fmt.Fprintf(w, "more: --after %s\n", r.GetNextPageToken())
	}
}
