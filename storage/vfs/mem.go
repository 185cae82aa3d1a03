package vfs

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// MemFS is an in-memory FS that tracks what is durable.
//
// File contents become durable on File.Sync; file names (create, rename,
// remove) become durable on SyncDir of the parent directory. Directories
// made by MkdirAll are durable at once (a simplification: the store never
// depends on an unsynced directory, it syncs the files and entries in it).
// CrashClone returns what survives a power loss.
type MemFS struct {
	mu       sync.Mutex
	files    map[string]*memInode // current namespace
	dirs     map[string]struct{}
	dfiles   map[string]*memInode // durable namespace
	locks    map[string]bool
	capacity atomic.Int64 // 0: unlimited
	used     atomic.Int64 // bytes of file data; updated without mu (lock order is mu → inode)

	tearOverwrites func(name string) bool
}

// SetTearOverwrites makes CrashClone (with an rng) also keep a random
// prefix of unsynced overwrites in the files for which f returns true
// (such as records written into a pre-zeroed log tail). The clone keeps
// the setting.
func (m *MemFS) SetTearOverwrites(f func(name string) bool) {
	m.mu.Lock()
	m.tearOverwrites = f
	m.mu.Unlock()
}

type memInode struct {
	mu      sync.RWMutex
	data    []byte
	durable []byte // shares data's backing array until data is overwritten below len(durable)
	// reserved: blocks are reserved below this file offset, past the
	// data's end where it is larger (Reserve). Not durable.
	reserved int64
	// shared: a file of memory (CreateShared), written through its
	// mapping: never durable, and left out of CrashClone.
	shared bool
}

// footprint is the space the inode takes from the capacity.
// ino.mu must be held.
func (ino *memInode) footprint() int64 {
	if ino.shared {
		return 0 // memory, not disk
	}
	return max(int64(len(ino.data)), ino.reserved)
}

// NewMem returns an empty in-memory file system.
func NewMem() *MemFS {
	return &MemFS{
		files:  map[string]*memInode{},
		dirs:   map[string]struct{}{"/": {}, ".": {}},
		dfiles: map[string]*memInode{},
		locks:  map[string]bool{},
	}
}

// SetCapacity limits the total bytes of file data (0: unlimited). Writes
// that would pass the limit fail with ENOSPC, as a full disk does.
func (m *MemFS) SetCapacity(n int64) { m.capacity.Store(n) }

// CrashClone returns the file system as it would be after a power loss:
// only durable names with their durable contents. If rng is non-nil, a
// random prefix of each file's unsynced appended bytes also survives
// (a torn write), as page cache write-back can do; for files chosen by
// SetTearOverwrites, a prefix of the unsynced changes from the first byte
// that differs (overwrites of durable bytes included) survives instead.
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMem()
	out.capacity.Store(m.capacity.Load())
	out.tearOverwrites = m.tearOverwrites
	for d := range m.dirs {
		out.dirs[d] = struct{}{}
	}
	for name, ino := range m.dfiles {
		if ino.shared {
			continue // memory: a power loss takes it
		}
		ino.mu.RLock()
		data := append([]byte(nil), ino.durable...)
		if rng != nil && m.tearOverwrites != nil && m.tearOverwrites(name) && rng.Intn(2) == 0 {
			// A prefix of the unsynced changes reaches the disk: from the
			// first byte that differs from the durable contents (an
			// overwrite, such as a record written into a pre-zeroed
			// tail, or an append) up to a random point.
			i := 0
			for i < len(data) && i < len(ino.data) && data[i] == ino.data[i] {
				i++
			}
			if i < len(ino.data) && len(ino.data) >= len(data) {
				k := i + rng.Intn(len(ino.data)-i+1)
				if k > len(data) {
					data = append(data, make([]byte, k-len(data))...)
				}
				copy(data[i:k], ino.data[i:k])
			}
		} else if rng != nil && len(ino.data) > len(data) && rng.Intn(2) == 0 {
			k := len(data) + rng.Intn(len(ino.data)-len(data)+1)
			data = append(data, ino.data[len(data):k]...)
		}
		ino.mu.RUnlock()
		n := &memInode{data: data, durable: data[:len(data):len(data)]}
		out.files[name] = n
		out.dfiles[name] = n
		out.used.Add(int64(len(data)))
	}
	return out
}

func clean(name string) string { return filepath.Clean(name) }

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

type memFile struct {
	fs       *MemFS
	ino      *memInode
	name     string
	readonly bool
	mu       sync.Mutex
	closed   bool
}

