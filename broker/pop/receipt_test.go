package pop

import (
	"errors"
	"strings"
	"testing"
)

func testCodec(t testing.TB) *HandleCodec {
	c, err := NewHandleCodec([]byte("0123456789abcdef0123456789abcdef"), 7)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHandleRoundTrip(t *testing.T) {
	c := testCodec(t)
	h := Handle{Flags: HandleFIFO, Queue: 3, Offset: 1 << 40, Epoch: 5, Gen: 2, Retrieved: 1700000000000,
		Invisible: 30000, GroupHash: NameHash("g"), TopicHash: NameHash("t")}
	s := c.Encode(h)
	if !strings.HasPrefix(s, "r1.") || len(s) > 100 {
		t.Fatalf("handle %q", s)
	}
	got, err := c.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	h.Incarnation = 7
	if got != h {
		t.Fatalf("got %+v want %+v", got, h)
	}
}

func TestHandleRejectsTampering(t *testing.T) {
	c := testCodec(t)
	s := c.Encode(Handle{Queue: 1, Offset: 10, Epoch: 1})
	other, _ := NewHandleCodec([]byte("another-key-another-key-another!"), 7)
	wiped, _ := NewHandleCodec([]byte("0123456789abcdef0123456789abcdef"), 8)
	cases := map[string]string{
		"empty":       "",
		"upstream":    "0 1700000000000 60000 0 0 broker-a 3 42 123456",
		"truncated":   s[:len(s)-2],
		"not base64":  s[:10] + "!" + s[11:],
		"flipped bit": flip(s, 12),
		"flipped mac": flip(s, len(s)-3),
	}
	for name, in := range cases {
		if _, err := c.Decode(in); !errors.Is(err, ErrBadHandle) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := other.Decode(s); err == nil || !strings.Contains(err.Error(), "forged or modified") {
		t.Errorf("other key: %v", err)
	}
	if _, err := wiped.Decode(s); err == nil || !strings.Contains(err.Error(), "another store") {
		t.Errorf("other incarnation: %v", err)
	}
}

func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func FuzzHandleDecode(f *testing.F) {
	c := testCodec(f)
	f.Add(c.Encode(Handle{Queue: 1, Offset: 2, Epoch: 3}))
	f.Add("r1.")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		q, read := HandleQueue(s) // never panics, authenticated or not
		h, err := c.Decode(s)
		if err != nil {
			return
		}
		if !read || q != h.Queue {
			t.Fatalf("%q decodes with queue %d, HandleQueue reads %d, %v", s, h.Queue, q, read)
		}
		// Anything that authenticates must re-encode to itself.
		if c.Encode(h) != s {
			t.Fatalf("accepted a non-canonical handle %q", s)
		}
	})
}
