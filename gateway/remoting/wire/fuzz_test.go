package wire

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// The corpora under testdata/fuzz hold batch bodies and pull bodies
// captured from the classic Go client talking to mqgate
// (internal/e2e/classic TestCaptureSeedFrames).

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

// FuzzParseOffsetMsgID: ParseOffsetMsgID never panics, what it accepts is
// exactly what OffsetMsgID formats for the decoded address and offset (up
// to case), and every id OffsetMsgID formats parses back.
func FuzzParseOffsetMsgID(f *testing.F) {
	f.Add(OffsetMsgID(netip.MustParseAddrPort("10.0.0.5:10911"), 1500), []byte{10, 0, 0, 5}, uint16(10911), int64(1500))
	f.Add(strings.ToLower(OffsetMsgID(netip.MustParseAddrPort("[2001:db8::1]:8080"), 1<<40)),
		netip.MustParseAddr("::ffff:192.0.2.1").AsSlice(), uint16(0), int64(0))
	f.Add("C0A80001FFFFFFFF0000000000000001", []byte{}, uint16(65535), int64(-1))
	f.Add("0A000005000000008000000000000000", []byte{1, 2, 3}, uint16(1), int64(1<<62))
	f.Add("0A00000500002A9F00000000000005D", []byte{0}, uint16(1), int64(1))
	f.Fuzz(func(t *testing.T, id string, ip []byte, port uint16, phys int64) {
		if ap, off, err := ParseOffsetMsgID(id); err == nil {
			if got := OffsetMsgID(ap, off); got != strings.ToUpper(id) || off < 0 {
				t.Fatalf("%q parsed as %v %d, which formats as %q", id, ap, off, got)
			}
		}
		addr, ok := netip.AddrFromSlice(ip)
		if !ok || phys < 0 {
			return
		}
		id = OffsetMsgID(netip.AddrPortFrom(addr, port), phys)
		if ap, off, err := ParseOffsetMsgID(id); err != nil || ap != netip.AddrPortFrom(addr, port) || off != phys {
			t.Fatalf("%v %d formatted as %q parses to %v %d %v", addr, phys, id, ap, off, err)
		}
	})
}
