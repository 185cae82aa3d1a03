package commitlog

import (
	"bytes"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
)

// refFind is the obvious search FindValid must agree with: the first
// offset at or after off where a valid record naming its own position
// starts and ends within data.
func refFind(data []byte, off int64, maxRec int) (int64, bool) {
	for p := max(off, 0); p < int64(len(data)); p++ {
		size, err := message.Verify(data[p:], maxRec)
		if err != nil {
			continue
		}
		if h, _ := message.ParseHeader(data[p:]); h.PhysOffset == p && p+int64(size) <= int64(len(data)) {
			return p, true
		}
	}
	return 0, false
}

func checkFind(t *testing.T, data []byte, off int64) {
	const maxRec = 4096
	want, wantOK := refFind(data, off, maxRec)
	got, ok, err := FindValid(bytes.NewReader(data), off, int64(len(data)), 0, maxRec)
	if err != nil {
		t.Fatal(err)
	}
	if ok != wantOK || ok && got != want {
		t.Fatalf("FindValid from %d = %d %v, reference %d %v", off, got, ok, want, wantOK)
	}
}

func TestFindValidAfterDamage(t *testing.T) {
	data := logBytes(t, 30)
	for i := 0; i < len(data); i += 11 {
		c := bytes.Clone(data)
		c[i] ^= 0x5a
		checkFind(t, c, 0)
		checkFind(t, c, int64(i))
		checkFind(t, c, int64(i)+1)
	}
	checkFind(t, make([]byte, 5000), 0)
	checkFind(t, data[:len(data)-1], int64(len(data))-200)
}

// TestFindValidAcrossChunks: a record whose magic straddles FindValid's
// read chunks is found.
func TestFindValidAcrossChunks(t *testing.T) {
	const chunk = 1 << 20
	for _, at := range []int64{chunk - 6, chunk - 5, chunk - 4, chunk - 3, chunk - 2} {
		data := make([]byte, at)
		data = append(data, record(t, at, "x")...)
		checkFind(t, data, 0)
	}
}

// FuzzFindValid: the search for the next valid record after damage never
// panics and finds what the byte-by-byte reference finds.
func FuzzFindValid(f *testing.F) {
	data := logBytes(f, 4)
	f.Add(data, uint16(0))
	c := bytes.Clone(data)
	c[3] ^= 1
	f.Add(c, uint16(1))
	f.Add(append(make([]byte, 17), data...), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, off uint16) {
		checkFind(t, data, int64(off))
	})
}
