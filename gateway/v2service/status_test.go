package v2service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func TestStatusOf(t *testing.T) {
	ctx := grpcserver.WithCallIDs(context.Background(), "", "rid-1")
	if st := statusOf(ctx, nil, nil); st.Code != v2.Code_OK {
		t.Fatalf("nil error: %v", st)
	}
	st := statusOf(ctx, nil, mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist", "t"))
	if st.Code != v2.Code_TOPIC_NOT_FOUND || !strings.Contains(st.Message, `"t"`) {
		t.Fatalf("classified: %v", st)
	}
	st = statusOf(ctx, nil, errors.New("disk controller on fire at 0xdeadbeef"))
	if st.Code != v2.Code_INTERNAL_ERROR || strings.Contains(st.Message, "0xdeadbeef") || !strings.Contains(st.Message, "rid-1") {
		t.Fatalf("unclassified error leaked or lost its request id: %v", st)
	}
	if st := statusOf(ctx, nil, mqerr.Errorf(mqerr.KindFlushTimeout, "fsync slow")); st.Code != v2.Code_MASTER_PERSISTENCE_TIMEOUT {
		t.Fatalf("flush timeout: %v", st)
	}
	if st := statusOf(ctx, nil, context.DeadlineExceeded); st.Code != v2.Code_REQUEST_TIMEOUT {
		t.Fatalf("deadline: %v", st)
	}
}

func TestCombine(t *testing.T) {
	bad := &v2.Status{Code: v2.Code_INVALID_RECEIPT_HANDLE}
	entries := func(sts ...*v2.Status) []*v2.AckMessageResultEntry {
		out := make([]*v2.AckMessageResultEntry, len(sts))
		for i, st := range sts {
			out[i] = &v2.AckMessageResultEntry{Status: st}
		}
		return out
	}
	if got := combine(entries(statusOK, statusOK)); got.Code != v2.Code_OK {
		t.Fatal(got)
	}
	if got := combine(entries(bad, bad)); got.Code != v2.Code_INVALID_RECEIPT_HANDLE {
		t.Fatal(got)
	}
	if got := combine(entries(statusOK, bad)); got.Code != v2.Code_MULTIPLE_RESULTS {
		t.Fatal(got)
	}
	if got := combine(entries()); got.Code != v2.Code_INTERNAL_SERVER_ERROR {
		t.Fatal(got)
	}
}

type recordingStream struct {
	grpc.ServerStream
	ctx     context.Context
	sent    []any
	failAt  int // fail the n-th send (1-based); 0 never
	trailer metadata.MD
}

func (r *recordingStream) Context() context.Context { return r.ctx }
func (r *recordingStream) SendMsg(m any) error {
	if r.failAt > 0 && len(r.sent)+1 == r.failAt {
		return errors.New("client went away")
	}
	r.sent = append(r.sent, m)
	return nil
}
func (r *recordingStream) Send(m *v2.ReceiveMessageResponse) error { return r.SendMsg(m) }
func (r *recordingStream) SetHeader(metadata.MD) error             { return nil }
func (r *recordingStream) SendHeader(metadata.MD) error            { return nil }
func (r *recordingStream) SetTrailer(md metadata.MD)               { r.trailer = md }

func TestPollTime(t *testing.T) {
	d := durationpb.New
	cases := []struct {
		name        string
		remaining   time.Duration
		hasDeadline bool
		requested   *durationpb.Duration
		declared    time.Duration
		rt          time.Duration
		want        time.Duration
	}{
		// Go SimpleConsumer, awaitDuration 0: deadline 3 s, no request or
		// declared timeout ⇒ clamp(1.5 s) = 5 s, cut to 3 s − 200 ms.
		{"go simple default", 3 * time.Second, true, nil, 0, 3 * time.Second, 2800 * time.Millisecond},
		// Go push: long_polling_timeout 20 s, deadline 23 s.
		{"go push", 23 * time.Second, true, d(20 * time.Second), 0, 3 * time.Second, 20 * time.Second},
		{"clamped up", 30 * time.Second, true, d(time.Second), 0, 3 * time.Second, 5 * time.Second},
		{"clamped down", time.Minute, true, d(time.Minute), 0, 3 * time.Second, 20 * time.Second},
		{"declared await", 13 * time.Second, true, nil, 10 * time.Second, 3 * time.Second, 10 * time.Second},
		{"short deadline never rejects", 300 * time.Millisecond, true, d(20 * time.Second), 0, 3 * time.Second, 100 * time.Millisecond},
		{"no time left", 100 * time.Millisecond, true, nil, 0, 3 * time.Second, 0},
		{"expired", -time.Second, true, nil, 0, 3 * time.Second, 0},
		{"no deadline", 0, false, nil, 0, 3 * time.Second, 20 * time.Second},
		{"no deadline requested", 0, false, d(7 * time.Second), 0, 3 * time.Second, 7 * time.Second},
		{"from remaining", 15 * time.Second, true, nil, 0, 4 * time.Second, 13 * time.Second},
	}
	for _, c := range cases {
		if got := pollTime(c.remaining, c.hasDeadline, c.requested, c.declared, c.rt); got != c.want {
			t.Errorf("%s: pollTime = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestEndpointsFromHostPort(t *testing.T) {
	cases := []struct {
		in     string
		def    int
		scheme v2.AddressScheme
		host   string
		port   int32
		bad    bool
	}{
		{"10.0.0.1:8081", 0, v2.AddressScheme_IPv4, "10.0.0.1", 8081, false},
		{"[::1]:8081", 0, v2.AddressScheme_IPv6, "::1", 8081, false},
		{"mq.example.com:443", 0, v2.AddressScheme_DOMAIN_NAME, "mq.example.com", 443, false},
		{"mq.example.com", 8081, v2.AddressScheme_DOMAIN_NAME, "mq.example.com", 8081, false},
		{"mq.example.com", 0, 0, "", 0, true},
		{"host:notaport", 0, 0, "", 0, true},
	}
	for _, c := range cases {
		ep, err := endpointsFromHostPort(c.in, c.def)
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error", c.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		a := ep.Addresses[0]
		if ep.Scheme != c.scheme || a.Host != c.host || a.Port != c.port {
			t.Errorf("%q: got %v", c.in, ep)
		}
	}
}

func TestMD5UpperMatchesClients(t *testing.T) {
	// What the Go/Java clients compute: upper-case hex of MD5.
	if got := md5Upper([]byte("hello")); got != "5D41402ABC4B2A76B9719D911017C592" {
		t.Fatalf("md5Upper = %s", got)
	}
}
