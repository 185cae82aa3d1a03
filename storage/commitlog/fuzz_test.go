package commitlog

import "testing"

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
