package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"strconv"
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

// FuzzSalvageFiles: the salvage mark and plan decoders never panic, and
// what they accept is what the writer would write for it.
func FuzzSalvageFiles(f *testing.F) {
	f.Add([]byte(salvageMarkPrefix + "65100\n"))
	f.Add([]byte(salvageMarkPrefix + "-1\n"))
	f.Add([]byte(`[{"group":"G","topic":"T","queue":0,"From":30,"To":29}]`))
	f.Add([]byte(`[{"group":"","topic":"T","queue":-1,"From":-3,"To":0}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if from, err := parseSalvageMark(b); err == nil {
			if again, err := parseSalvageMark([]byte(salvageMarkPrefix + strconv.FormatInt(from, 10) + "\n")); err != nil || again != from {
				t.Fatalf("%q: position %d does not survive a rewrite: %d %v", b, from, again, err)
			}
		}
		if moves, err := decodePlan(b); err == nil {
			out, err := json.Marshal(moves)
			if err != nil {
				t.Fatal(err)
			}
			again, err := decodePlan(out)
			if err != nil || len(again) != len(moves) {
				t.Fatalf("%q: re-encoded plan %s: %v", b, out, err)
			}
			for i := range moves {
				if again[i] != moves[i] {
					t.Fatalf("%q: move %d changed: %+v, %+v", b, i, moves[i], again[i])
				}
			}
		}
	})
}
