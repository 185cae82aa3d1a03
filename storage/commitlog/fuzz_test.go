package commitlog

import (
	"bytes"
	"testing"
)

// FuzzParseSegName: parseSegName never panics; a name it accepts is
// exactly segName of a non-negative base (recovery opens segPath(base),
// so any other spelling would alias, or precede, the real segment); and
// every segment name it writes parses back.
func FuzzParseSegName(f *testing.F) {
	f.Add(segName(0), int64(0))
	f.Add(segName(1<<30), int64(1<<62))
	f.Add("+0000000000000000001.log", int64(-1))
	f.Add("-0000000000000000001.log", int64(1))
	f.Add("99999999999999999999.log", int64(7))
	f.Add("0000000000000000000.log", int64(8))
	f.Add("00000000000000000000.cq", int64(9))
	f.Fuzz(func(t *testing.T, name string, base int64) {
		if v, ok := parseSegName(name); ok && (v < 0 || segName(v) != name) {
			t.Fatalf("%q parsed as base %d (segment name %q)", name, v, segName(v))
		}
		if base < 0 {
			return
		}
		if v, ok := parseSegName(segName(base)); !ok || v != base {
			t.Fatalf("%q parses to %d %v", segName(base), v, ok)
		}
	})
}

// FuzzStagingHeader: the header of a ring file (memory that outlives the
// process, read back by Open) never panics the decoder; what it accepts
// encodes back to the same bytes, and every header the log writes is
// accepted as written.
func FuzzStagingHeader(f *testing.F) {
	f.Add(encodeStagingHeader(stagingHeader{size: 16 << 20, id: [16]byte{1, 2, 3}}), 16<<20)
	f.Add(make([]byte, stagingFixed+4), 4096)
	f.Add(encodeStagingHeader(stagingHeader{size: 4096, dir: "/var/lib/mqgate/store/commitlog"}), 8192)
	f.Add([]byte(stagingMagic), -1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		size := int64(n)
		if h, err := decodeStagingHeader(b); err == nil {
			if h.size <= 0 || h.size%4096 != 0 {
				t.Fatalf("accepted size %d", h.size)
			}
			if enc := encodeStagingHeader(h); !bytes.Equal(enc, b[:len(enc)]) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", b, h, enc)
			}
		}
		if size <= 0 || size%4096 != 0 || size > 1<<40 {
			return
		}
		h := stagingHeader{size: size, id: [16]byte{byte(size)}, dir: string(b)}
		if len(h.dir) > stagingMaxPath {
			h.dir = "" // not recorded
		}
		if got, err := decodeStagingHeader(encodeStagingHeader(h)); err != nil || got != h {
			t.Fatalf("%+v reads back as %+v, %v", h, got, err)
		}
	})
}
