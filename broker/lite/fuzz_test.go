package lite

import (
	"bytes"
	"testing"
)

// FuzzDecodeAck: decodeAck never panics; what it accepts re-encodes to the
// same bytes (one spelling per record); what encode writes decodes back.
func FuzzDecodeAck(f *testing.F) {
	good, _ := ackRecord{group: "g", parent: "chat", lite: "conv-1", next: 42}.encode()
	f.Add(good, "g", "p", "l", int64(7))
	f.Add([]byte{1, 1, 'g', 1, 'p', 1, 'l', 0, 0, 0, 0, 0, 0, 0, 1}, "grp", "parent", "lite", int64(0))
	f.Add([]byte{1, 200}, "", "p", "l", int64(-1))
	f.Add([]byte{2}, "g", "", "l", int64(1<<40))
	f.Fuzz(func(t *testing.T, b []byte, g, p, l string, next int64) {
		if r, err := decodeAck(b); err == nil {
			enc, err := r.encode()
			if err != nil || !bytes.Equal(enc, b) {
				t.Fatalf("%x accepted as %+v, which encodes to %x (%v)", b, r, enc, err)
			}
		}
		in := ackRecord{group: g, parent: p, lite: l, next: next}
		enc, err := in.encode()
		if err != nil {
			return
		}
		out, err := decodeAck(enc)
		valid := g != "" && p != "" && l != "" && next >= 0
		if valid != (err == nil) || (err == nil && out != in) {
			t.Fatalf("%+v encodes to %x, which decodes to %+v, %v", in, enc, out, err)
		}
	})
}

// FuzzHandleDecode: decode never panics; a minted handle decodes to what
// it was minted with; any string accepted is exactly the handle encode
// mints for the values decoded (handles are not malleable); another
// key's handles are refused.
func FuzzHandleDecode(f *testing.F) {
	c := newCodec([]byte("0123456789abcdef0123"))
	other := newCodec([]byte("fedcba98765432100123"))
	f.Add(c.encode(handle{queue: 3, offset: 99, gen: 2, groupHash: hash32("g"), parentHash: hash32("chat"), lite: "conv-1"}), int32(1), int64(5), uint32(1), "x")
	f.Add("l1.AAAA", int32(0), int64(0), uint32(0), "")
	f.Add("r1.something", int32(-1), int64(-1), uint32(7), "conv")
	f.Fuzz(func(t *testing.T, s string, q int32, off int64, gen uint32, lite string) {
		hq, read := HandleQueue(s) // never panics, authenticated or not
		if h, err := c.decode(s); err == nil {
			if !read || hq != h.queue {
				t.Fatalf("%q decodes with queue %d, HandleQueue reads %d, %v", s, h.queue, hq, read)
			}
			if c.encode(h) != s {
				t.Fatalf("%q accepted as %+v, which encodes to %q", s, h, c.encode(h))
			}
			if _, err := other.decode(s); err == nil {
				t.Fatalf("%q verifies under another key", s)
			}
		}
		if len(lite) > 255 {
			return
		}
		h := handle{queue: q, offset: off, gen: gen, groupHash: hash32(lite), parentHash: 7, lite: lite}
		got, err := c.decode(c.encode(h))
		if err != nil || got != h {
			t.Fatalf("%+v minted, decoded %+v %v", h, got, err)
		}
	})
}
