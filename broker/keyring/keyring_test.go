package keyring

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestRingRoundTripAndRotation(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	a, err := NewKey(now.Add(-48 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKey(now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r := Ring{b, a}
	got, err := Decode(r.Encode())
	if err != nil || len(got) != 2 || got[0].ID != b.ID || !bytes.Equal(got[1].Secret, a.Secret) || got[1].Created != a.Created {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	c, _ := NewKey(now)
	rot := r.Rotated(c, now.Add(-24*time.Hour).UnixMilli())
	if len(rot) != 2 || rot.Newest().ID != c.ID || rot[1].ID != b.ID {
		t.Fatalf("rotated: %+v, want c then b (a is older than a day)", rot)
	}
	if _, ok := rot.ByID(a.ID); ok {
		t.Fatal("a kept past its age")
	}
	if _, err := Decode([]byte("32 raw bytes of an older version")); !errors.Is(err, ErrBadRing) {
		t.Fatalf("decode of a raw key: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	k, _ := NewKey(time.Unix(0, 0))
	f.Add(Ring{k}.Encode())
	f.Add([]byte("MQKR\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(r.Encode(), b) {
			t.Fatalf("decoded ring does not encode back to its bytes")
		}
	})
}
