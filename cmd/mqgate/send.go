package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mqgate/mqgate/sdk"
)

const sendUsage = `Usage:
  mqgate send --topic T [--tag TAG] [--key K]... [--property K=V]... [--group G] [--delay 30s] BODY
  mqgate send --topic T [...] -          one message per line of standard input

  --topic T          topic to send to (required)
  --tag TAG          tag consumers can filter on
  --key K            message key, for 'mqgate message show K' (repeatable)
  --property K=V     user property (repeatable)
  --group G          message group: FIFO order within G (the topic must be FIFO or MIXED)
  --delay D          deliver after D, e.g. 30s or 5m (the topic must be DELAY or MIXED)

  --server HOST:PORT   the running mqgate's gRPC port (default 127.0.0.1:8081); for a
                       cluster, every member's separated by ';' (tried in order)
  --tls                use TLS (the certificate is not verified)
  --access-key AK      sign calls as AK when mqgate runs with --auth-file
                       (env MQGATE_ACCESS_KEY)
  --secret-key SK      the secret key of AK (prefer env MQGATE_SECRET_KEY:
                       flags show in the process list)
  --json               print one JSON object per sent message
  --timeout DURATION   deadline of connecting and of each send (default 10s)
`

type sendCommand struct {
	topic, tag, group string
	keys              stringList
	props             propertyList
	delay             time.Duration
	body              string
	stdin             bool
	client            clientFlags
}

func parseSendArgs(args []string) (sendCommand, error) {
	sc := sendCommand{props: propertyList{}}
	fs := newFlagSet("mqgate send")
	sc.client.register(fs)
	fs.StringVar(&sc.topic, "topic", "", "")
	fs.StringVar(&sc.tag, "tag", "", "")
	fs.Var(&sc.keys, "key", "")
	fs.Var(sc.props, "property", "")
	fs.StringVar(&sc.group, "group", "", "")
	fs.DurationVar(&sc.delay, "delay", 0, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return sc, err
	}
	switch {
	case strings.TrimSpace(sc.topic) == "":
		return sc, usageErr("--topic is required")
	case len(pos) == 0:
		return sc, usageErr("give the message BODY, or - to send each line of standard input")
	case len(pos) > 1:
		return sc, usageErr("one BODY per command (quote it, or use - to send lines from standard input), got %d arguments", len(pos))
	case sc.delay < 0:
		return sc, usageErr("--delay %s is negative", sc.delay)
	}
	if pos[0] == "-" {
		sc.stdin = true
	} else {
		sc.body = pos[0]
		if sc.body == "" {
			return sc, usageErr("the BODY is empty (mqgate refuses empty messages)")
		}
	}
	return sc, nil
}

func sendCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sc, err := parseSendArgs(args)
	if err != nil {
		return usageExit("send", sendUsage, err, stdout, stderr)
	}
	w := what{topic: sc.topic}
	c, err := dialSDK(ctx, sc.client)
	if err != nil {
		return sdkFail(stderr, "send", err, sc.client, w)
	}
	defer closeSDK(c, "send", stderr)
	pctx, cancel := context.WithTimeout(ctx, sc.client.timeout)
	p, err := c.NewProducer(pctx, sdk.ProducerConfig{Topics: []string{sc.topic}, Timeout: sc.client.timeout})
	cancel()
	if err != nil {
		return sdkFail(stderr, "send", err, sc.client, w)
	}
	if !sc.stdin {
		m := sc.message(sc.body)
		r, err := p.Send(ctx, m)
		if err != nil {
			return sdkFail(stderr, "send", err, sc.client, w)
		}
		sc.printReceipt(stdout, r, m)
		return exitOK
	}
	return sc.sendLines(ctx, p, stdin, stdout, stderr)
}

func (sc *sendCommand) message(body string) *sdk.Message {
	m := &sdk.Message{Topic: sc.topic, Body: []byte(body), Tag: sc.tag, Keys: sc.keys, Properties: sc.props, MessageGroup: sc.group}
	if len(sc.props) == 0 {
		m.Properties = nil
	}
	if sc.delay > 0 {
		m.DeliveryTime = time.Now().Add(sc.delay)
	}
	return m
}

type sendJSON struct {
	MessageID    string `json:"message_id"`
	Topic        string `json:"topic"`
	Offset       int64  `json:"offset"`
	DeliveryTime string `json:"delivery_time,omitempty"`
	RecallHandle string `json:"recall_handle,omitempty"`
}

func (sc *sendCommand) printReceipt(w io.Writer, r sdk.SendReceipt, m *sdk.Message) {
	var due string
	if !m.DeliveryTime.IsZero() {
		due = m.DeliveryTime.Local().Format(time.RFC3339)
	}
	if sc.client.json {
		b, _ := json.Marshal(sendJSON{MessageID: r.MessageID, Topic: sc.topic, Offset: r.Offset, DeliveryTime: due, RecallHandle: r.RecallHandle})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	if due != "" {
		fmt.Fprintf(w, "sent message %s to %s, delivered at %s\n", r.MessageID, sc.topic, due)
		return
	}
	fmt.Fprintf(w, "sent message %s to %s (queue offset %d)\n", r.MessageID, sc.topic, r.Offset)
}

// sendLines sends each non-empty line of in as one message, in order,
// stopping at the first failure.
func (sc *sendCommand) sendLines(ctx context.Context, p *sdk.Producer, in io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := interruptible(ctx)
	defer stop()
	progress := startRate(stderr, "sent")
	sent, skipped, line := 0, 0, 0
	rd := bufio.NewReaderSize(in, 1<<16)
	for {
		text, rerr := rd.ReadString('\n')
		if text != "" || rerr == nil {
			line++
			body := strings.TrimRight(text, "\r\n")
			if body == "" {
				skipped++
			} else {
				m := sc.message(body)
				r, err := p.Send(ctx, m)
				if err != nil {
					progress.finish()
					if ctx.Err() != nil && errors.Is(err, context.Canceled) {
						fmt.Fprintf(stderr, "mqgate send: interrupted at line %d; %d messages sent\n", line, sent)
						return exitFail
					}
					fmt.Fprintf(stderr, "mqgate send: line %d: %s\n", line, explainSDK(err, sc.client, what{topic: sc.topic}))
					fmt.Fprintf(stderr, "mqgate send: stopped; %d messages sent before line %d\n", sent, line)
					return exitFail
				}
				sent++
				progress.add(1)
				if sc.client.json {
					sc.printReceipt(stdout, r, m)
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			progress.finish()
			fmt.Fprintf(stderr, "mqgate send: reading standard input: %v; %d messages sent\n", rerr, sent)
			return exitFail
		}
	}
	progress.finish()
	if !sc.client.json {
		fmt.Fprintf(stdout, "sent %d messages to %s", sent, sc.topic)
		if skipped > 0 {
			fmt.Fprintf(stdout, " (%d empty lines skipped)", skipped)
		}
		fmt.Fprintln(stdout)
	}
	return exitOK
}
