package message

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to
// exactly the same bytes (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	f.Add(seal(f, sample(), 1, 2, 3))
	f.Add(seal(f, &Message{Topic: "t"}, 0, 0, 0))
	f.Add([]byte("MQG"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.Clone(data), 1<<20)
		if _, verr := Verify(data, 1<<20); (verr == nil) != (err == nil) {
			t.Fatalf("Verify %v, Decode %v", verr, err)
		}
		if err != nil {
			return
		}
		b, crc, err := Encode(nil, m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		Seal(b, crc, m.PhysOffset, m.QueueOffset, m.StoreTime)
		if !bytes.Equal(b, data[:m.Size]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzParseView: ParseView (dispatch reads records with it, without the
// CRC) never panics and agrees with Decode: the same bytes with a valid
// magic and CRC decode exactly when ParseView accepts them, to the same
// fields and properties.
func FuzzParseView(f *testing.F) {
	f.Add(seal(f, sample(), 1, 2, 3))
	f.Add(seal(f, &Message{Topic: "t", Body: []byte{0}}, 0, 0, 0))
	f.Add(seal(f, sample(), 1, 2, 3)[:MinSize])
	f.Add(make([]byte, MinSize))
	f.Add([]byte("MQG"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, verr := ParseView(b)
		le := binary.LittleEndian
		if len(b) < MinSize || le.Uint32(b) < MinSize || int(le.Uint32(b)) > len(b) {
			if verr == nil {
				t.Fatalf("accepted a record whose size field does not fit: %x", b)
			}
			return
		}
		r := bytes.Clone(b[:le.Uint32(b)])
		le.PutUint32(r[offMagic:], magicV1)
		crc := crc32.Update(0, castagnoli, r[:offCRC])
		crc = crc32.Update(crc, castagnoli, r[offQueueID:])
		le.PutUint32(r[offCRC:], crc32.Update(crc, castagnoli, r[offPhys:offQueueID]))
		m, err := Decode(r, len(r))
		if (err == nil) != (verr == nil) {
			t.Fatalf("ParseView %v, Decode %v", verr, err)
		}
		if err != nil {
			return
		}
		h := v.Header
		if h.Size != m.Size || h.PhysOffset != m.PhysOffset || h.QueueOffset != m.QueueOffset || h.StoreTime != m.StoreTime ||
			h.QueueID != m.QueueID || h.Flags != m.Flags || h.BornTime != m.BornTime ||
			string(v.Topic) != m.Topic || !bytes.Equal(v.Body, m.Body) || v.Prop("") != nil {
			t.Fatalf("view %+v, decoded %+v", v, m)
		}
		for _, p := range m.Properties {
			if got := v.Prop(p.Key); got == nil || string(got) != p.Value {
				t.Fatalf("property %q: view %q, decoded %q", p.Key, got, p.Value)
			}
		}
	})
}
