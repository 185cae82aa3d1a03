package main

import (
	"strings"
	"testing"
)

// The hint after a refused ack matches why the server refused it.
func TestAckHintMatchesTheRefusal(t *testing.T) {
	ac := ackCommand{group: "billing", topic: "orders"}
	for _, c := range []struct {
		msg       string
		want      string
		mustNotBe string
	}{
		{"invalid receipt handle: receipt handle was not issued by mqgate (unknown format)", "cut short, mistyped", "expired"},
		{"invalid receipt handle: receipt handle has the wrong length", "cut short, mistyped", "expired"},
		{"invalid receipt handle: receipt handle failed authentication (forged or modified)", "from another server", "expired"},
		{"invalid receipt handle: receipt handle belongs to another store (data dir was replaced)", "data directory", "expired"},
		{"invalid receipt handle: issued for another consumer group or topic", "--group billing --topic orders", "expired"},
		{"receipt handle was issued to another group or topic", "--group billing --topic orders", "expired"},
		{"invalid receipt handle: the invisible duration expired at 2026-01-02T03:04:05Z; the message will be redelivered", "expired, already acked or superseded", "mistyped"},
		{"invalid receipt handle: superseded by a later ChangeInvisibleDuration: use the newest handle", "expired, already acked or superseded", "mistyped"},
		{"invalid receipt handle: the message is no longer in flight (already acknowledged, dead-lettered or expired and redelivered)", "expired, already acked or superseded", "mistyped"},
	} {
		h := ackHint(c.msg, ac)
		if !strings.Contains(h, c.want) || strings.Contains(h, c.mustNotBe) {
			t.Errorf("refusal %q: hint %q, want it to say %q and not %q", c.msg, h, c.want, c.mustNotBe)
		}
	}
}
