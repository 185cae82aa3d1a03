package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// resetTarget is where `mqgate group reset-offset` moves the group: a
// position (--to), an offset (--to-offset, with --queue) or, when neither
// is set, a time (--to-time); queue >= 0 restricts it to one queue.
type resetTarget struct {
	topic    string
	position adminv1.ResetPosition
	time     time.Time
	offset   int64
	toOffset bool
	queue    int32 // -1: every queue
}

// minUnixMillis is 1973-03-03 in Unix milliseconds. A smaller --to-time
// is almost surely Unix seconds (those reach it only in the year 5138);
// taken as milliseconds it would be a date in 1970, which silently
// replays everything stored, so it is refused instead.
const minUnixMillis = 100_000_000_000

// parseResetTarget checks reset-offset's flags: --topic, exactly one of
// --to-time, --to and --to-offset, and --queue (-1: not given), which
// --to-offset needs.
func parseResetTarget(topic, toTime, to, toOffset string, queue int) (resetTarget, error) {
	r := resetTarget{topic: topic, queue: -1}
	if strings.TrimSpace(topic) == "" {
		return r, usageErr("group reset-offset needs --topic TOPIC")
	}
	if queue < -1 || queue > 1<<16 {
		return r, usageErr("--queue %d: want a queue id (0 or more)", queue)
	}
	r.queue = int32(queue)
	given := 0
	for _, f := range []string{toTime, to, toOffset} {
		if f != "" {
			given++
		}
	}
	switch {
	case given == 0:
		return r, usageErr("group reset-offset needs where to move the group: --to-time TIME, --to earliest|latest, or --queue N --to-offset OFFSET")
	case given > 1:
		return r, usageErr("--to-time, --to and --to-offset exclude each other: give one of them")
	case toOffset != "":
		off, err := strconv.ParseInt(toOffset, 10, 64)
		if err != nil || off < 0 {
			return r, usageErr("--to-offset %q: want a queue offset (0 or more)", toOffset)
		}
		if r.queue < 0 {
			return r, usageErr("--to-offset needs --queue N: an offset is a position in one queue")
		}
		r.offset, r.toOffset = off, true
	case to != "":
		switch strings.ToLower(to) {
		case "earliest":
			r.position = adminv1.ResetPosition_RESET_POSITION_EARLIEST
		case "latest":
			r.position = adminv1.ResetPosition_RESET_POSITION_LATEST
		default:
			return r, usageErr("--to %q: want earliest or latest (or --to-time TIME)", to)
		}
	default:
		t, err := parseResetTime(toTime)
		if err != nil {
			return r, err
		}
		r.time = t
	}
	return r, nil
}

// parseResetTime reads --to-time: RFC 3339 (fractional seconds allowed)
// or Unix milliseconds.
func parseResetTime(s string) (time.Time, error) {
	if strings.Trim(s, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, usageErr("--to-time %s: out of range for Unix milliseconds", s)
		}
		if ms < minUnixMillis {
			return time.Time{}, usageErr("--to-time %s: Unix milliseconds are expected, and that is %s (Unix seconds? append 000)",
				s, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		}
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usageErr("--to-time %q: want an RFC 3339 time (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00) or Unix milliseconds", s)
	}
	return t, nil
}

// request is the ResetOffset call for group.
func (r resetTarget) request(group string) *adminv1.ResetOffsetRequest {
	req := &adminv1.ResetOffsetRequest{Group: group, Topic: r.topic}
	switch {
	case r.toOffset:
		req.To = &adminv1.ResetOffsetRequest_Offset{Offset: r.offset}
	case r.position != adminv1.ResetPosition_RESET_POSITION_UNSPECIFIED:
		req.To = &adminv1.ResetOffsetRequest_Position{Position: r.position}
	default:
		req.To = &adminv1.ResetOffsetRequest_Time{Time: timestamppb.New(r.time)}
	}
	if r.queue >= 0 {
		q := r.queue
		req.QueueId = &q
	}
	return req
}

// resetOffset moves a group's position in a topic and prints each queue's
// move (`mqgate group reset-offset NAME --topic TOPIC ...`).
func resetOffset(ctx context.Context, a *adminConn, group string, r resetTarget, stdout io.Writer) error {
	resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.ResetOffset, r.request(group))
	if err != nil {
		return err
	}
	if a.flags.json {
		return printJSON(stdout, resp)
	}
	w := newTable(stdout)
	fmt.Fprintln(w, "QUEUE\tPREVIOUS\tOFFSET")
	for _, q := range resp.GetQueues() {
		fmt.Fprintf(w, "%d\t%d\t%d\n", q.GetQueueId(), q.GetPreviousOffset(), q.GetOffset())
	}
	return w.Flush()
}
