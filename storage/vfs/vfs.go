package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// File is an open file. A File has one owner; concurrent ReadAt calls are
// safe, writes must be serialized by the owner.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's contents durable (fdatasync).
	Sync() error
	// Truncate changes the file size.
	Truncate(size int64) error
	// Size returns the current file size.
	Size() (int64, error)
}

// Mapper is implemented by files that can be memory-mapped read-only.
// The returned slice may be longer than the file; bytes past the end of
// the file must not be touched (SIGBUS). Unmap with the returned func.
type Mapper interface {
	Map(length int) (data []byte, unmap func() error, err error)
}

// Reserver is implemented by files whose disk blocks can be reserved
// ahead of the writes that fill them.
type Reserver interface {
	// Reserve reserves disk blocks for [off, off+n) without changing the
	// file size (fallocate FALLOC_FL_KEEP_SIZE): writes there extend the
	// file without allocating, so they cannot fail for want of space.
	// ErrNoAllocate where unsupported.
	Reserve(off, n int64) error
}

// SharedMemory is implemented by file systems that can hold memory that
// outlives the process but not the machine, as a file of a memory file
// system (tmpfs) does: the commit log's staging ring.
type SharedMemory interface {
	// CreateShared creates the file name (replacing any old one: its
	// contents are gone) as size bytes that read as zeros, and maps it
	// shared and writable: what is stored through the returned slice is
	// the file's contents, read back by Open (after a crash too). Unmap
	// with the returned func.
	CreateShared(name string, size int64) (data []byte, unmap func() error, err error)
}

// ErrNoAllocate: the file system does not support reserving blocks.
var ErrNoAllocate = errors.New("vfs: file system cannot reserve blocks (fallocate)")

// DiskUsage describes the file system holding a directory.
type DiskUsage struct {
	Total uint64 // bytes
	Free  uint64 // bytes available to us
}

// UsedPercent is the share of Total that is not Free, 0..100.
func (d DiskUsage) UsedPercent() float64 {
	if d.Total == 0 {
		return 0
	}
	return float64(d.Total-d.Free) * 100 / float64(d.Total)
}

// FS is the file-system interface used by every storage package.
type FS interface {
	// Create creates or truncates a file for reading and writing.
	Create(name string) (File, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat reports whether name exists and whether it is a directory.
	Stat(name string) (size int64, isDir bool, err error)
	// SyncDir makes the directory's entries durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on name (created if missing).
	// It fails with ErrLocked if another holder has it.
	Lock(name string) (io.Closer, error)
	// Usage reports the capacity of the file system holding dir.
	Usage(dir string) (DiskUsage, error)
}

// ErrLocked is returned by Lock when the lock is held elsewhere.
var ErrLocked = errors.New("vfs: locked by another process")

// IsNotExist reports whether err means a missing file.
func IsNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// WriteFileAtomic writes data to name via a temporary file: write, fsync,
// rename, fsync directory. Either the old or the new contents survive a crash.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		fs.Remove(tmp)
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		fs.Remove(tmp)
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// ReadFile reads a whole file.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func sortedNames(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteBehind is implemented by files whose written pages can be sent to
// the device ahead of a Sync.
type WriteBehind interface {
	// StartWriteBack starts writing the dirty pages of [off, off+n) to
	// the device and returns without waiting for them (Linux
	// sync_file_range with SYNC_FILE_RANGE_WRITE only). It makes nothing
	// durable, and it leaves the write-back's own errors to Sync: only a
	// wait would report them, and reporting them there would hide them
	// from the next Sync on the same handle.
	StartWriteBack(off, n int64) error
	// DropCache drops the clean pages of [off, off+n) from the page cache
	// (posix_fadvise DONTNEED): later reads take them from the device.
	// Dirty pages, pages under write-back and pages mapped by a process
	// stay. Like StartWriteBack it neither waits nor reports write-back
	// errors.
	DropCache(off, n int64) error
}
