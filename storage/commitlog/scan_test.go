package commitlog

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
)

// record builds a sealed record at position phys.
func record(t testing.TB, phys int64, body string) []byte {
	m := &message.Message{Topic: "T", Body: []byte(body)}
	m.Set(message.PropTags, "x")
	b, crc, err := message.Encode(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	message.Seal(b, crc, phys, 0, 1)
	return b
}

func logBytes(t testing.TB, n int) []byte {
	var out []byte
	for i := 0; i < n; i++ {
		out = append(out, record(t, int64(len(out)), fmt.Sprintf("body-%d-%s", i, bytes.Repeat([]byte("x"), i*7)))...)
	}
	return out
}

// refScan is the obvious whole-buffer scan ScanValid must agree with.
func refScan(data []byte, maxRec int) (int64, int) {
	p, n := 0, 0
	for p < len(data) {
		size, err := message.Verify(data[p:], maxRec)
		if err != nil {
			break
		}
		h, _ := message.ParseHeader(data[p:])
		if h.PhysOffset != int64(p) {
			break
		}
		p += size
		n++
	}
	return int64(p), n
}

func checkScan(t *testing.T, data []byte, chunk int) {
	const maxRec = 4096
	want, wantN := refScan(data, maxRec)
	got, gotN, err := ScanValid(bytes.NewReader(data), 0, int64(len(data)), 0, maxRec, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || gotN != wantN {
		t.Fatalf("ScanValid = %d (%d records), reference %d (%d records), chunk %d", got, gotN, want, wantN, chunk)
	}
}

func TestScanValidTornAndCorrupt(t *testing.T) {
	data := logBytes(t, 40)
	for cut := 0; cut <= len(data); cut += 7 {
		checkScan(t, data[:cut], 4096)
		checkScan(t, data[:cut], 100)
	}
	for i := 0; i < len(data); i += 13 {
		c := bytes.Clone(data)
		c[i] ^= 0x5a
		checkScan(t, c, 4096)
	}
}

// FuzzScanValid: the chunked recovery scan never panics and always finds
// exactly the longest valid prefix (what the whole-buffer reference finds).
func FuzzScanValid(f *testing.F) {
	data := logBytes(f, 5)
	f.Add(data, uint16(4096))
	f.Add(data[:len(data)-3], uint16(200))
	f.Add(append(bytes.Clone(data), 0, 0, 0, 0), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		checkScan(t, data, int(chunk))
	})
}