func (m *MemFS) parentExists(name string) bool {
	_, ok := m.dirs[filepath.Dir(name)]
	return ok
}

func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.parentExists(name) {
		return nil, pathErr("create", name, os.ErrNotExist)
	}
	if _, ok := m.dirs[name]; ok {
		return nil, pathErr("create", name, syscall.EISDIR)
	}
	if old, ok := m.files[name]; ok {
		// O_TRUNC on an existing inode.
		old.mu.Lock()
		m.used.Add(-old.footprint())
		old.data, old.reserved = nil, 0
		old.mu.Unlock()
		return &memFile{fs: m, ino: old, name: name}, nil
	}
	ino := &memInode{}
	m.files[name] = ino
	return &memFile{fs: m, ino: ino, name: name}, nil
}

func (m *MemFS) open(name string, ro bool) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[name]
	if !ok {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	return &memFile{fs: m, ino: ino, name: name, readonly: ro}, nil
}

func (m *MemFS) OpenRW(name string) (File, error) { return m.open(name, false) }
func (m *MemFS) Open(name string) (File, error)   { return m.open(name, true) }

func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino, ok := m.files[name]; ok {
		ino.mu.RLock()
		m.used.Add(-ino.footprint())
		ino.mu.RUnlock()
		delete(m.files, name)
		return nil
	}
	if _, ok := m.dirs[name]; ok {
		prefix := name + "/"
		for f := range m.files {
			if strings.HasPrefix(f, prefix) {
				return pathErr("remove", name, syscall.ENOTEMPTY)
			}
		}
		for d := range m.dirs {
			if strings.HasPrefix(d, prefix) {
				return pathErr("remove", name, syscall.ENOTEMPTY)
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return pathErr("remove", name, os.ErrNotExist)
}

func (m *MemFS) RemoveAll(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := name + "/"
	for f, ino := range m.files {
		if f == name || strings.HasPrefix(f, prefix) {
			ino.mu.RLock()
			m.used.Add(-ino.footprint())
			ino.mu.RUnlock()
			delete(m.files, f)
		}
	}
	for d := range m.dirs {
		if d == name || strings.HasPrefix(d, prefix) {
			delete(m.dirs, d)
		}
	}
	// Removing a tree is made durable at once (the store only removes
	// whole trees it no longer needs, like a deleted topic's queues).
	for f := range m.dfiles {
		if f == name || strings.HasPrefix(f, prefix) {
			delete(m.dfiles, f)
		}
	}
	return nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[oldname]
	if !ok {
		return pathErr("rename", oldname, os.ErrNotExist)
	}
	if !m.parentExists(newname) {
		return pathErr("rename", newname, os.ErrNotExist)
	}
	if old, ok := m.files[newname]; ok && old != ino {
		old.mu.RLock()
		m.used.Add(-old.footprint())
		old.mu.RUnlock()
	}
	delete(m.files, oldname)
	m.files[newname] = ino
	return nil
}

func (m *MemFS) MkdirAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; ; d = filepath.Dir(d) {
		if _, ok := m.files[d]; ok {
			return pathErr("mkdir", d, syscall.ENOTDIR)
		}
		m.dirs[d] = struct{}{}
		if p := filepath.Dir(d); p == d {
			break
		}
	}
	return nil
}

func (m *MemFS) List(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[dir]; !ok {
		return nil, pathErr("readdir", dir, os.ErrNotExist)
	}
	set := map[string]struct{}{}
	for f := range m.files {
		if filepath.Dir(f) == dir {
			set[filepath.Base(f)] = struct{}{}
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			set[filepath.Base(d)] = struct{}{}
		}
	}
	return sortedNames(set), nil
}

func (m *MemFS) Stat(name string) (int64, bool, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino, ok := m.files[name]; ok {
		ino.mu.RLock()
		defer ino.mu.RUnlock()
		return int64(len(ino.data)), false, nil
	}
	if _, ok := m.dirs[name]; ok {
		return 0, true, nil
	}
	return 0, false, pathErr("stat", name, os.ErrNotExist)
}

func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[dir]; !ok {
		return pathErr("fsync", dir, os.ErrNotExist)
	}
	for f := range m.dfiles {
		if filepath.Dir(f) == dir {
			if _, ok := m.files[f]; !ok {
				delete(m.dfiles, f)
			}
		}
	}
	for f, ino := range m.files {
		if filepath.Dir(f) == dir {
			m.dfiles[f] = ino
		}
	}
	return nil
}

type memLock struct {
	m    *MemFS
	name string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.name)
		l.m.mu.Unlock()
	})
	return nil
}

