package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mqgate/mqgate/sdk"
)

const receiveUsage = `Usage:
  mqgate receive --group G --topic T [--max N] [--wait 5s] [--invisible 30s] [--tag EXPR | --sql EXPR] [--no-ack] [--follow]

Prints one JSON object per message (body as text, or body_base64 when it is
not UTF-8) and acknowledges it, unless --no-ack: then the message stays
invisible for --invisible and its receipt_handle can be given to 'mqgate ack'.

  --group G          consumer group (required)
  --topic T          topic (required)
  --max N            most messages per receive, 1 to 32 (default 32)
  --wait D           how long to wait for a message (default 5s)
  --invisible D      how long received messages stay invisible to the group
                     (10s to 12h, default 30s)
  --tag EXPR         tag filter: "*" (default) or "a||b"
  --sql EXPR         SQL92 filter over the messages' properties instead,
                     e.g. "a > 5 AND region = 'eu'" (TAGS is the tag)
  --no-ack           do not acknowledge (print receipt handles for 'mqgate ack')
  --follow           keep receiving until interrupted (Ctrl-C)

  --server HOST:PORT   the running mqgate's gRPC port (default 127.0.0.1:8081); for a
                       cluster, every member's separated by ';' (tried in order)
  --tls                use TLS (the certificate is not verified)
  --access-key AK      sign calls as AK when mqgate runs with --auth-file
                       (env MQGATE_ACCESS_KEY)
  --secret-key SK      the secret key of AK (prefer env MQGATE_SECRET_KEY:
                       flags show in the process list)
  --json               accepted for symmetry: the output is always JSON lines
  --timeout DURATION   deadline of connecting and of each acknowledgement (default 10s)
`

type receiveCommand struct {
	group, topic, tag string
	sql               string
	max               int
	wait, invisible   time.Duration
	noAck, follow     bool
	client            clientFlags
}

func parseReceiveArgs(args []string) (receiveCommand, error) {
	var rc receiveCommand
	fs := newFlagSet("mqgate receive")
	rc.client.register(fs)
	fs.StringVar(&rc.group, "group", "", "")
	fs.StringVar(&rc.topic, "topic", "", "")
	fs.StringVar(&rc.tag, "tag", "*", "")
	fs.StringVar(&rc.sql, "sql", "", "")
	fs.IntVar(&rc.max, "max", 32, "")
	fs.DurationVar(&rc.wait, "wait", 5*time.Second, "")
	fs.DurationVar(&rc.invisible, "invisible", 30*time.Second, "")
	fs.BoolVar(&rc.noAck, "no-ack", false, "")
	fs.BoolVar(&rc.follow, "follow", false, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return rc, err
	}
	switch {
	case len(pos) > 0:
		return rc, usageErr("receive takes no arguments, got %q", pos)
	case strings.TrimSpace(rc.group) == "":
		return rc, usageErr("--group (the consumer group) is required")
	case strings.TrimSpace(rc.topic) == "":
		return rc, usageErr("--topic is required")
	case rc.sql != "" && strings.TrimSpace(rc.tag) != "*" && strings.TrimSpace(rc.tag) != "":
		return rc, usageErr("give --tag or --sql, not both")
	case rc.max < 1 || rc.max > 32:
		return rc, usageErr("--max %d: want 1 to 32", rc.max)
	case rc.wait < 0:
		return rc, usageErr("--wait %s is negative", rc.wait)
	case rc.invisible < 10*time.Second || rc.invisible > 12*time.Hour:
		return rc, usageErr("--invisible %s: want 10s to 12h", rc.invisible)
	}
	return rc, nil
}

