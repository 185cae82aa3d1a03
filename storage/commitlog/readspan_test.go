package commitlog

import (
	"bytes"
	"context"
	"testing"

	"github.com/mqgate/mqgate/storage/vfs"
)

// TestReadSpanBytes: a span longer than mapCopyMax (read with pread) and
// a short one (copied from the mapping) hold exactly the bytes of the
// mapping and of the records read one by one, also when cut at the end
// of a segment.
func TestReadSpanBytes(t *testing.T) {
	const seg = 256 << 10
	l, _ := openLog(t, mappedOpts(vfs.Default, t.TempDir(), seg), Recovery{From: -1, CleanEnd: -1})
	l.Start()
	defer func() { l.Stop(false); l.Close() }()
	var ents []Entry
	for i := 0; len(ents) == 0 || ents[len(ents)-1].PhysOffset < seg+64<<10; i++ {
		body := bytes.Repeat([]byte{byte(i)}, 1000+i%7*300)
		e, _, err := l.Append(context.Background(), []Record{bodyRecord(t, body)})
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, e...)
	}
	end := func(e Entry) int64 { return e.PhysOffset + int64(e.Size) }
	var long, short, cut bool
	for i := 0; i < len(ents); i += 3 {
		for _, n := range []int{2, 9, 40} {
			j := min(i+n, len(ents)) - 1
			pos, size := ents[i].PhysOffset, int(end(ents[j])-ents[i].PhysOffset)
			b, err := l.ReadSpan(pos, size)
			if err != nil {
				t.Fatalf("span at %d size %d: %v", pos, size, err)
			}
			// Records one by one, as far as the span goes.
			var want []byte
			for _, e := range ents[i : j+1] {
				if end(e)-pos > int64(len(b)) {
					break
				}
				r, err := l.Read(e.PhysOffset, int(e.Size))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, r...)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("span at %d size %d (%d bytes): not the records' bytes", pos, size, len(b))
			}
			s, segEnd, err := l.segFor(pos)
			if err != nil {
				t.Fatal(err)
			}
			mm := s.data()
			s.release()
			if mm == nil {
				t.Fatal("segment not mapped")
			}
			if off := pos - s.base; !bytes.Equal(b, mm[off:off+int64(len(b))]) {
				t.Fatalf("span at %d size %d: not the mapping's bytes", pos, size)
			}
			if len(b) < size {
				if pos+int64(len(b)) != segEnd {
					t.Fatalf("span at %d size %d: %d bytes, cut before the segment end %d", pos, size, len(b), segEnd)
				}
				cut = true
			}
			long = long || len(b) > mapCopyMax
			short = short || len(b) <= mapCopyMax
		}
	}
	if !long || !short || !cut {
		t.Fatalf("cases covered: long %v short %v cut %v", long, short, cut)
	}
}
