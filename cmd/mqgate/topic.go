package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

const topicUsage = `Usage:
  mqgate topic create NAME [--type NORMAL|FIFO|DELAY|TRANSACTION|MIXED] [--queues N]
  mqgate topic list
  mqgate topic describe NAME
  mqgate topic delete NAME

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

var topicTypes = []string{"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}

// topicCommand is a parsed `mqgate topic ...` command line.
type topicCommand struct {
	sub    string // create, list, describe, delete
	name   string
	typ    string // upper case
	queues int32
	client clientFlags
}

func parseTopicArgs(args []string) (topicCommand, error) {
	var tc topicCommand
	if len(args) == 0 {
		return tc, usageErr("missing subcommand (create, list, describe or delete)")
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
	case "list", "describe", "delete":
	case "help", "-h", "--help":
		return tc, flag.ErrHelp
	default:
		return tc, usageErr("unknown subcommand %q (want create, list, describe or delete)", tc.sub)
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
		if queues < 0 || queues > 1<<16 {
			return tc, usageErr("--queues %d: want a positive number (or 0 for the server default)", queues)
		}
		tc.queues = int32(queues)
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
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.CreateTopic, &adminv1.CreateTopicRequest{Name: tc.name, Type: tc.typ, Queues: tc.queues})
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
