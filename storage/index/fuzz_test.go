package index

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/mqgate/mqgate/storage/vfs"
)

// FuzzIndexFile: an index file's bytes come from the disk. Whatever they
// are, Open either drops the file or serves it, and Lookup, Put, Sync and
// a reopen neither panic nor loop. The header CRC is recomputed over the
// fuzzed header, so mutations reach past it into the header's values and
// the slot and entry tables.
func FuzzIndexFile(f *testing.F) {
	const slots, capacity = 8, 16
	for _, n := range []int64{0, 5, 16, 20} {
		fs := vfs.NewMem()
		names := writeIndex(f, Options{FS: fs, Dir: "/x", Slots: slots, Capacity: capacity, LogEnd: 1 << 40}, n,
			func(i int64) uint64 { return uint64(i % 3) })
		b, err := vfs.ReadFile(fs, "/x/"+names[0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(1<<40))
		f.Add(b, int64(45))
	}
	f.Fuzz(func(t *testing.T, b []byte, logEnd int64) {
		if len(b) > 1<<20 {
			return
		}
		if len(b) >= headerSize {
			binary.LittleEndian.PutUint32(b[56:], crc32.Checksum(b[:56], castagnoli))
		}
		fs := vfs.NewMem()
		fs.MkdirAll("/x")
		w, _ := fs.Create("/x/00000000000000000000.idx")
		w.WriteAt(b, 0)
		w.Sync()
		w.Close()
		fs.SyncDir("/x")
		o := Options{FS: fs, Dir: "/x", Slots: slots, Capacity: capacity, LogEnd: max(logEnd, 0)}
		x, err := Open(o)
		if err != nil {
			return
		}
		for h := uint64(0); h < 4; h++ {
			x.Lookup(h, 0, 1<<62, 1000)
			x.Lookup(h, 3, 3, 1000)
		}
		end := x.End()
		for i := int64(0); i < 20; i++ {
			if err := x.Put(uint64(i%3), end+i*10, 10, i); err != nil {
				break
			}
			x.SetEnd(end + i*10 + 10)
		}
		x.Sync()
		x.Close()
		if x, err = Open(o); err == nil {
			x.Lookup(1, 0, 1<<62, 1000)
			x.Close()
		}
	})
}
