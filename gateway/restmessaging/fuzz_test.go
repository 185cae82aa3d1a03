package restmessaging

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// FuzzInflate: inflate (gzip bodies from the store) never panics, never
// returns more than maxInflated bytes, and gives back what was compressed.
// (A body of maxInflated+1 bytes is checked once, not seeded: every
// mutation of it would inflate 64 MiB.)
func FuzzInflate(f *testing.F) {
	if _, err := inflate(gzipped(make([]byte, maxInflated+1))); err == nil {
		f.Fatal("a body over maxInflated inflated")
	}
	for _, b := range [][]byte{[]byte("hello"), bytes.Repeat([]byte("compressible "), 400), {}} {
		f.Add(gzipped(b))
	}
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := inflate(b); err == nil && len(out) > maxInflated {
			t.Fatalf("inflated to %d bytes", len(out))
		}
		if out, err := inflate(gzipped(b)); err != nil || !bytes.Equal(out, b) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b) // a bytes.Buffer does not fail
	w.Close()
	return buf.Bytes()
}
