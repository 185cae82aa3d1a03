package storage

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// FuzzDecodeCheckpoint: decodeCheckpoint never panics, and whatever it
// accepts re-encodes to exactly the same bytes. Each input is also tried
// with its CRC made valid, or the fuzzer would never get past it.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(checkpoint{Flushed: 4096, Dispatched: 4000, LogEnd: 4096, LastStoreTime: 1700000000000, Clean: true}.encode())
	f.Add(checkpoint{Flushed: -1, Dispatched: 1 << 40, LogEnd: 7}.encode())
	f.Add(checkpoint{}.encode()[:cpSize-1])
	f.Add(make([]byte, cpSize))
	f.Add([]byte("MQGK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			c, err := decodeCheckpoint(b)
			if err == nil && !bytes.Equal(c.encode(), b) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", b, c, c.encode())
			}
		}
		check(b)
		if len(b) == cpSize {
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[44:], crc32.Checksum(b[:44], castagnoli))
			check(b)
		}
	})
}
