package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/sdk"
)

// The message commands (send, receive, ack) talk to the server through
// mqgate's own SDK; the inspection commands (describe, message show) use
// the admin API (adminclient.go).

// dialSDK connects the SDK within c.timeout.
func dialSDK(ctx context.Context, c clientFlags) (*sdk.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var opts []sdk.Option
	if c.tls {
		opts = append(opts, sdk.WithTLS())
	}
	if c.signed() {
		opts = append(opts, sdk.WithCredentials(c.accessKey, c.secretKey))
	}
	return sdk.Dial(ctx, c.server, opts...)
}

// closeSDK closes the client within a few seconds, reporting what did not
// finish.
func closeSDK(c *sdk.Client, name string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		fmt.Fprintf(stderr, "mqgate %s: %v\n", name, err)
	}
}

// what names a topic or group for hints.
type what struct{ topic, group string }

// explainSDK turns an SDK error into one line that says what happened and
// what to do next.
func explainSDK(err error, c clientFlags, w what) string {
	var se *sdk.StatusError
	switch {
	case errors.Is(err, sdk.ErrUnavailable):
		msg := err.Error()
		switch {
		case strings.Contains(msg, "connection refused"):
			return fmt.Sprintf("nothing is listening at %s (connection refused): is `mqgate serve` running at that address? (set --server HOST:PORT)", c.server)
		case strings.Contains(msg, "draining"):
			return fmt.Sprintf("mqgate at %s is shutting down; nothing was stored by this call: retry against a running instance", c.server)
		case !unreachable(msg):
			return fmt.Sprintf("mqgate at %s is running but cannot serve this now: %v", c.server, err)
		}
		return fmt.Sprintf("cannot reach mqgate at %s (%v): is `mqgate serve` running at that address?", c.server, err)
	case errors.Is(err, sdk.ErrTopicNotFound):
		return fmt.Sprintf("topic %q does not exist: create it with `mqgate topic create %s` (or start the server with --auto-create, as `make run` does)", w.topic, w.topic)
	case errors.Is(err, sdk.ErrGroupNotFound):
		return fmt.Sprintf("consumer group %q does not exist: create it with `mqgate group create %s` (or start the server with --auto-create)", w.group, w.group)
	case errors.Is(err, sdk.ErrMessageTypeConflict):
		return fmt.Sprintf("%s: a message with --group needs a FIFO topic and one with --delay a DELAY topic (see `mqgate topic describe %s`; create one with `mqgate topic create NAME --type FIFO|DELAY|MIXED`)", statusMessage(err), w.topic)
	case errors.Is(err, sdk.ErrOutcomeUnknown):
		var sendErr *sdk.SendError
		id := ""
		if errors.As(err, &sendErr) && len(sendErr.MessageIDs) > 0 {
			id = " " + sendErr.MessageIDs[0]
		}
		if errors.As(err, &se) {
			// The server answered, with an error that does not promise
			// nothing was stored unless its message says so.
			if strings.Contains(se.Message, "nothing was stored") {
				return fmt.Sprintf("mqgate at %s refused the message: %s (%s)", c.server, se.Message, se.Code)
			}
			return fmt.Sprintf("mqgate at %s answered %s (%s): the message may have been stored: check with `mqgate message show%s` before sending it again", c.server, se.Message, se.Code, id)
		}
		return fmt.Sprintf("no answer from %s, the message may have been stored (%v): check with `mqgate message show%s` before sending it again", c.server, cause(err), id)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer from %s within %s: is `mqgate serve` running at that address? (raise --timeout for a slow server)", c.server, c.timeout)
	case errors.As(err, &se):
		return fmt.Sprintf("%s (%s)", se.Message, se.Code)
	}
	return err.Error()
}

// unreachable reports whether an UNAVAILABLE error's text is grpc-go's
// own, for a connection that could not be made or was lost, rather than
// a status the server answered (a store that cannot write, a member that
// lost its quorum).
func unreachable(msg string) bool {
	for _, s := range []string{"connection error", "transport", "error reading from server", "connection closed",
		"name resolver", "produced zero addresses", "no such host", "not connected before the deadline"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// sdkFail prints "mqgate <name>: <explanation of err>" and returns the
// failure exit status.
func sdkFail(stderr io.Writer, name string, err error, c clientFlags, w what) int {
	fmt.Fprintf(stderr, "mqgate %s: %s\n", name, explainSDK(err, c, w))
	return exitFail
}

func statusMessage(err error) string {
	var se *sdk.StatusError
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

// cause is a SendError's cause, or err.
func cause(err error) error {
	var se *sdk.SendError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// propertyList is a repeatable k=v flag.
type propertyList map[string]string

func (p propertyList) String() string {
	var parts []string
	for k, v := range p {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (p propertyList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	p[k] = val
	return nil
}

// interruptible returns ctx cancelled by the first SIGINT or SIGTERM, for
// the commands that run until stopped (receive --follow, send -).
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// rate prints "<verb> N messages (R/s)" to a terminal every second while
// a long command runs; on anything but a terminal it prints nothing.
type rate struct {
	w    io.Writer
	verb string

	mu       sync.Mutex
	n, lastN int64
	last     time.Time
	printed  bool
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startRate(w io.Writer, verb string) *rate {
	return newRate(w, verb, isTerminal(w))
}

func newRate(w io.Writer, verb string, enabled bool) *rate {
	r := &rate{w: w, verb: verb, last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if !enabled {
		close(r.done)
		return r
	}
	go func() {
		defer close(r.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case now := <-t.C:
				r.print(now)
			}
		}
	}()
	return r
}

func (r *rate) add(n int) {
	r.mu.Lock()
	r.n += int64(n)
	r.mu.Unlock()
}

// line is the progress line at now (and resets the interval).
func (r *rate) line(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	secs := now.Sub(r.last).Seconds()
	per := 0.0
	if secs > 0 {
		per = float64(r.n-r.lastN) / secs
	}
	r.lastN, r.last = r.n, now
	return fmt.Sprintf("%s %d messages (%.0f/s)", r.verb, r.n, per)
}

func (r *rate) print(now time.Time) {
	l := r.line(now)
	fmt.Fprintf(r.w, "\r\033[K%s", l)
	r.mu.Lock()
	r.printed = true
	r.mu.Unlock()
}

// finish stops the ticker and ends the progress line (once: later calls
// do nothing).
func (r *rate) finish() {
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		printed := r.printed
		r.mu.Unlock()
		if printed {
			fmt.Fprintln(r.w)
		}
	})
}
