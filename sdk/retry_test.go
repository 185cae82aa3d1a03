package sdk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// fakeProducer starts a fake server and a producer of a client dialing it
// with opts.
func fakeProducer(t *testing.T, f *fakeServer, cfg ProducerConfig, opts ...Option) (*Client, *Producer) {
	t.Helper()
	c := dialFake(t, startFake(t, f), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.NewProducer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

// stall blocks the handler until the client gives up.
func stall(ctx context.Context) (*v2.SendMessageResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A send whose server stalls returns by its deadline with an "unknown
// outcome" error, after exactly one attempt.
func TestSendStallReturnsAtDeadlineWithUnknownOutcome(t *testing.T) {
	f := &fakeServer{send: func(ctx context.Context, n int, _ *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		return stall(ctx)
	}}
	_, p := fakeProducer(t, f, ProducerConfig{})
	const budget = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	late := time.Since(deadline)
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown and DeadlineExceeded", err)
	}
	var se *SendError
	if !errors.As(err, &se) || !se.MayBeStored() || se.Attempts != 1 || len(se.MessageIDs) != 1 {
		t.Fatalf("SendError %+v", se)
	}
	// grpc ends the call at the deadline; allow scheduling slack on a busy
	// 2-core machine, nothing like a second budget.
	if late > budget/2 {
		t.Fatalf("Send returned %v after its deadline", late)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 1 {
		t.Fatalf("%d attempts, want 1 (no attempt after an unknown outcome)", len(f.attempts))
	}
	if a := f.attempts[0]; !a.hasDeadline || a.deadline.Sub(deadline).Abs() > 50*time.Millisecond {
		t.Fatalf("attempt deadline %v (set %v), want the send's deadline %v", a.deadline, a.hasDeadline, deadline)
	}
}

// After a TOO_MANY_REQUESTS the retry runs with what remains of the ONE
// deadline (not a fresh budget) and the same message id; when it stalls
// the send ends at that deadline and makes no third attempt.
func TestRetrySharesTheDeadlineAndMessageID(t *testing.T) {
	f := &fakeServer{send: func(ctx context.Context, n int, _ *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		if n == 1 {
			return statusOnly(v2.Code_TOO_MANY_REQUESTS), nil
		}
		return stall(ctx)
	}}
	_, p := fakeProducer(t, f, ProducerConfig{MaxAttempts: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if late := time.Since(deadline); late > 200*time.Millisecond {
		t.Fatalf("returned %v after the deadline", late)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(f.attempts))
	}
	a1, a2 := f.attempts[0], f.attempts[1]
	if a1.ids[0] != a2.ids[0] || a1.ids[0] == "" {
		t.Fatalf("message ids %q then %q, want the same", a1.ids, a2.ids)
	}
	for i, a := range f.attempts {
		if !a.hasDeadline || a.deadline.Sub(deadline).Abs() > 50*time.Millisecond {
			t.Fatalf("attempt %d deadline %v, want the send's %v (one budget for all attempts)", i+1, a.deadline, deadline)
		}
	}
	// Headers are set afresh per attempt, never accumulated.
	if n := len(a2.md.Get("x-mq-client-id")); n != 1 {
		t.Fatalf("attempt 2 carries %d x-mq-client-id headers", n)
	}
}

// The server's own UNAVAILABLE ("nothing happened", e.g. draining) is
// retried with the same id and the send succeeds.
func TestServerUnavailableIsRetried(t *testing.T) {
	f := &fakeServer{send: func(ctx context.Context, n int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		if n == 1 {
			return nil, status.Error(codes.Unavailable, "mqgate is draining")
		}
		return okSend(req), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{})
	r, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x"), ID: "fixed-id"})
	if err != nil || r.MessageID != "fixed-id" {
		t.Fatalf("send: %+v %v", r, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 2 || f.attempts[1].ids[0] != "fixed-id" {
		t.Fatalf("attempts %+v", f.attempts)
	}
}

// Refusals and internal errors are never retried; each says whether the
// message may have been stored.
func TestOutcomeOfEachAnswer(t *testing.T) {
	cases := []struct {
		name   string
		answer func() (*v2.SendMessageResponse, error)
		want   error
	}{
		{"validation refusal", func() (*v2.SendMessageResponse, error) { return statusOnly(v2.Code_MESSAGE_BODY_TOO_LARGE), nil }, ErrNotStored},
		{"topic not found", func() (*v2.SendMessageResponse, error) { return statusOnly(v2.Code_TOPIC_NOT_FOUND), nil }, ErrTopicNotFound},
		{"internal error", func() (*v2.SendMessageResponse, error) { return statusOnly(v2.Code_INTERNAL_SERVER_ERROR), nil }, ErrOutcomeUnknown},
		{"grpc internal after send", func() (*v2.SendMessageResponse, error) { return nil, status.Error(codes.Internal, "boom") }, ErrOutcomeUnknown},
		{"grpc invalid argument", func() (*v2.SendMessageResponse, error) { return nil, status.Error(codes.InvalidArgument, "no") }, ErrNotStored},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeServer{send: func(context.Context, int, *v2.SendMessageRequest) (*v2.SendMessageResponse, error) { return c.answer() }}
			_, p := fakeProducer(t, f, ProducerConfig{})
			_, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.attempts) != 1 {
				t.Fatalf("%d attempts, want 1", len(f.attempts))
			}
		})
	}
}

// A persistence timeout means stored, not yet durable: no retry (it would
// duplicate), the receipt is returned with ErrNotDurable.
func TestPersistenceTimeoutIsStoredNotDurable(t *testing.T) {
	f := &fakeServer{send: func(_ context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		resp := okSend(req)
		st := &v2.Status{Code: v2.Code_MASTER_PERSISTENCE_TIMEOUT, Message: "flush timeout"}
		resp.Status, resp.Entries[0].Status = st, st
		return resp, nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{})
	r, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
	var se *SendError
	if !errors.Is(err, ErrNotDurable) || !errors.As(err, &se) || !se.MayBeStored() || r.MessageID == "" {
		t.Fatalf("receipt %+v, err %v", r, err)
	}
}

// TOO_MANY_REQUESTS on every attempt: MaxAttempts attempts, same id,
// then ErrNotStored.
func TestTooManyRequestsUntilAttemptsRunOut(t *testing.T) {
	f := &fakeServer{send: func(context.Context, int, *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		return statusOnly(v2.Code_TOO_MANY_REQUESTS), nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{})
	_, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrTooManyRequests) {
		t.Fatalf("err = %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 3 { // the server's max_attempts
		t.Fatalf("%d attempts, want the server policy's 3", len(f.attempts))
	}
	for _, a := range f.attempts {
		if a.ids[0] != f.attempts[0].ids[0] {
			t.Fatal("message id changed between attempts")
		}
	}
}

// A backoff longer than the time left ends the send at once: no sleeping
// past the deadline, no attempt after it.
func TestBackoffThatDoesNotFitStops(t *testing.T) {
	f := &fakeServer{
		send: func(context.Context, int, *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
			return statusOnly(v2.Code_TOO_MANY_REQUESTS), nil
		},
		backoff: &v2.RetryPolicy{MaxAttempts: 3, Strategy: &v2.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &v2.ExponentialBackoff{
			Initial: durationpb.New(10 * time.Second), Max: durationpb.New(10 * time.Second), Multiplier: 2}}},
	}
	_, p := fakeProducer(t, f, ProducerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrNotStored) || !strings.Contains(err.Error(), "no time left") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v: it waited for a backoff that could not fit", took)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(f.attempts))
	}
}

// A send whose deadline already passed makes no attempt at all.
func TestExpiredDeadlineMakesNoAttempt(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")})
	var se *SendError
	if !errors.Is(err, ErrNotStored) || !errors.As(err, &se) || se.Attempts != 0 {
		t.Fatalf("err = %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.attempts) != 0 {
		t.Fatalf("%d attempts", len(f.attempts))
	}
}

// A connection that goes away between sends: the request never leaves,
// so the outcome is known (not stored).
func TestRequestThatNeverLeftIsNotStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Dial(ctx, unusedAddr(t))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Dial to a closed port: %v", err)
	}
	a := &attempt{}
	if got := classifyRPCError(status.Error(codes.Unavailable, "connection refused"), a); got != outRetry {
		t.Fatalf("unsent UNAVAILABLE classified %v", got)
	}
	if got := classifyRPCError(status.Error(codes.DeadlineExceeded, "deadline"), a); got != outRejected {
		t.Fatalf("unsent deadline classified %v", got)
	}
	a.sent.Store(true)
	if got := classifyRPCError(status.Error(codes.Unavailable, "transport is closing"), a); got != outUnknown {
		t.Fatalf("UNAVAILABLE after the request left, no answer: %v, want unknown", got)
	}
	a.answered.Store(true)
	if got := classifyRPCError(status.Error(codes.Unavailable, "draining"), a); got != outRetry {
		t.Fatalf("server-answered UNAVAILABLE: %v, want retry", got)
	}
}

// A replica group's "not committed in time" (no majority, the leader
// changed) may still commit: the send is tried again with the same id,
// and reported as of unknown outcome if no attempt is answered OK.
func TestReplicationCodesRetried(t *testing.T) {
	for _, code := range []v2.Code{v2.Code_HA_NOT_AVAILABLE, v2.Code_SLAVE_PERSISTENCE_TIMEOUT} {
		f := &fakeServer{send: func(_ context.Context, n int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
			if n == 1 {
				return statusOnly(code), nil
			}
			return okSend(req), nil
		}}
		_, p := fakeProducer(t, f, ProducerConfig{})
		if r, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")}); err != nil || r.MessageID == "" {
			t.Fatalf("%v then OK: %+v, %v", code, r, err)
		}
		always := &fakeServer{send: func(context.Context, int, *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
			return statusOnly(code), nil
		}}
		_, p = fakeProducer(t, always, ProducerConfig{})
		if _, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("%v on every attempt: %v, want ErrOutcomeUnknown", code, err)
		}
	}
}

// An attempt a replica group did not commit may still be stored: a
// refusal of the next attempt (the topic deleted meanwhile) does not make
// the send "not stored". A lingering producer does not resend such a
// batch message by message either: each message's outcome is unknown.
func TestRefusalAfterReplicationRetryIsUnknown(t *testing.T) {
	// Each request's first attempt: HA_NOT_AVAILABLE; the next ones:
	// TOPIC_NOT_FOUND.
	haThenGone := func() *fakeServer {
		var mu sync.Mutex
		seen := map[string]bool{}
		return &fakeServer{send: func(_ context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
			key := ""
			for _, m := range req.GetMessages() {
				key += m.GetSystemProperties().GetMessageId() + ","
			}
			mu.Lock()
			again := seen[key]
			seen[key] = true
			mu.Unlock()
			if !again {
				return statusOnly(v2.Code_HA_NOT_AVAILABLE), nil
			}
			return statusOnly(v2.Code_TOPIC_NOT_FOUND), nil
		}}
	}
	_, p := fakeProducer(t, haThenGone(), ProducerConfig{})
	_, err := p.Send(context.Background(), &Message{Topic: "t", Body: []byte("x")})
	if !errors.Is(err, ErrOutcomeUnknown) || CodeOf(err) != CodeTopicNotFound {
		t.Fatalf("HA_NOT_AVAILABLE then TOPIC_NOT_FOUND: %v, want ErrOutcomeUnknown with TOPIC_NOT_FOUND", err)
	}

	f := haThenGone()
	_, lp := fakeProducer(t, f, ProducerConfig{Linger: time.Hour, BatchMessages: 3})
	r := newResults()
	for _, id := range []string{"A", "B", "C"} {
		r.send(t, lp, id, &Message{Topic: "t", Body: []byte("x")})
	}
	r.wait(t)
	if got := batchSizes(f); !slices.Equal(got, []int{3, 3}) {
		t.Fatalf("attempts %v, want the batch twice and nothing alone", got)
	}
	for _, id := range []string{"A", "B", "C"} {
		if err := r.got[id]; !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("%s: %v, want ErrOutcomeUnknown", id, err)
		}
	}
}

// Entries that differ, one of them a replica group's timeout: the batch's
// outcome is unknown, not "some refused".
func TestMixedEntryOfReplicationCodeIsUnknown(t *testing.T) {
	f := &fakeServer{send: func(_ context.Context, _ int, req *v2.SendMessageRequest) (*v2.SendMessageResponse, error) {
		resp := okSend(req)
		resp.Status = &v2.Status{Code: v2.Code_MULTIPLE_RESULTS}
		resp.Entries[1].Status = &v2.Status{Code: v2.Code_SLAVE_PERSISTENCE_TIMEOUT}
		return resp, nil
	}}
	_, p := fakeProducer(t, f, ProducerConfig{})
	rs, err := p.SendBatch(context.Background(), []*Message{{Topic: "t", Body: []byte("a")}, {Topic: "t", Body: []byte("b")}})
	if !errors.Is(err, ErrOutcomeUnknown) || len(rs) != 2 || rs[0].MessageID == "" || rs[1].MessageID != "" {
		t.Fatalf("receipts %+v, err %v; want ErrOutcomeUnknown, the first message's receipt only", rs, err)
	}
}
