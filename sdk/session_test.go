package sdk

import (
	"context"
	"errors"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// The v2 signature: hex(HMAC-SHA1(secret, x-mq-date-time)).
func TestAuthorizationHeader(t *testing.T) {
	got := authorization("AK", "secret", "20240101T000000Z")
	// python3 -c 'import hmac,hashlib;print(hmac.new(b"secret",b"20240101T000000Z",hashlib.sha1).hexdigest())'
	want := "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=2e5621239cbfdccc449dbd2e028cf60e7c6a592d"
	if got != want {
		t.Fatalf("header\n%q, want\n%q", got, want)
	}
}

func TestMessageIDLayout(t *testing.T) {
	re := regexp.MustCompile(`^01[0-9A-F]{32}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewMessageID()
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("id %q (duplicate %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// Every call carries the v2 headers once, credentials sign them, and the
// namespace goes into each resource.
func TestHeadersCredentialsNamespace(t *testing.T) {
	f := &fakeServer{}
	_, p := fakeProducer(t, f, ProducerConfig{Topics: []string{"t"}}, WithCredentials("AK", "SK"), WithNamespace("ns1"), WithClientID("me"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	md := f.attempts[0].md
	for _, h := range []string{"x-mq-client-id", "x-mq-date-time", "x-mq-request-id", "x-mq-namespace", "authorization", "x-mq-language", "x-mq-protocol", "x-mq-client-version"} {
		if len(md.Get(h)) != 1 {
			t.Errorf("header %s: %q", h, md.Get(h))
		}
	}
	if id := md.Get("x-mq-client-id")[0]; !strings.HasPrefix(id, "me@") {
		t.Errorf("client id %q", id)
	}
	if want := authorization("AK", "SK", md.Get("x-mq-date-time")[0]); md.Get("authorization")[0] != want {
		t.Errorf("authorization %q, want %q", md.Get("authorization")[0], want)
	}
	s := f.fromClient[0].GetSettings()
	if s.GetClientType() != v2.ClientType_PRODUCER || s.GetPublishing().GetTopics()[0].GetResourceNamespace() != "ns1" || s.GetUserAgent().GetLanguage() != v2.Language_GOLANG {
		t.Errorf("settings %v", s)
	}
}

// A server that never answers the settings: NewProducer fails when its
// ctx ends, and leaves nothing running.
func TestHandshakeWithoutReplyFailsAndLeaksNothing(t *testing.T) {
	f := &fakeServer{noSettingsReply: true}
	addr := startFake(t, f)
	base := runtime.NumGoroutine()
	c := dialFake(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer hcancel()
	_, err := c.NewProducer(hctx, ProducerConfig{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no Settings reply") {
		t.Fatalf("err = %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, base)
}

// The session answers server commands minimally: a stack trace, and
// NOT_IMPLEMENTED for message verification, each with the nonce.
func TestServerCommandsAnswered(t *testing.T) {
	f := &fakeServer{afterSettings: []*v2.TelemetryCommand{
		{Command: &v2.TelemetryCommand_PrintThreadStackTraceCommand{PrintThreadStackTraceCommand: &v2.PrintThreadStackTraceCommand{Nonce: "n1"}}},
		{Command: &v2.TelemetryCommand_VerifyMessageCommand{VerifyMessageCommand: &v2.VerifyMessageCommand{Nonce: "n2"}}},
		{Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{RecoverOrphanedTransactionCommand: &v2.RecoverOrphanedTransactionCommand{}}},
	}}
	fakeProducer(t, f, ProducerConfig{})
	f.wait(t, "two replies", func() bool { return len(f.fromClient) >= 3 })
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.fromClient[1]
	if st.GetThreadStackTrace().GetNonce() != "n1" || !strings.Contains(st.GetThreadStackTrace().GetThreadStackTrace(), "goroutine") || st.GetStatus().GetCode() != v2.Code_OK {
		t.Errorf("stack trace reply %v", st)
	}
	vr := f.fromClient[2]
	if vr.GetVerifyMessageResult().GetNonce() != "n2" || vr.GetStatus().GetCode() != v2.Code_NOT_IMPLEMENTED {
		t.Errorf("verify reply %v", vr)
	}
}

// When the server ends the Telemetry stream (a drain, a restart), the
// session opens a new one and sends its settings again.
func TestTelemetryStreamReopened(t *testing.T) {
	f := &fakeServer{endFirstStream: true}
	fakeProducer(t, f, ProducerConfig{})
	f.wait(t, "a second stream with the settings", func() bool {
		return f.streams == 2 && len(f.fromClient) == 2 && f.fromClient[1].GetSettings() != nil
	})
}

// Close stops everything it started. A server that keeps the Telemetry
// stream open past the deadline is reported, the stream cancelled, and
// still no goroutine is left behind.
func TestCloseReportsWhatDidNotFinish(t *testing.T) {
	f := &fakeServer{holdStreams: true}
	addr := startFake(t, f)
	base := runtime.NumGoroutine()
	c := dialFake(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewSimpleConsumer(ctx, ConsumerConfig{Group: "g", Subscriptions: map[string]string{"t": "*"}}); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	start := time.Now()
	err = c.Close(cctx)
	var ce *CloseError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(err.Error(), "Telemetry stream not closed") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v with a 300ms deadline", took)
	}
	f.mu.Lock()
	if len(f.terminated) != 2 {
		t.Errorf("NotifyClientTermination from %d clients, want 2", len(f.terminated))
	}
	f.mu.Unlock()
	if _, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrNotStored) {
		t.Fatalf("send after close: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	waitGoroutines(t, base)
}

// A clean Close: nothing reported, nothing left running.
func TestCloseCleanLeavesNoGoroutines(t *testing.T) {
	f := &fakeServer{}
	addr := startFake(t, f)
	base := runtime.NumGoroutine()
	c := dialFake(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.NewProducer(ctx, ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &Message{Topic: "t", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil { // a member closed on its own
		t.Fatal(err)
	}
	if _, err := c.NewSimpleConsumer(ctx, ConsumerConfig{Group: "g", Subscriptions: map[string]string{"t": "*"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, base)
}
