package grpcserver

import "testing"

func TestBufferPoolClasses(t *testing.T) {
	p := &bufferPool{}
	for _, tc := range []struct{ n, wantCap int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {1100, 2048}, {4096, 4096},
		{36 << 10, 64 << 10}, {8 << 20, 8 << 20}, {8<<20 + 1, 8<<20 + 1},
	} {
		b := p.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.n, len(*b), cap(*b), tc.n, tc.wantCap)
		}
		p.Put(b)
	}
}

func TestBufferPoolReuse(t *testing.T) {
	p := &bufferPool{}
	// sync.Pool may drop what it is given (and does so at random under
	// -race), so reuse is checked over many rounds: at least one Get must
	// return a buffer that was Put, with its old contents (not cleared) and
	// the requested length.
	reused := false
	for i := 0; i < 100 && !reused; i++ {
		b := p.Get(3000)
		(*b)[0] = 0xAB
		last := &(*b)[:cap(*b)][cap(*b)-1] // identifies the backing array
		p.Put(b)
		c := p.Get(2100) // same 4 KiB class
		if len(*c) != 2100 {
			t.Fatalf("len %d, want 2100", len(*c))
		}
		if &(*c)[:cap(*c)][cap(*c)-1] == last {
			reused = true
			if (*c)[0] != 0xAB {
				t.Fatalf("a reused buffer was cleared")
			}
		}
	}
	if !reused {
		t.Fatal("a buffer put back was never handed out again")
	}
}

func TestBufferPoolPutForeign(t *testing.T) {
	p := &bufferPool{}
	for _, c := range []int{0, 100, 3000, 16 << 20} { // not a class size
		b := make([]byte, 10, c+10)
		p.Put(&b) // must not panic or be handed out as a class buffer
	}
	for i := 0; i < 10; i++ {
		if b := p.Get(3000); cap(*b) != 4096 {
			t.Fatalf("cap %d, want 4096", cap(*b))
		}
	}
}
