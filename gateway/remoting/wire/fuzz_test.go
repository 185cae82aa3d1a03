package wire

import (
	"bytes"
	"testing"
)

// The corpora under testdata/fuzz hold batch bodies and pull bodies
// captured from the classic Go client talking to mqgate
// (internal/e2e/remoting TestCaptureSeedFrames).

func FuzzDecodeBatch(f *testing.F) {
	b, _ := AppendBatch(nil, []BatchMessage{{Body: []byte("a"), Properties: "K\x01V\x02"}, {Body: []byte("bb")}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, err := DecodeBatch(body, 64)
		if err != nil {
			return
		}
		out, err := AppendBatch(nil, ms)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeBatch(out, 64)
		if err != nil || len(again) != len(ms) {
			t.Fatalf("re-encoded batch: %d messages, %v", len(again), err)
		}
		for i := range ms {
			if !bytes.Equal(ms[i].Body, again[i].Body) || ms[i].Properties != again[i].Properties || ms[i].Flag != again[i].Flag {
				t.Fatalf("message %d changed", i)
			}
		}
	})
}

func FuzzDecodeRecords(f *testing.F) {
	r := sample()
	b, _ := AppendRecord(nil, &r)
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		rs, err := DecodeRecords(body)
		if err != nil {
			return
		}
		var out []byte
		for i := range rs {
			if out, err = AppendRecord(out, &rs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out, body) {
			// Re-encoding may only differ where the input used a V2
			// magic for a short topic or an odd host family flag.
			if again, err := DecodeRecords(out); err != nil || len(again) != len(rs) {
				t.Fatalf("re-encoded records do not decode: %v", err)
			}
		}
	})
}

func FuzzParseProperties(f *testing.F) {
	f.Add("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C0A8\x02")
	f.Fuzz(func(t *testing.T, s string) {
		ps := ParseProperties(s)
		for _, p := range ps {
			if p.Key == "" {
				t.Fatal("empty key")
			}
		}
		if !validAll(ps) {
			return
		}
		again := ParseProperties(string(AppendProperties(nil, ps)))
		if len(again) != len(ps) {
			t.Fatalf("%q → %q", ps, again)
		}
	})
}

// validAll reports whether every property can be written back.
func validAll(ps []Property) bool {
	for _, p := range ps {
		if !ValidProperty(p.Key, p.Value) {
			return false
		}
	}
	return true
}
