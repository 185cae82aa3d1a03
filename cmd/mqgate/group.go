package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

const groupUsage = `Usage:
  mqgate group create NAME [--fifo] [--max-delivery-attempts N] [--retry customized|exponential]
  mqgate group list
  mqgate group describe NAME
  mqgate group delete NAME
  mqgate group reset-offset NAME --topic TOPIC [--queue N] (--to-time TIME | --to earliest|latest | --to-offset OFFSET)
  mqgate group dead-letters NAME [--max N]
  mqgate group redrive NAME [--max N]

reset-offset moves the group's position in TOPIC on every queue, or only
on queue N: --to-time to the first message stored at or after TIME
(RFC 3339, e.g. 2026-12-01T10:00:00Z, or Unix milliseconds), --to earliest
to the oldest message still stored (replay), --to latest to the end (skip
the backlog), --to-offset (with --queue) to that offset of the queue (skip
a message that cannot be consumed, or replay from one). Messages the
group has in flight in the queues moved are dropped. Connected classic
(remoting) consumers of the group are sent the new offsets.

dead-letters lists the group's pending dead letters (messages that used up
their delivery attempts, in %DLQ%NAME), oldest first (--max, default 32, at
most 256). redrive sends them back to the topics they were consumed from,
as new messages with their id, keys, tag, properties and body and a fresh
delivery count: every pending one, or the oldest --max.

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

// groupCommand is a parsed `mqgate group ...` command line.
type groupCommand struct {
	sub         string
	name        string
	fifo        bool
	maxAttempts int32
	retry       string      // "", "customized" or "exponential"
	reset       resetTarget // reset-offset
	max         int         // dead-letters, redrive (0: the default)
	client      clientFlags
}

func parseGroupArgs(args []string) (groupCommand, error) {
	var gc groupCommand
	if len(args) == 0 {
		return gc, usageErr("missing subcommand (create, list, describe, delete, reset-offset, dead-letters or redrive)")
	}
	gc.sub = args[0]
	fs := newFlagSet("mqgate group " + gc.sub)
	gc.client.register(fs)
	var attempts int
	var topic, toTime, to, toOffset string // reset-offset
	var queue int
	switch gc.sub {
	case "create":
		fs.BoolVar(&gc.fifo, "fifo", false, "deliver each message group in order, one message at a time")
		fs.IntVar(&attempts, "max-delivery-attempts", 0, "deliveries before a message goes to %DLQ%<group> (0: the server default, 17)")
		fs.StringVar(&gc.retry, "retry", "", "redelivery backoff: customized (1s 5s 10s 30s 1m … 2h, the default) or exponential (5s doubling to 2h)")
	case "reset-offset":
		fs.StringVar(&topic, "topic", "", "the topic whose position to move")
		fs.StringVar(&toTime, "to-time", "", "move to the first message stored at or after this time (RFC 3339 or Unix milliseconds)")
		fs.StringVar(&to, "to", "", "earliest (replay what is stored) or latest (skip the backlog)")
		fs.StringVar(&toOffset, "to-offset", "", "move queue --queue to this offset")
		fs.IntVar(&queue, "queue", -1, "move only this queue (required with --to-offset)")
	case "dead-letters":
		fs.IntVar(&gc.max, "max", 0, "list at most this many (default 32, at most 256)")
	case "redrive":
		fs.IntVar(&gc.max, "max", 0, "redrive at most this many, oldest first (default: every pending one)")
	case "list", "describe", "delete":
	case "help", "-h", "--help":
		return gc, flag.ErrHelp
	default:
		return gc, usageErr("unknown subcommand %q (want create, list, describe, delete, reset-offset, dead-letters or redrive)", gc.sub)
	}
	name, err := resourceName(fs, args[1:], "group", gc.sub)
	if err != nil {
		return gc, err
	}
	gc.name = name
	if gc.sub == "create" {
		if attempts < 0 || attempts > 1<<20 {
			return gc, usageErr("--max-delivery-attempts %d: want a positive number (or 0 for the server default)", attempts)
		}
		gc.maxAttempts = int32(attempts)
		gc.retry = strings.ToLower(gc.retry)
		switch gc.retry {
		case "", "customized", "exponential":
		default:
			return gc, usageErr("--retry %q: want customized or exponential", gc.retry)
		}
	}
	if gc.sub == "dead-letters" && (gc.max < 0 || gc.max > maxDeadLetters) {
		return gc, usageErr("--max %d: want 1 to %d", gc.max, maxDeadLetters)
	}
	if gc.sub == "redrive" && gc.max < 0 {
		return gc, usageErr("--max %d: want a positive number", gc.max)
	}
	if gc.sub == "reset-offset" {
		if gc.reset, err = parseResetTarget(topic, toTime, to, toOffset, queue); err != nil {
			return gc, err
		}
	}
	return gc, nil
}

func groupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	gc, err := parseGroupArgs(args)
	if err != nil {
		return usageExit("group", groupUsage, err, stdout, stderr)
	}
	return runClient(ctx, "group "+gc.sub, gc.client, stderr, func(ctx context.Context, a *adminConn) error {
		switch gc.sub {
		case "create":
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.CreateGroup, &adminv1.CreateGroupRequest{Name: gc.name, Fifo: gc.fifo,
				MaxDeliveryAttempts: gc.maxAttempts, RetryPolicy: gc.retry})
			if err != nil {
				return err
			}
			if gc.client.json {
				return printJSON(stdout, resp.GetGroup())
			}
			g := resp.GetGroup()
			fmt.Fprintf(stdout, "created group %s (fifo %t, max delivery attempts %d, retry %s)\n",
				g.GetName(), g.GetFifo(), g.GetMaxDeliveryAttempts(), g.GetRetryPolicy())
		case "list":
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ListGroups, &adminv1.ListGroupsRequest{})
			if err != nil {
				return err
			}
			if gc.client.json {
				return printJSON(stdout, resp)
			}
			printGroups(stdout, resp.GetGroups())
		case "describe":
			return describeGroup(ctx, a, gc.name, stdout) // describe.go: progress per topic, DLQ size
		case "delete":
			_, err := callAdmin(ctx, a, adminv1.AdminServiceClient.DeleteGroup, &adminv1.DeleteGroupRequest{Name: gc.name})
			if err != nil {
				return err
			}
			if gc.client.json {
				return printJSON(stdout, &adminv1.DeleteGroupResponse{})
			}
			fmt.Fprintf(stdout, "deleted group %s\n", gc.name)
		case "reset-offset":
			return resetOffset(ctx, a, gc.name, gc.reset, stdout) // resetoffset.go: one line per queue
		case "dead-letters":
			resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ListDeadLetters, &adminv1.ListDeadLettersRequest{Group: gc.name, Max: int32(gc.max)})
			if err != nil {
				return err
			}
			if gc.client.json {
				return printJSON(stdout, resp)
			}
			fmt.Fprintf(stdout, "%d pending in %s\n", resp.GetPending(), resp.GetTopic())
			if len(resp.GetMessages()) > 0 {
				printStoredMessages(stdout, resp.GetMessages())
			}
		case "redrive":
			return redrive(ctx, a, gc.name, gc.max, gc.client.json, stdout)
		}
		return nil
	})
}

func printGroups(w io.Writer, gs []*adminv1.Group) {
	if len(gs) == 0 {
		fmt.Fprintln(w, "no groups")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tFIFO\tMAX ATTEMPTS\tRETRY\tCREATED")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%t\t%d\t%s\t%s\n", g.GetName(), g.GetFifo(), g.GetMaxDeliveryAttempts(), g.GetRetryPolicy(), formatTime(g.GetCreateTime()))
	}
	_ = tw.Flush()
}

// maxDeadLetters is the most dead letters one ListDeadLetters or
// RedriveDeadLetters call handles.
const maxDeadLetters = 256

// redrive sends the group's pending dead letters back to their topics,
// at most max of them (0: all), in calls of at most maxDeadLetters. It
// stops when none is pending, or when a call redrives nothing (a failed
// send answers its error).
func redrive(ctx context.Context, a *adminConn, group string, max int, asJSON bool, stdout io.Writer) error {
	out := &adminv1.RedriveDeadLettersResponse{}
	for {
		n := maxDeadLetters
		if max > 0 {
			n = min(n, max-len(out.Redriven))
		}
		resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.RedriveDeadLetters, &adminv1.RedriveDeadLettersRequest{Group: group, Max: int32(n)})
		if err != nil {
			if len(out.Redriven) > 0 {
				return fmt.Errorf("after redriving %d dead letters: %w", len(out.Redriven), err)
			}
			return err
		}
		if max == 0 {
			// What was pending at the start, so that dead letters that
			// fail again meanwhile do not keep the loop going.
			max = len(resp.GetRedriven()) + int(resp.GetPending())
		}
		out.Redriven = append(out.Redriven, resp.GetRedriven()...)
		out.Pending = resp.GetPending()
		if out.Pending == 0 || len(resp.GetRedriven()) == 0 || (max > 0 && len(out.Redriven) >= max) {
			break
		}
	}
	if asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "redrove %d dead letters of group %s, %d still pending\n", len(out.Redriven), group, out.Pending)
	if len(out.Redriven) > 0 {
		tw := newTable(stdout)
		fmt.Fprintln(tw, "MESSAGE ID\tTOPIC\tQUEUE\tOFFSET")
		for _, m := range out.Redriven {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", m.GetMessageId(), m.GetTopic(), m.GetQueueId(), m.GetQueueOffset())
		}
		_ = tw.Flush()
	}
	return nil
}
