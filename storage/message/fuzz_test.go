package message

import (
	"bytes"
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
