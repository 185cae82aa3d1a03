package restmessaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

func TestMessageIDsAreV1(t *testing.T) {
	src := newIDSource()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, b := src.next(now), src.next(now)
	for _, id := range []string{a, b} {
		raw, err := hex.DecodeString(id)
		if err != nil || len(id) != 34 || strings.ToUpper(id) != id || raw[0] != 1 {
			t.Fatalf("id %q is not 34 upper-case hex characters of version 01", id)
		}
		if secs := binary.BigEndian.Uint32(raw[9:13]); int64(secs) != int64(now.Sub(idEpoch)/time.Second) {
			t.Fatalf("id %q carries %d seconds since 2021", id, secs)
		}
	}
	if a == b || a[:18] != b[:18] {
		t.Fatalf("ids %q and %q: same process part, different sequence expected", a, b)
	}
}

func TestReceiveRequestDefaultsAndLimits(t *testing.T) {
	rr, err := receiveRequest(context.Background(), &restv1.ReceiveMessagesRequest{Group: "g", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Max != DefaultMaxMessages || rr.Invisible != DefaultInvisible || rr.Wait != DefaultWait || rr.QueueID != -1 || !rr.Filter.All() {
		t.Fatalf("defaults: %+v", rr)
	}
	// A caller deadline shortens the wait so the answer arrives in time.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rr, err = receiveRequest(ctx, &restv1.ReceiveMessagesRequest{WaitDuration: durationpb.New(20 * time.Second)})
	if err != nil || rr.Wait > 2*time.Second-WaitReserve || rr.Wait <= 0 {
		t.Fatalf("wait under a 2 s deadline: %s %v", rr.Wait, err)
	}
	for _, c := range []struct {
		req  *restv1.ReceiveMessagesRequest
		kind mqerr.Kind
	}{
		{&restv1.ReceiveMessagesRequest{MaxMessages: 33}, mqerr.KindBadRequest},
		{&restv1.ReceiveMessagesRequest{MaxMessages: -1}, mqerr.KindBadRequest},
		{&restv1.ReceiveMessagesRequest{InvisibleDuration: durationpb.New(9 * time.Second)}, mqerr.KindIllegalInvisibleTime},
		{&restv1.ReceiveMessagesRequest{InvisibleDuration: &durationpb.Duration{Seconds: 1, Nanos: -1}}, mqerr.KindIllegalInvisibleTime},
		{&restv1.ReceiveMessagesRequest{WaitDuration: durationpb.New(-time.Second)}, mqerr.KindIllegalPollingTime},
		{&restv1.ReceiveMessagesRequest{WaitDuration: durationpb.New(21 * time.Second)}, mqerr.KindIllegalPollingTime},
		{&restv1.ReceiveMessagesRequest{Filter: "a\x01"}, mqerr.KindIllegalFilter},
	} {
		if _, err := receiveRequest(context.Background(), c.req); mqerr.KindOf(err) != c.kind {
			t.Errorf("%v: %v, want %s", c.req, err, c.kind)
		}
	}
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// REST consumers get what the producer sent: gzip bodies (from gRPC
// producers that compress) are inflated; text only when asked and UTF-8.
func TestToReceivedBodies(t *testing.T) {
	s := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	now := time.Now()
	cases := []struct {
		name     string
		d        model.Delivered
		text     bool
		wantText string
		wantBody []byte
	}{
		{"text asked", model.Delivered{Message: model.Message{Body: []byte("héllo")}}, true, "héllo", nil},
		{"text not asked", model.Delivered{Message: model.Message{Body: []byte("hello")}}, false, "", []byte("hello")},
		{"binary", model.Delivered{Message: model.Message{Body: []byte{0xff, 0}}}, true, "", []byte{0xff, 0}},
		{"gzip", model.Delivered{Message: model.Message{Body: gz(t, []byte("inflated")), BodyGzip: true}}, true, "inflated", nil},
		{"broken gzip", model.Delivered{Message: model.Message{Body: []byte("\x1f\x8bnope"), BodyGzip: true}}, false, "", []byte("\x1f\x8bnope")},
	}
	for _, c := range cases {
		m := s.toReceived(&c.d, c.text, now)
		if m.GetText() != c.wantText || !bytes.Equal(m.GetBody(), c.wantBody) {
			t.Errorf("%s: text %q body %q", c.name, m.GetText(), m.GetBody())
		}
		if m.GetDeliveryAttempt() != 1 {
			t.Errorf("%s: delivery attempt %d, want at least 1", c.name, m.GetDeliveryAttempt())
		}
	}
}

func TestWantsTextAndCallerHost(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(BodyFormatHeader, "TEXT", "x-forwarded-for", "203.0.113.7, 10.0.0.1"))
	if !wantsText(ctx) || callerHost(ctx) != "203.0.113.7" {
		t.Fatalf("wantsText %v, host %q", wantsText(ctx), callerHost(ctx))
	}
	if wantsText(context.Background()) {
		t.Fatal("text without asking")
	}
}
