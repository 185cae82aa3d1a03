package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
)

func testMsgs(n int) []*message.Message {
	var ms []*message.Message
	for i := range n {
		m := &message.Message{Topic: "t", QueueID: int32(i % 2), BornTime: int64(i), BornHost: "b:1", Body: []byte(fmt.Sprint("body", i))}
		m.Set(message.PropUniqKey, fmt.Sprint("id", i))
		ms = append(ms, m)
	}
	return ms
}

func TestAppendEntryRoundTrip(t *testing.T) {
	in := &appendEntry{proposer: 7, seq: 42, storeTime: 1_700_000_000_123, geo: geometry{1 << 30, 4 << 20, 4 << 20}, storeHost: "10.0.0.1:8081", msgs: testMsgs(3)}
	b, err := encodeAppend(in, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeAppend(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if out.proposer != 7 || out.seq != 42 || out.storeTime != in.storeTime || out.geo != in.geo || out.storeHost != in.storeHost || len(out.msgs) != 3 {
		t.Fatalf("decoded %+v", out)
	}
	for i, m := range out.msgs {
		w := in.msgs[i]
		if m.Topic != w.Topic || m.QueueID != w.QueueID || m.BornTime != w.BornTime || !bytes.Equal(m.Body, w.Body) || m.UniqKey() != w.UniqKey() {
			t.Fatalf("message %d: %+v, want %+v", i, m, w)
		}
	}
	// Every truncation and every flipped byte of the records is refused.
	for n := range len(b) {
		if _, err := decodeAppend(b[:n], 1<<20); !errors.Is(err, ErrBadEntry) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	c := bytes.Clone(b)
	c[len(c)-3] ^= 0x40
	if _, err := decodeAppend(c, 1<<20); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("damaged body: %v", err)
	}
	if _, err := encodeAppend(&appendEntry{msgs: testMsgs(1)}, 10); !errors.Is(err, errTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
}

func FuzzDecodeAppend(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		b, err := encodeAppend(&appendEntry{proposer: 1, seq: 2, storeTime: 3, storeHost: "h", msgs: testMsgs(n)}, 1<<20)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1})
	f.Add([]byte{1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeAppend(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("error not ErrBadEntry: %v", err)
			}
			return
		}
		// What decodes encodes back to the same bytes.
		again, err := encodeAppend(e, 1<<16)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(appliedState{index: 9, logEnd: 1234, storeTime: 5}))
	f.Add([]byte("MQA1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeState(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeState(s), b) {
			t.Fatalf("state %+v re-encodes differently", s)
		}
	})
}
