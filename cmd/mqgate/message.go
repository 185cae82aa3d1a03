package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

const messageUsage = `Usage:
  mqgate message show ID_OR_KEY [--topic T] [--max N]

Finds stored messages whose message id or key is ID_OR_KEY, in every topic
(dead-letter topics and delayed messages not yet due included) or in --topic.

  --server HOST:PORT   the running mqgate's gRPC port (default 127.0.0.1:8081); for a
                       cluster, every member's separated by ';' (tried in order)
  --tls                use TLS (the certificate is not verified)
  --access-key AK      sign calls as AK when mqgate runs with --auth-file
                       (env MQGATE_ACCESS_KEY)
  --secret-key SK      the secret key of AK (prefer env MQGATE_SECRET_KEY:
                       flags show in the process list)
  --json               print JSON instead of text
  --timeout DURATION   give up after this long (default 10s)
`

type messageCommand struct {
	sub    string
	query  string
	topic  string
	max    int
	client clientFlags
}

func parseMessageArgs(args []string) (messageCommand, error) {
	var mc messageCommand
	if len(args) == 0 {
		return mc, usageErr("missing subcommand (show)")
	}
	mc.sub = args[0]
	switch mc.sub {
	case "show":
	case "help", "-h", "--help":
		return mc, flag.ErrHelp
	default:
		return mc, usageErr("unknown subcommand %q (want show)", mc.sub)
	}
	fs := newFlagSet("mqgate message show")
	mc.client.register(fs)
	fs.StringVar(&mc.topic, "topic", "", "")
	fs.IntVar(&mc.max, "max", 32, "")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return mc, err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		return mc, usageErr("message show needs exactly one message ID or key, got %d arguments", len(pos))
	}
	if mc.max < 1 || mc.max > 256 {
		return mc, usageErr("--max %d: want 1 to 256", mc.max)
	}
	mc.query = pos[0]
	return mc, nil
}

func messageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	mc, err := parseMessageArgs(args)
	if err != nil {
		return usageExit("message", messageUsage, err, stdout, stderr)
	}
	var notFound bool
	code := runClient(ctx, "message show", mc.client, stderr, func(ctx context.Context, a *adminConn) error {
		resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.LookupMessage,
			&adminv1.LookupMessageRequest{Topic: mc.topic, MessageId: mc.query, Key: mc.query, Max: int32(mc.max)})
		if err != nil {
			return err
		}
		if mc.client.json {
			if err := printJSON(stdout, resp); err != nil {
				return err
			}
		} else {
			printStoredMessages(stdout, resp.GetMessages())
		}
		notFound = len(resp.GetMessages()) == 0
		return nil
	})
	if code == exitOK && notFound {
		where := "any topic"
		if mc.topic != "" {
			where = "topic " + mc.topic
		}
		fmt.Fprintf(stderr, "mqgate message show: no message with id or key %q in %s (retention may have removed it)\n", mc.query, where)
		return exitFail
	}
	return code
}

// bodyPreview is how much of a body the text output shows.
const bodyPreview = 1024

func printStoredMessages(w io.Writer, ms []*adminv1.StoredMessage) {
	for i, m := range ms {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "message %s (%s)\n", m.GetMessageId(), m.GetState())
		tw := newTable(w)
		fmt.Fprintf(tw, "  topic:\t%s\n", m.GetTopic())
		fmt.Fprintf(tw, "  type:\t%s\n", m.GetType())
		if m.GetState() == "SCHEDULED" {
			fmt.Fprintf(tw, "  delivery time:\t%s (not in the topic yet)\n", formatTime(m.GetDeliveryTime()))
		} else {
			fmt.Fprintf(tw, "  queue / offset:\t%d / %d\n", m.GetQueueId(), m.GetQueueOffset())
			if m.GetDeliveryTime() != nil {
				fmt.Fprintf(tw, "  delivery time:\t%s\n", formatTime(m.GetDeliveryTime()))
			}
		}
		fmt.Fprintf(tw, "  stored:\t%s\n", formatTime(m.GetStoreTime()))
		fmt.Fprintf(tw, "  born:\t%s from %s\n", formatTime(m.GetBornTime()), orDash(m.GetBornHost()))
		if m.GetTag() != "" {
			fmt.Fprintf(tw, "  tag:\t%s\n", m.GetTag())
		}
		if len(m.GetKeys()) > 0 {
			fmt.Fprintf(tw, "  keys:\t%s\n", strings.Join(m.GetKeys(), " "))
		}
		if m.GetMessageGroup() != "" {
			fmt.Fprintf(tw, "  message group:\t%s\n", m.GetMessageGroup())
		}
		if len(m.GetProperties()) > 0 {
			keys := make([]string, 0, len(m.GetProperties()))
			for k := range m.GetProperties() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for i, k := range keys {
				label := ""
				if i == 0 {
					label = "  properties:"
				}
				fmt.Fprintf(tw, "%s\t%s=%s\n", label, k, m.GetProperties()[k])
			}
		}
		if m.GetReconsumeTimes() > 0 {
			fmt.Fprintf(tw, "  redeliveries:\t%d\n", m.GetReconsumeTimes())
		}
		if m.GetDlqOriginTopic() != "" {
			fmt.Fprintf(tw, "  dead letter of:\t%s (message %s)\n", m.GetDlqOriginTopic(), m.GetDlqOriginMessageId())
		}
		for i, g := range m.GetGroups() {
			label := ""
			if i == 0 {
				label = "  groups:"
			}
			fmt.Fprintf(tw, "%s\t%s\n", label, groupStateText(g))
		}
		_ = tw.Flush()
		body := m.GetBody()
		note := ""
		if len(body) > bodyPreview {
			body, note = body[:bodyPreview], fmt.Sprintf(" (first %d shown; --json has %d)", bodyPreview, len(m.GetBody()))
		}
		if m.GetBodyTruncated() && note == "" {
			note = fmt.Sprintf(" (first %d returned)", len(body))
		}
		if utf8.Valid(body) {
			fmt.Fprintf(w, "  body (%d bytes)%s:\n    %s\n", m.GetBodySize(), note, strings.ReplaceAll(string(body), "\n", "\n    "))
		} else {
			fmt.Fprintf(w, "  body (%d bytes, binary)%s: use --json for base64\n", m.GetBodySize(), note)
		}
	}
}

// groupStateText is one group's line of message show: "billing: in
// flight (attempt 2), invisible until 10:04:05".
func groupStateText(g *adminv1.MessageGroupState) string {
	text := map[string]string{
		"NOT_DELIVERED": "not delivered yet", "IN_FLIGHT": "in flight", "AWAITING_REDELIVERY": "awaiting redelivery",
		"HELD": "held behind its message group", "DONE": "acknowledged (or dead-lettered)",
		"CONSUMED": "consumed (committed offset past it)", "NOT_CONSUMED": "not consumed yet (committed offset)",
	}[g.GetState()]
	if text == "" {
		text = g.GetState()
	}
	out := g.GetGroup() + ": " + text
	if g.GetDeliveryAttempt() > 0 {
		out += fmt.Sprintf(" (attempt %d)", g.GetDeliveryAttempt())
	}
	if g.GetInvisibleUntil() != nil {
		out += ", invisible until " + formatTime(g.GetInvisibleUntil())
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
