package commitlog

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mqgate/mqgate/storage/vfs"
)

// wbFS is the OS file system with the write-back starts and the cache
// drops of its files recorded.
type wbFS struct {
	vfs.FS
	mu     sync.Mutex
	starts map[string][][2]int64 // segment file name: (offset, length) in call order
	drops  [][2]int64            // log positions [from, to) dropped, in call order
}

type wbFile struct {
	vfs.File
	fs   *wbFS
	name string
}

func (f wbFile) Map(n int) ([]byte, func() error, error) { return f.File.(vfs.Mapper).Map(n) }
func (f wbFile) Reserve(off, n int64) error              { return f.File.(vfs.Reserver).Reserve(off, n) }

func (f wbFile) StartWriteBack(off, n int64) error {
	f.fs.mu.Lock()
	f.fs.starts[f.name] = append(f.fs.starts[f.name], [2]int64{off, n})
	f.fs.mu.Unlock()
	return f.File.(vfs.WriteBehind).StartWriteBack(off, n)
}

func (f wbFile) DropCache(off, n int64) error {
	base, ok := parseSegName(f.name)
	if !ok {
		panic(f.name)
	}
	f.fs.mu.Lock()
	f.fs.drops = append(f.fs.drops, [2]int64{base + off, base + off + n})
	f.fs.mu.Unlock()
	return f.File.(vfs.WriteBehind).DropCache(off, n)
}

func (w *wbFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return wbFile{f, w, filepath.Base(name)}, nil
}

func (w *wbFS) Create(name string) (vfs.File, error) {
	f, err := w.FS.Create(name)
	return w.wrap(f, name, err)
}

func (w *wbFS) OpenRW(name string) (vfs.File, error) {
	f, err := w.FS.OpenRW(name)
	return w.wrap(f, name, err)
}

// TestWriteBehind: the flusher starts the write-back of each whole
// window of writeBehindWindow bytes it writes, once, in order, from each
// segment's start, and not with NoWriteBehind. With KeepCached it drops
// the cached pages of each window once it is KeepCached past it, across
// segments, in order, and nothing more recent. The records read back
// whole, dropped or not.
func TestWriteBehind(t *testing.T) {
	for _, c := range []struct {
		off  bool
		keep int64
	}{{false, 0}, {true, 0}, {false, 16 << 20}, {true, 8 << 20}} {
		off := c.off
		fs := &wbFS{FS: vfs.Default, starts: map[string][][2]int64{}}
		dir := t.TempDir()
		o := stagingOpts(fs, dir, t.TempDir(), 40<<20)
		o.NoWriteBehind = off
		o.KeepCached = c.keep
		o.MaxRecordSize = 1 << 20
		l, _ := openLog(t, o, Recovery{From: -1, CleanEnd: -1})
		if l.stg == nil {
			t.Fatal("no staging ring")
		}
		l.Start()
		var ents []Entry
		var data [][]byte
		for i := 0; l.staged.Load() < 64<<20; i++ {
			r := bodyRecord(t, bytes.Repeat([]byte{byte(i)}, 60<<10+i%4096))
			e, _, err := l.Append(context.Background(), []Record{r})
			if err != nil {
				t.Fatal(err)
			}
			ents, data = append(ents, e[0]), append(data, r.Data)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		segs := l.Segments()
		if len(segs) != 2 {
			t.Fatalf("%d segments, want 2", len(segs))
		}
		fs.mu.Lock()
		for _, s := range segs {
			got := fs.starts[segName(s.Base)]
			want := int((s.End - s.Base) / writeBehindWindow)
			if off {
				want = 0
			}
			if len(got) != want {
				t.Errorf("NoWriteBehind %v: segment %d..%d: %d write-back starts %v, want %d", off, s.Base, s.End, len(got), got, want)
			}
			for i, c := range got {
				if c != [2]int64{int64(i) * writeBehindWindow, writeBehindWindow} {
					t.Errorf("segment %d: start %d is %v, want window %d", s.Base, i, c, i)
				}
			}
		}
		// Dropped: whole windows from the start, each as far as KeepCached
		// allows, split at the segment boundary.
		flushed := l.flushed.Load()
		wantEnd := int64(0)
		if c.keep > 0 && flushed >= c.keep+writeBehindWindow {
			wantEnd = (flushed - c.keep) / writeBehindWindow * writeBehindWindow
		}
		at := int64(0)
		for _, d := range fs.drops {
			if d[0] != at || d[1] <= d[0] {
				t.Fatalf("keep %d: drops %v: not contiguous from 0", c.keep, fs.drops)
			}
			at = d[1]
		}
		if at != wantEnd {
			t.Errorf("keep %d, flushed %d: dropped up to %d, want %d (%v)", c.keep, flushed, at, wantEnd, fs.drops)
		}
		if c.keep > 0 && len(fs.drops) < 3 {
			t.Errorf("keep %d: drops %v, want the windows before %d, one split by the roll", c.keep, fs.drops, wantEnd)
		}
		fs.mu.Unlock()
		for i, e := range ents {
			if b, err := l.Read(e.PhysOffset, int(e.Size)); err != nil || !bytes.Equal(b, data[i]) {
				t.Fatalf("record %d at %d: %v", i, e.PhysOffset, err)
			}
		}
		if err := l.Stop(false); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
}

func (w *wbFS) CreateShared(name string, size int64) ([]byte, func() error, error) {
	return w.FS.(vfs.SharedMemory).CreateShared(name, size)
}
