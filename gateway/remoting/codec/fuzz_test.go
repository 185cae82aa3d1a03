package codec

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds frames (everything after the length field) to the
// decoder: it must never panic, and whatever it accepts must re-encode
// and decode to the same command. The corpus in testdata/fuzz/FuzzDecode
// holds frames captured from the classic Go client v2.1.2 talking to
// mqgate (internal/e2e/classic TestCaptureSeedFrames) plus the
// worked examples of codec_test.go.
func FuzzDecode(f *testing.F) {
	f.Add(append([]byte{0, 0, 0, 0x65}, `{"code":105,"language":"GO","version":317,"opaque":2,"flag":0,"remark":"","extFields":{"topic":"T1"}}`...))
	f.Add([]byte{1, 0, 0, 0x22, 0, 0x69, 9, 1, 0x3d, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d, 0, 5, 't', 'o', 'p', 'i', 'c', 0, 0, 0, 2, 'T', '1'})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := Decode(frame)
		if err != nil {
			return
		}
		typ := c.Serialize
		b, err := AppendFrame(nil, c, typ)
		if err != nil {
			if typ == RocketMQ {
				t.Fatalf("decoded binary header does not re-encode: %v", err)
			}
			return
		}
		g, err := ReadFrame(bytes.NewReader(b), len(b))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(g)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v\n%q", err, b)
		}
		// JSON escapes invalid UTF-8; compare on re-decoded values.
		if typ == RocketMQ && !same(c, c2) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, c2)
		}
		if c.Code != c2.Code || c.Opaque != c2.Opaque || c.Flag != c2.Flag || !bytes.Equal(c.Body, c2.Body) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, c2)
		}
	})
}
