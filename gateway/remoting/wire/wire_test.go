package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sample() Record {
	return Record{QueueID: 3, Flag: 7, QueueOffset: 42, PhysOffset: 123456, SysFlag: SysTxPrepared, BornTime: 1700000000000,
		BornHost: netip.MustParseAddrPort("192.0.2.2:5555"), StoreTime: 1700000000001, StoreHost: netip.MustParseAddrPort("10.0.0.5:9876"),
		ReconsumeTimes: 2, Body: []byte("hello"), Topic: "T1", Properties: "TAGS\x01a\x02UNIQ_KEY\x01ID\x02"}
}

// Field offsets of a stored-message record for IPv4 hosts; Go v2.1.2 reads
// fields by position, so a shift corrupts every following record.
func TestRecordLayoutOffsets(t *testing.T) {
	r := sample()
	b, err := AppendRecord(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	if int(be.Uint32(b)) != len(b) || len(b) != 91+5+2+len(r.Properties) {
		t.Fatalf("TOTALSIZE %d, len %d", be.Uint32(b), len(b))
	}
	checks := []struct {
		name string
		at   int
		got  int64
		want int64
	}{
		{"MAGICCODE", 4, int64(int32(be.Uint32(b[4:]))), int64(MagicV1)},
		{"BODYCRC", 8, int64(be.Uint32(b[8:])), int64(BodyCRC(r.Body))},
		{"QUEUEOFFSET", 20, int64(be.Uint64(b[20:])), 42},
		{"PHYSICALOFFSET", 28, int64(be.Uint64(b[28:])), 123456},
		{"SYSFLAG", 36, int64(be.Uint32(b[36:])), int64(SysTxPrepared)},
		{"BORNHOST port", 52, int64(be.Uint32(b[52:])), 5555},
		{"STORETIMESTAMP", 56, int64(be.Uint64(b[56:])), 1700000000001},
		{"STOREHOST port", 68, int64(be.Uint32(b[68:])), 9876},
		{"RECONSUMETIMES", 72, int64(be.Uint32(b[72:])), 2},
		{"BODYLENGTH", 84, int64(be.Uint32(b[84:])), 5},
		{"TOPICLENGTH", 93, int64(b[93]), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s at %d = %d, want %d", c.name, c.at, c.got, c.want)
		}
	}
	if !bytes.Equal(b[48:52], []byte{192, 0, 2, 2}) || !bytes.Equal(b[64:68], []byte{10, 0, 0, 5}) {
		t.Errorf("host bytes % x / % x", b[48:52], b[64:68])
	}
}

func TestRecordRoundTripAndHostFamilies(t *testing.T) {
	a := sample()
	v6 := sample()
	v6.BornHost = netip.MustParseAddrPort("[2001:db8::1]:80")
	long := sample()
	long.Topic = strings.Repeat("t", 200) // V2 magic, two-byte topic length
	var body []byte
	for _, r := range []Record{a, v6, long} {
		var err error
		if body, err = AppendRecord(body, &r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := DecodeRecords(body)
	if err != nil || len(got) != 3 {
		t.Fatalf("%d records, %v", len(got), err)
	}
	if got[1].SysFlag&SysBornHostV6 == 0 || got[1].BornHost != v6.BornHost || got[2].Topic != long.Topic {
		t.Fatalf("v6 %+v long topic %q", got[1], got[2].Topic)
	}
	got[0].SysFlag &^= SysBornHostV6 | SysStoreHostV6
	if got[0].Topic != "T1" || !bytes.Equal(got[0].Body, a.Body) || got[0].Properties != a.Properties || got[0].ReconsumeTimes != 2 {
		t.Fatalf("%+v", got[0])
	}
}

func TestBatchDecode(t *testing.T) {
	in := []BatchMessage{{Flag: 1, Body: []byte("a"), Properties: "K\x01V\x02"}, {Body: []byte("bb")}}
	b, err := AppendBatch(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBatch(b, 10)
	if err != nil || len(out) != 2 || string(out[1].Body) != "bb" || out[0].Properties != "K\x01V\x02" || out[0].Flag != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	bad := map[string][]byte{
		"empty":          nil,
		"truncated":      b[:len(b)-1],
		"size too big":   append([]byte{0, 0, 1, 0}, b[4:]...),
		"size too small": append([]byte{0, 0, 0, 3}, b[4:]...),
		"body overrun":   func() []byte { c := bytes.Clone(b); binary.BigEndian.PutUint32(c[16:], 1000); return c }(),
	}
	for name, body := range bad {
		if _, err := DecodeBatch(body, 10); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeBatch(b, 1); !errors.Is(err, ErrMalformed) {
		t.Errorf("batch over the message limit accepted")
	}
}

func TestProperties(t *testing.T) {
	ps := ParseProperties("TAGS\x01a\x02KEYS\x01k1 k2\x02junk\x02\x01novalue\x02TAGS\x01b\x02UNIQ_KEY\x01x")
	want := []Property{{"TAGS", "b"}, {"KEYS", "k1 k2"}, {"UNIQ_KEY", "x"}}
	if len(ps) != len(want) {
		t.Fatalf("%q", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Fatalf("%q", ps)
		}
	}
	if got := string(AppendProperties(nil, want)); got != "TAGS\x01b\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01x\x02" {
		t.Fatalf("%q", got)
	}
}

func TestMessageIDs(t *testing.T) {
	id := OffsetMsgID(netip.MustParseAddrPort("10.0.0.5:9876"), 1500)
	if id != "0A00000500002694"+"00000000000005DC" {
		t.Fatalf("offset id %s", id)
	}
	ap, off, err := ParseOffsetMsgID(strings.ToLower(id))
	if err != nil || ap.String() != "10.0.0.5:9876" || off != 1500 {
		t.Fatalf("%v %d %v", ap, off, err)
	}
	g := NewUniqIDs(netip.MustParseAddr("10.0.0.5"), 77, func() time.Time { return time.Date(2026, 5, 2, 0, 0, 1, 0, time.UTC) })
	a, b := g.Next(), g.Next()
	if a == b || !regexp.MustCompile(`^0A0000050[0-9A-F]{23}$`).MatchString(a) {
		t.Fatalf("minted %s %s", a, b)
	}
}