func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[name] {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	m.locks[name] = true
	return &memLock{m: m, name: name}, nil
}

func (m *MemFS) Usage(string) (DiskUsage, error) {
	total := m.capacity.Load()
	if total == 0 {
		total = 1 << 50
	}
	free := total - m.used.Load()
	if free < 0 {
		free = 0
	}
	return DiskUsage{Total: uint64(total), Free: uint64(free)}, nil
}

// grow accounts delta bytes of new data, failing with ENOSPC past capacity.
func (m *MemFS) grow(delta int64) error {
	for {
		u := m.used.Load()
		if c := m.capacity.Load(); delta > 0 && c > 0 && u+delta > c {
			return syscall.ENOSPC
		}
		if m.used.CompareAndSwap(u, u+delta) {
			return nil
		}
	}
}

func (f *memFile) check(write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	if write && f.readonly {
		return syscall.EBADF
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(false); err != nil {
		return 0, pathErr("read", f.name, err)
	}
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// unshare gives the inode a private copy of data if a mutation at off
// would change bytes that the durable snapshot still shares.
func (ino *memInode) unshare(off int64) {
	if off < int64(len(ino.durable)) {
		ino.data = append([]byte(nil), ino.data...)
	}
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check(true); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	end := off + int64(len(p))
	if grow := end - f.ino.footprint(); grow > 0 && !f.ino.shared {
		if err := f.fs.grow(grow); err != nil {
			return 0, pathErr("write", f.name, err)
		}
	}
	f.ino.unshare(off)
	if end > int64(len(f.ino.data)) {
		if end <= int64(cap(f.ino.data)) && int64(len(f.ino.data)) >= int64(len(f.ino.durable)) {
			f.ino.data = f.ino.data[:end]
		} else {
			nd := make([]byte, end, max(end, int64(cap(f.ino.data))*2))
			copy(nd, f.ino.data)
			f.ino.data = nd
		}
	}
	copy(f.ino.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.check(false); err != nil {
		return pathErr("sync", f.name, err)
	}
	f.ino.mu.Lock()
	f.ino.durable = f.ino.data[:len(f.ino.data):len(f.ino.data)]
	f.ino.mu.Unlock()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check(true); err != nil {
		return pathErr("truncate", f.name, err)
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	cur := int64(len(f.ino.data))
	if size < cur || size < f.ino.reserved {
		// Blocks reserved past the cut are freed with it.
		foot := f.ino.footprint()
		if size < cur {
			f.ino.unshare(size)
			f.ino.data = f.ino.data[:size]
		}
		f.ino.reserved = min(f.ino.reserved, size)
		f.fs.grow(f.ino.footprint() - foot)
		if size <= cur {
			return nil
		}
	}
	if size > cur {
		if grow := size - f.ino.footprint(); grow > 0 {
			if err := f.fs.grow(grow); err != nil {
				return pathErr("truncate", f.name, err)
			}
		}
		nd := make([]byte, size)
		copy(nd, f.ino.data)
		f.ino.data = nd
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check(false); err != nil {
		return 0, err
	}
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

// Reserve reserves space for [off, off+n) without changing the file's
// size: it counts against the capacity now (ENOSPC when it does not fit),
// and writes into it later do not.
func (f *memFile) Reserve(off, n int64) error {
	if err := f.check(true); err != nil {
		return pathErr("fallocate", f.name, err)
	}
	if off < 0 || n <= 0 {
		return pathErr("fallocate", f.name, syscall.EINVAL)
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	end := off + n
	if grow := end - f.ino.footprint(); grow > 0 {
		if err := f.fs.grow(grow); err != nil {
			return pathErr("fallocate", f.name, err)
		}
		f.ino.reserved = end
	}
	return nil
}

// CreateShared creates the file name, replacing any old one, as size zero
// bytes of memory that outlive the process (the staging ring of the
// commit log; see SharedMemory) and returns them. What is stored there is
// the file's contents at once, read back by Open; a power loss loses them
// (CrashClone leaves the file out), as it loses a tmpfs.
func (m *MemFS) CreateShared(name string, size int64) ([]byte, func() error, error) {
	name = clean(name)
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, pathErr("create", name, syscall.EINVAL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.parentExists(name) {
		return nil, nil, pathErr("create", name, os.ErrNotExist)
	}
	if old, ok := m.files[name]; ok {
		old.mu.RLock()
		m.used.Add(-old.footprint())
		old.mu.RUnlock()
	}
	delete(m.dfiles, name)
	ino := &memInode{data: make([]byte, size), shared: true}
	m.files[name] = ino
	return ino.data, func() error { return nil }, nil
}
