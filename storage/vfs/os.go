package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Sync() error { return unix.Fdatasync(int(f.Fd())) }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f osFile) Map(length int) ([]byte, func() error, error) {
	if length <= 0 {
		return nil, nil, fmt.Errorf("vfs: map %s: bad length %d", f.Name(), length)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, length, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("vfs: mmap %s: %w", f.Name(), err)
	}
	return b, func() error { return unix.Munmap(b) }, nil
}

// DropPages removes b's pages (page-aligned, part of a shared file
// mapping) from the mapping; what was stored through it stays in the page
// cache, dirty where it was dirty.
func DropPages(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }

func (f osFile) Reserve(off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("%w: %s: %w", ErrNoAllocate, f.Name(), err)
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) RemoveAll(name string) error          { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}

func (osFS) Stat(name string) (int64, bool, error) {
	st, err := os.Stat(name)
	if err != nil {
		return 0, false, err
	}
	return st.Size(), st.IsDir(), nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("vfs: fsync dir %s: %w", dir, err)
	}
	return nil
}

type osLock struct{ f *os.File }

func (l osLock) Close() error {
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("vfs: flock %s: %w", name, err)
	}
	return osLock{f}, nil
}

func (osFS) Usage(dir string) (DiskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return DiskUsage{}, fmt.Errorf("vfs: statfs %s: %w", dir, err)
	}
	return DiskUsage{Total: st.Blocks * uint64(st.Bsize), Free: st.Bavail * uint64(st.Bsize)}, nil
}

func (f osFile) StartWriteBack(off, n int64) error {
	for {
		err := unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func (f osFile) DropCache(off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
