package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// Worked examples of a frame with a JSON and a binary header: a Go client asking
// the route of topic T1.
func TestWorkedExamplesDecode(t *testing.T) {
	jsonHdr := `{"code":105,"language":"GO","version":317,"opaque":2,"flag":0,"remark":"","extFields":{"topic":"T1"}}`
	frame := append([]byte{0, 0, 0, 0x65}, jsonHdr...)
	c, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	want := Command{Code: 105, Language: "GO", Version: 317, Opaque: 2, Ext: map[string]string{"topic": "T1"}, Serialize: JSON}
	if !same(c, &want) {
		t.Fatalf("JSON example: %+v", c)
	}
	bin, _ := hex.DecodeString("01000022" + "0069" + "09" + "013d" + "00000002" + "00000000" + "00000000" + "0000000d" + "0005" + "746f706963" + "00000002" + "5431")
	c, err = Decode(bin)
	if err != nil {
		t.Fatal(err)
	}
	want.Serialize = RocketMQ
	if !same(c, &want) {
		t.Fatalf("binary example: %+v", c)
	}
	// And our encoder writes the binary example byte for byte.
	out, err := AppendFrame(nil, &Command{Code: 105, Language: "GO", Version: 317, Opaque: 2, Ext: map[string]string{"topic": "T1"}}, RocketMQ)
	if err != nil || !bytes.Equal(out[4:], bin) || len(out) != 4+0x26 {
		t.Fatalf("binary encode: % x (%v)", out, err)
	}
}

func same(a, b *Command) bool {
	if a.Code != b.Code || a.Language != b.Language || a.Version != b.Version || a.Opaque != b.Opaque || a.Flag != b.Flag ||
		a.Remark != b.Remark || !bytes.Equal(a.Body, b.Body) || a.Serialize != b.Serialize || len(a.Ext) != len(b.Ext) {
		return false
	}
	for k, v := range a.Ext {
		if b.Ext[k] != v {
			return false
		}
	}
	return true
}

func TestRoundTripBothHeaderTypes(t *testing.T) {
	cmds := []*Command{
		{Code: 0, Language: "JAVA", Version: 479, Opaque: -7, Flag: FlagResponse, Remark: "ok \"quoted\" \x01\x02 é",
			Ext: map[string]string{"msgId": "C0A8", "properties": "TAGS\x01a\x02KEYS\x01k1 k2\x02", "": "empty key"}, Body: []byte("body\x00bytes")},
		{Code: 200050, Language: "GO", Opaque: 1 << 30, Flag: FlagOneway},
		{Code: 34, Body: bytes.Repeat([]byte{0xff}, 1000)},
	}
	for _, c := range cmds {
		for _, typ := range []byte{JSON, RocketMQ} {
			if typ == RocketMQ && c.Code > 32767 {
				if _, err := AppendFrame(nil, c, typ); err == nil {
					t.Fatalf("code %d encoded in a binary header", c.Code)
				}
				continue
			}
			b, err := AppendFrame(nil, c, typ)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ReadFrame(bytes.NewReader(b), DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(f)
			if err != nil {
				t.Fatalf("type %d: %v", typ, err)
			}
			want := *c
			want.Serialize = typ
			if want.Language == "" {
				want.Language = "JAVA"
			}
			if !same(got, &want) {
				t.Fatalf("type %d:\n got %.300v\nwant %.300v", typ, got, &want)
			}
		}
	}
}

// What Go v2.1.2 can decode: every ext value a JSON string,
// code and version plain numbers, compact.
func TestJSONHeaderIsWhatGoClientsDecode(t *testing.T) {
	b, _ := AppendFrame(nil, &Command{Code: 17, Version: 479, Opaque: 3, Flag: 1, Ext: map[string]string{"offset": "12", "b": "true"}}, JSON)
	hdr := string(b[8:])
	for _, want := range []string{`"offset":"12"`, `"b":"true"`, `"code":17,`, `"version":479,`} {
		if !strings.Contains(hdr, want) {
			t.Fatalf("header %s lacks %s", hdr, want)
		}
	}
	if strings.ContainsAny(hdr, "\n ") {
		t.Fatalf("header is not compact: %s", hdr)
	}
}

func TestLenientExtValues(t *testing.T) {
	hdr := `{"code":34,"extFields":{"a":"x","n":12,"t":true,"z":null},"language":7,"remark":null,"unknown":{"deep":[1,2]}}`
	c, err := Decode(append([]byte{0, 0, 0, byte(len(hdr))}, hdr...))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ext["a"] != "x" || c.Ext["n"] != "12" || c.Ext["t"] != "true" || len(c.Ext) != 3 || c.Language != "" {
		t.Fatalf("%+v", c)
	}
}

func TestMalformedFramesAreErrors(t *testing.T) {
	frames := map[string][]byte{
		"short":             {0, 0},
		"header too long":   {0, 0, 0, 200, '{', '}'},
		"unknown type":      {5, 0, 0, 2, '{', '}'},
		"bad JSON":          {0, 0, 0, 3, '{', '"', 'c'},
		"no code":           append([]byte{0, 0, 0, 2}, "{}"...),
		"code not int32":    append([]byte{0, 0, 0, 18}, `{"code":99999999999}`[:18]...),
		"ext not a string":  append([]byte{0, 0, 0, 31}, `{"code":1,"extFields":{"a":[]}}`...),
		"binary short":      {1, 0, 0, 3, 0, 1, 2},
		"binary remark len": append([]byte{1, 0, 0, 21}, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0),
	}
	for name, f := range frames {
		if c, err := Decode(f); err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0x7f, 0, 0, 0}), 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 3}), 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("length 3: %v", err)
	}
}

func TestJSONStringEscaping(t *testing.T) {
	for _, s := range []string{"plain", "q\"b\\", "\x00\x01\x1f\t\n", "bad\xffutf8", "é漢"} {
		got := string(AppendJSONString(nil, s))
		hdr := `{"code":1,"remark":` + got + `}`
		c, err := Decode(append([]byte{0, 0, 0, byte(len(hdr))}, hdr...))
		if err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); c.Remark != want {
			t.Fatalf("%q → %s → %q", s, got, c.Remark)
		}
	}
}
