package connlimit

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// FuzzFirstStream: whatever a client sends after its preface, the
// refusal reads at most maxFramesRead frames of at most maxFrameLen and
// names a client stream (odd, not 0) only for a HEADERS frame. Seeds in
// testdata/fuzz/FuzzFirstStream.
func FuzzFirstStream(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingReader{r: bytes.NewReader(data)}
		stream, ok := firstStream(r)
		if r.n > maxFramesRead*(9+maxFrameLen) {
			t.Fatalf("read %d bytes", r.n)
		}
		if ok && (stream == 0 || stream%2 == 0) {
			t.Fatalf("stream %d", stream)
		}
	})
}

// FuzzReadRequestHead: whatever a client sends, the HTTP refusal reads at
// most maxRequestHead bytes of it plus one buffer before it answers, and
// answers a head that ends in a blank line. Seeds in
// testdata/fuzz/FuzzReadRequestHead.
func FuzzReadRequestHead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingReader{r: bytes.NewReader(data)}
		ok := readRequestHead(bufio.NewReaderSize(r, 4096))
		if r.n > maxRequestHead+4096 {
			t.Fatalf("read %d bytes", r.n)
		}
		if end := bytes.Index(data, []byte("\n\r\n")); end >= 0 && end+3 <= maxRequestHead && !ok {
			t.Fatalf("a complete head of %d bytes not answered", end+3)
		}
	})
}
