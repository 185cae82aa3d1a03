package commitlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// cutLog writes a log of n records in segments of about 2 KiB to /log on
// a new file system, all fsynced, and returns it with each record's
// position.
func cutLog(t *testing.T, n int) (*vfs.MemFS, []int64) {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/log"); err != nil {
		t.Fatal(err)
	}
	var pos []int64
	var seg []byte
	base := int64(0)
	write := func() {
		f, err := fs.Create(segPath("/log", base))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(seg, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		base += int64(len(seg))
		seg = nil
	}
	for i := 0; i < n; i++ {
		p := base + int64(len(seg))
		seg = append(seg, record(t, p, fmt.Sprintf("body-%d", i))...)
		pos = append(pos, p)
		if len(seg) > 2048 {
			write()
		}
	}
	if len(seg) > 0 {
		write()
	}
	if err := fs.SyncDir("/log"); err != nil {
		t.Fatal(err)
	}
	return fs, pos
}

// positions walks r from from and returns the positions of its records.
func positions(t *testing.T, r *Reader, from int64) map[int64]bool {
	t.Helper()
	out := map[int64]bool{}
	if err := r.Walk(from, 4096, func(p int64, b []byte) error {
		if h, _ := message.ParseHeader(b); h.PhysOffset != p {
			t.Fatalf("record at %d names %d", p, h.PhysOffset)
		}
		out[p] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A Cut that fails at any operation, followed by a power loss, leaves
// every record after the cut in the log or in the save directory, and
// never a log whose segments have a gap (Open would drop the segments
// after it). A completed Cut leaves the log ending at the cut and every
// record after it readable from the save directory at its position.
func TestCutCrashKeepsEveryRecord(t *testing.T) {
	base, pos := cutLog(t, 120)
	cutAt := pos[40]
	for k := 1; ; k++ {
		mem := base.CrashClone(nil)
		ops := 0
		efs := vfs.NewErrorFS(mem, func(op vfs.Op, _ string) error {
			if op == vfs.OpRead || op == vfs.OpList || op == vfs.OpOpen {
				return nil
			}
			if ops++; ops == k {
				return errors.New("injected")
			}
			return nil
		})
		_, err := Cut(efs, "/log", cutAt, "/save")
		crashed := mem.CrashClone(nil)
		live, rerr := OpenReader(crashed, "/log")
		if rerr != nil {
			t.Fatal(rerr)
		}
		res, cerr := live.Check(4096)
		if cerr != nil {
			t.Fatal(cerr)
		}
		for _, d := range res.Damage {
			if d.Gap {
				t.Fatalf("step %d: the log has a gap at %d: Open would drop what follows", k, d.Pos)
			}
		}
		kept := positions(t, live, cutAt)
		live.Close()
		if _, _, serr := crashed.Stat("/save"); serr == nil {
			saved, err := OpenSaved(crashed, "/save")
			if err != nil {
				t.Fatal(err)
			}
			for p := range positions(t, saved, cutAt) {
				kept[p] = true
			}
			saved.Close()
		}
		for _, p := range pos[40:] {
			if !kept[p] {
				t.Fatalf("step %d: the record at %d is neither in the log nor saved", k, p)
			}
		}
		if err == nil {
			if ops >= k {
				continue
			}
			if res.End != cutAt {
				t.Fatalf("a completed cut left the log ending at %d, want %d", res.End, cutAt)
			}
			return
		}
	}
}