// receivedJSON is one printed message.
type receivedJSON struct {
	Topic           string            `json:"topic"`
	MessageID       string            `json:"message_id"`
	Body            *string           `json:"body,omitempty"`
	BodyBase64      string            `json:"body_base64,omitempty"`
	Tag             string            `json:"tag,omitempty"`
	Keys            []string          `json:"keys,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	MessageGroup    string            `json:"message_group,omitempty"`
	DeliveryAttempt int32             `json:"delivery_attempt"`
	QueueID         int32             `json:"queue_id"`
	QueueOffset     int64             `json:"queue_offset"`
	BornTime        string            `json:"born_time,omitempty"`
	StoreTime       string            `json:"store_time,omitempty"`
	DeliveryTime    string            `json:"delivery_time,omitempty"`
	DeadLetterTopic string            `json:"dead_letter_origin_topic,omitempty"`
	// ReceiptHandle is printed with --no-ack only (for `mqgate ack`).
	ReceiptHandle string `json:"receipt_handle,omitempty"`
}

func toReceivedJSON(m *sdk.ReceivedMessage, withHandle bool) receivedJSON {
	out := receivedJSON{Topic: m.Topic, MessageID: m.ID, Tag: m.Tag, Keys: m.Keys, Properties: m.Properties, MessageGroup: m.MessageGroup,
		DeliveryAttempt: m.DeliveryAttempt, QueueID: m.QueueID, QueueOffset: m.QueueOffset, DeadLetterTopic: m.DeadLetterTopic}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		out.Body = &s
	} else {
		out.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format(time.RFC3339Nano)
	}
	out.BornTime, out.StoreTime, out.DeliveryTime = ts(m.BornTime), ts(m.StoreTime), ts(m.DeliveryTime)
	if withHandle {
		out.ReceiptHandle = m.ReceiptHandle
	}
	return out
}

func receiveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rc, err := parseReceiveArgs(args)
	if err != nil {
		return usageExit("receive", receiveUsage, err, stdout, stderr)
	}
	w := what{topic: rc.topic, group: rc.group}
	c, err := dialSDK(ctx, rc.client)
	if err != nil {
		return sdkFail(stderr, "receive", err, rc.client, w)
	}
	defer closeSDK(c, "receive", stderr)
	sctx, cancel := context.WithTimeout(ctx, rc.client.timeout)
	await := rc.wait
	if await == 0 {
		await = time.Millisecond // the SDK's 0 means its default
	}
	cfg := sdk.ConsumerConfig{Group: rc.group, Subscriptions: map[string]string{rc.topic: rc.tag}, Await: await}
	if rc.sql != "" {
		cfg.Subscriptions, cfg.SQLSubscriptions = nil, map[string]string{rc.topic: rc.sql}
	}
	cons, err := c.NewSimpleConsumer(sctx, cfg)
	cancel()
	if err != nil {
		return sdkFail(stderr, "receive", err, rc.client, w)
	}
	if !rc.follow {
		n, err := rc.once(ctx, cons, stdout, stderr)
		if err != nil {
			return sdkFail(stderr, "receive", err, rc.client, w)
		}
		if n == 0 {
			fmt.Fprintf(stderr, "mqgate receive: no message for group %s in topic %s within %s\n", rc.group, rc.topic, rc.wait)
		}
		return exitOK
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	progress := startRate(stderr, "received")
	defer progress.finish()
	for ctx.Err() == nil {
		n, err := rc.once(ctx, cons, stdout, stderr)
		progress.add(n)
		if err != nil && ctx.Err() == nil {
			progress.finish()
			return sdkFail(stderr, "receive", err, rc.client, w)
		}
	}
	return exitOK
}

// once receives one batch, prints it and acks it (unless --no-ack).
func (rc *receiveCommand) once(ctx context.Context, cons *sdk.SimpleConsumer, stdout, stderr io.Writer) (int, error) {
	msgs, err := cons.Receive(ctx, rc.max, rc.invisible)
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, m := range msgs {
		// Printed first, then acked: a crash in between redelivers the
		// message (at least once) instead of losing it.
		if err := enc.Encode(toReceivedJSON(m, rc.noAck)); err != nil {
			return len(msgs), err
		}
		if rc.noAck {
			continue
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.client.timeout)
		err := cons.Ack(actx, m)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "mqgate receive: ack of %s failed, it will be redelivered after %s: %s\n", m.ID, rc.invisible, explainSDK(err, rc.client, what{topic: rc.topic, group: rc.group}))
		}
	}
	return len(msgs), nil
}

const ackUsage = `Usage:
  mqgate ack --group G --topic T HANDLE...

Acknowledges messages received with 'mqgate receive --no-ack' by their
receipt_handle. A handle is refused once its invisible time has passed (the
message is then redelivered with a new handle), once acked, or when
superseded.

  --server HOST:PORT   the running mqgate's gRPC port (default 127.0.0.1:8081); for a
                       cluster, every member's separated by ';' (tried in order)
  --tls                use TLS (the certificate is not verified)
  --access-key AK      sign calls as AK when mqgate runs with --auth-file
                       (env MQGATE_ACCESS_KEY)
  --secret-key SK      the secret key of AK (prefer env MQGATE_SECRET_KEY:
                       flags show in the process list)
  --json               print one JSON object per handle
  --timeout DURATION   give up after this long (default 10s)
`

type ackCommand struct {
	group, topic string
	handles      []string
	client       clientFlags
}

func parseAckArgs(args []string) (ackCommand, error) {
	var ac ackCommand
	fs := newFlagSet("mqgate ack")
	ac.client.register(fs)
	fs.StringVar(&ac.group, "group", "", "")
	fs.StringVar(&ac.topic, "topic", "", "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return ac, err
	}
	switch {
	case strings.TrimSpace(ac.group) == "":
		return ac, usageErr("--group (the consumer group) is required")
	case strings.TrimSpace(ac.topic) == "":
		return ac, usageErr("--topic is required")
	case len(pos) == 0:
		return ac, usageErr("give at least one receipt HANDLE (the receipt_handle printed by 'mqgate receive --no-ack')")
	}
	ac.handles = pos
	return ac, nil
}

type ackJSON struct {
	Handle string `json:"receipt_handle"`
	Acked  bool   `json:"acked"`
	Error  string `json:"error,omitempty"`
}

func ackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ac, err := parseAckArgs(args)
	if err != nil {
		return usageExit("ack", ackUsage, err, stdout, stderr)
	}
	w := what{topic: ac.topic, group: ac.group}
	c, err := dialSDK(ctx, ac.client)
	if err != nil {
		return sdkFail(stderr, "ack", err, ac.client, w)
	}
	defer closeSDK(c, "ack", stderr)
	ctx, cancel := context.WithTimeout(ctx, ac.client.timeout)
	defer cancel()
	cons, err := c.NewSimpleConsumer(ctx, sdk.ConsumerConfig{Group: ac.group, Subscriptions: map[string]string{ac.topic: "*"}})
	if err != nil {
		return sdkFail(stderr, "ack", err, ac.client, w)
	}
	errs, err := cons.AckHandles(ctx, ac.topic, ac.handles...)
	if err != nil {
		return sdkFail(stderr, "ack", err, ac.client, w)
	}
	failed := 0
	var hints []string
	for i, e := range errs {
		if ac.client.json {
			j := ackJSON{Handle: ac.handles[i], Acked: e == nil}
			if e != nil {
				j.Error = explainSDK(e, ac.client, w)
			}
			b, _ := json.Marshal(j)
			fmt.Fprintf(stdout, "%s\n", b)
		}
		if e != nil {
			failed++
			fmt.Fprintf(stderr, "mqgate ack: handle %d (%s): %s\n", i+1, abbrev(ac.handles[i]), explainSDK(e, ac.client, w))
			if h := ackHint(statusMessage(e), ac); !slices.Contains(hints, h) {
				hints = append(hints, h)
			}
		}
	}
	if !ac.client.json {
		fmt.Fprintf(stdout, "acked %d of %d messages\n", len(errs)-failed, len(errs))
	}
	if failed > 0 {
		for _, h := range hints {
			fmt.Fprintln(stderr, "mqgate ack: "+h)
		}
		return exitFail
	}
	return exitOK
}

// ackHint says what to do about a handle the server refused with msg:
// one that is no handle of this server's, one received for another group
// or topic, or one whose delivery is over.
func ackHint(msg string, ac ackCommand) string {
	for _, malformed := range []string{"receipt handle is empty", "was not issued by mqgate", "has the wrong length",
		"is not valid base64url", "has unknown version", "failed authentication", "belongs to another store"} {
		if strings.Contains(msg, malformed) {
			return "a handle is the whole receipt_handle that 'mqgate receive --no-ack' printed, from this server: a refused one was not such a handle (cut short, mistyped, or from another server or data directory)"
		}
	}
	if strings.Contains(msg, "another consumer group or topic") || strings.Contains(msg, "issued to another group or topic") {
		return fmt.Sprintf("a refused handle was received by another group or from another topic than --group %s --topic %s: ack it with those it was received with", ac.group, ac.topic)
	}
	return "a refused handle was expired, already acked or superseded; its message is (or will be) redelivered with a new handle"
}

func abbrev(s string) string {
	if len(s) <= 24 {
		return s
	}
	return s[:20] + "…"
}
