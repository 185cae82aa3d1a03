package vfs

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func testFS(t *testing.T, fs FS, dir string) {
	if err := fs.MkdirAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "a", "f")
	f, err := fs.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 3); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Size(); n != 8 {
		t.Fatalf("size %d", n)
	}
	b := make([]byte, 8)
	if _, err := f.ReadAt(b, 0); err != nil || string(b[3:]) != "hello" || b[0] != 0 {
		t.Fatalf("read %q %v", b, err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fs.Rename(p, p+"2"); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List(filepath.Join(dir, "a"))
	if len(names) != 1 || names[0] != "f2" {
		t.Fatalf("list %v", names)
	}
	if _, err := fs.Open(p); !IsNotExist(err) {
		t.Fatalf("open renamed: %v", err)
	}
	if err := WriteFileAtomic(fs, p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(fs, p); err != nil || string(b) != "x" {
		t.Fatalf("%q %v", b, err)
	}
	l, err := fs.Lock(filepath.Join(dir, "LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lock(filepath.Join(dir, "LOCK")); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	l.Close()
	if l, err = fs.Lock(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if u, err := fs.Usage(dir); err != nil || u.Total == 0 {
		t.Fatalf("usage %+v %v", u, err)
	}
	if err := fs.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.Stat(filepath.Join(dir, "a")); !IsNotExist(err) {
		t.Fatalf("stat removed: %v", err)
	}
}

func TestOS(t *testing.T)  { testFS(t, Default, t.TempDir()) }
func TestMem(t *testing.T) { testFS(t, NewMem(), "/x") }

func TestOSMap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m")
	f, _ := Default.Create(p)
	f.WriteAt([]byte("mapped"), 0)
	b, unmap, err := f.(Mapper).Map(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "mapped" {
		t.Fatal("map content")
	}
	f.WriteAt([]byte("MAPPED"), 0) // shared mapping sees later writes
	if string(b[:6]) != "MAPPED" {
		t.Fatal("map not shared")
	}
	unmap()
	f.Close()
	os.Remove(p)
}

func TestMemCrash(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d")
	f, _ := m.Create("/d/synced")
	f.WriteAt([]byte("durable"), 0)
	f.Sync()
	f.WriteAt([]byte("-lost"), 7)
	g, _ := m.Create("/d/nodirsync")
	g.WriteAt([]byte("x"), 0)
	g.Sync()
	m.SyncDir("/d") // both names durable now
	h, _ := m.Create("/d/unsynced-name")
	h.Sync()
	f.WriteAt([]byte("D"), 0) // overwrite of durable bytes, not synced
	c := m.CrashClone(nil)
	if b, _ := ReadFile(c, "/d/synced"); string(b) != "durable" {
		t.Fatalf("synced file after crash %q", b)
	}
	if _, _, err := c.Stat("/d/unsynced-name"); !IsNotExist(err) {
		t.Fatal("unsynced name survived")
	}
	if b, _ := ReadFile(m, "/d/synced"); string(b) != "Durable-lost" {
		t.Fatalf("live view %q", b)
	}
	// Torn tails: a random prefix of the unsynced append may survive.
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		b, _ := ReadFile(m.CrashClone(rand.New(rand.NewSource(int64(i)))), "/d/synced")
		seen[string(b[:min(len(b), 8)])+string(rune(len(b)))] = true
		if string(b[:7]) != "durable" {
			t.Fatalf("torn clone broke durable bytes: %q", b)
		}
	}
	if len(seen) < 3 {
		t.Fatalf("torn tails not varied: %v", seen)
	}
	m.SetCapacity(30)
	if _, err := f.WriteAt(make([]byte, 100), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("capacity: %v", err)
	}
}

// TestMemTearOverwrites: with SetTearOverwrites, a crash keeps a random
// prefix of unsynced overwrites of durable bytes (such as records written
// into a pre-zeroed tail), never anything past it, and never changes
// bytes before the first overwritten one.
func TestMemTearOverwrites(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d")
	m.SetTearOverwrites(func(name string) bool { return name == "/d/f" })
	f, _ := m.Create("/d/f")
	f.WriteAt([]byte("head"), 0)
	f.WriteAt(make([]byte, 12), 4) // zero tail
	f.Sync()
	m.SyncDir("/d")
	f.WriteAt([]byte("RECORD"), 4) // not synced
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		b, _ := ReadFile(m.CrashClone(rand.New(rand.NewSource(int64(i)))), "/d/f")
		if len(b) != 16 || string(b[:4]) != "head" {
			t.Fatalf("clone %q", b)
		}
		n := 0
		for n < 6 && b[4+n] == "RECORD"[n] {
			n++
		}
		for _, c := range b[4+n:] {
			if c != 0 {
				t.Fatalf("clone %q: more than a prefix of the overwrite", b)
			}
		}
		seen[n] = true
	}
	if !seen[0] || !seen[6] || len(seen) < 4 {
		t.Fatalf("torn overwrites not varied: %v", seen)
	}
}

func TestErrorFS(t *testing.T) {
	e := NewErrorFS(NewMem(), func(op Op, path string) error {
		if op == OpSync {
			return syscall.EIO
		}
		return nil
	})
	e.MkdirAll("/d")
	f, err := e.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v", err)
	}
	e.SetInject(nil)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestOSWriteBehind: the OS file starts write-back of written pages and
// drops them from the page cache, and the kernel's refusal of a bad range
// comes back as an error.
func TestOSWriteBehind(t *testing.T) {
	f, err := Default.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	w, ok := f.(WriteBehind)
	if !ok {
		t.Fatal("the OS file does not start write-back")
	}
	if err := w.StartWriteBack(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := w.StartWriteBack(-1, 1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("negative offset: %v, want EINVAL", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.DropCache(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := w.DropCache(0, -1); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("negative length: %v, want EINVAL", err)
	}
	b := make([]byte, 1<<20)
	if n, err := f.ReadAt(b, 0); err != nil || n != len(b) {
		t.Fatalf("read back after the drop: %d, %v", n, err)
	}
}
