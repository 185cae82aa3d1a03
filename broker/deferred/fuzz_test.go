package deferred

import (
	"bytes"
	"github.com/mqgate/mqgate/broker/keyring"
	"testing"
)

// FuzzDecodeOp: decodeOp never panics, accepts only known ops and
// non-negative offsets, and what it accepts re-encodes to the same op
// and offset (the varint may have been written longer than encodeOp
// writes it: binary.Varint accepts that, and the value is unambiguous).
// Whatever encodeOp writes decodes back.
func FuzzDecodeOp(f *testing.F) {
	f.Add(encodeOp(OpFired, 0), uint8(OpFired), int64(0))
	f.Add(encodeOp(OpDiscarded, 1<<62), uint8(OpCommitted), int64(1<<40))
	f.Add([]byte{1, byte(OpRecalled), 0x80, 0x00}, uint8(OpRolledBack), int64(-1))
	f.Add([]byte{1, byte(OpDiscarded + 1), 2}, uint8(0), int64(5))
	f.Add([]byte{2, byte(OpFired)}, uint8(9), int64(300))
	f.Fuzz(func(t *testing.T, b []byte, op uint8, off int64) {
		if o, n, ok := decodeOp(b); ok {
			enc := encodeOp(o, n)
			if o < OpFired || o > OpDiscarded || n < 0 || !bytes.Equal(enc[:2], b[:2]) || len(enc) > len(b) {
				t.Fatalf("%x accepted as %v %d (encodes to %x)", b, o, n, enc)
			}
			if o2, n2, ok := decodeOp(enc); !ok || o2 != o || n2 != n {
				t.Fatalf("%x re-encoded to %x, which decodes to %v %d %v", b, enc, o2, n2, ok)
			}
		}
		if Op(op) >= OpFired && Op(op) <= OpDiscarded && off >= 0 {
			if o, n, ok := decodeOp(encodeOp(Op(op), off)); !ok || o != Op(op) || n != off {
				t.Fatalf("encodeOp(%v, %d) decodes to %v %d %v", Op(op), off, o, n, ok)
			}
		}
	})
}

// FuzzTokenDecode: Decode never panics; a minted token decodes to what it
// was minted with, for its topic only; changing any byte of it makes it
// rejected; and any string accepted is exactly the token Encode mints for
// the values decoded (tokens are not malleable).
func FuzzTokenDecode(f *testing.F) {
	tk := testToken("t1.", bytes.Repeat([]byte{7}, 32))
	for _, s := range []struct {
		off, due int64
		topic    string
	}{{0, 0, "T"}, {1 << 40, 1700000000000, "%RETRY%g"}, {-1, -1, ""}} {
		tok := tk.Encode(s.off, s.due, s.topic)
		f.Add(tok, s.topic, s.off, s.due, uint8(len(tok)-1), byte('A'))
		f.Add(tok[:len(tok)-1], s.topic, s.off, s.due, uint8(3), byte('-'))
	}
	f.Add("t1.", "T", int64(5), int64(6), uint8(0), byte('='))
	f.Add("t1."+string(bytes.Repeat([]byte{'A'}, 43)), "T", int64(5), int64(6), uint8(40), byte('\n'))
	f.Fuzz(func(t *testing.T, s, topic string, off, due int64, i uint8, c byte) {
		if g := TokenGroup(s); g < 0 {
			t.Fatalf("%q reads as group %d", s, g)
		}
		if g := int(i); TokenGroup(GroupPrefix("t1.", g)+s) != g {
			t.Fatalf("a token of group %d prefixed to %q reads as group %d", g, s, TokenGroup(GroupPrefix("t1.", g)+s))
		}
		if o, d, err := tk.Decode(s, topic); err == nil && tk.Encode(o, d, topic) != s {
			t.Fatalf("%q accepted as %d %d, which mints %q", s, o, d, tk.Encode(o, d, topic))
		}
		tok := tk.Encode(off, due, topic)
		if o, d, err := tk.Decode(tok, topic); err != nil || o != off || d != due {
			t.Fatalf("%q minted for %d %d decodes to %d %d %v", tok, off, due, o, d, err)
		}
		if other := topic + "x"; TopicHash(other) != TopicHash(topic) {
			if _, _, err := tk.Decode(tok, other); err == nil {
				t.Fatalf("%q accepted for topic %q", tok, other)
			}
		}
		b := []byte(tok)
		if b[int(i)%len(b)] != c {
			b[int(i)%len(b)] = c
			if o, d, err := tk.Decode(string(b), topic); err == nil {
				t.Fatalf("%q (minted %q) accepted as %d %d", b, tok, o, d)
			}
		}
	})
}

// testToken is a token whose ring is the one key secret.
func testToken(prefix string, secret []byte) *Token {
	t := &Token{prefix: prefix}
	t.SetRing(keyring.Ring{{Secret: secret}})
	return t
}
