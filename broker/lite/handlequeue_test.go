package lite

import "testing"

// A lite receipt handle names its parent queue to whoever reads it.
func TestHandleQueue(t *testing.T) {
	c := newCodec([]byte("0123456789abcdef0123"))
	for _, q := range []int32{0, 3, 255} {
		h := c.encode(handle{queue: q, offset: 9, gen: 2, groupHash: 1, parentHash: 2, lite: "device-7"})
		if got, ok := HandleQueue(h); !ok || got != q {
			t.Fatalf("handle of queue %d reads as %d, %v", q, got, ok)
		}
	}
	if _, ok := HandleQueue("r1.AAAA"); ok {
		t.Fatal("a POP handle read as a lite one")
	}
}
