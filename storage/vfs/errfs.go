package vfs

import (
	"io"
	"sync"
)

// Op names an operation an ErrorFS can fail.
type Op int

const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpMkdir
	OpSyncDir
	OpList
	OpReserve
)

func (o Op) String() string {
	return [...]string{"create", "open", "read", "write", "sync", "truncate", "remove", "rename", "mkdir", "syncdir", "list", "reserve"}[o]
}

// InjectFunc decides whether op on path fails; a nil return lets it run.
type InjectFunc func(op Op, path string) error

// ErrorFS wraps an FS and fails operations chosen by an InjectFunc.
// The injector can be swapped at run time (a disk fills, then frees).
type ErrorFS struct {
	FS
	mu     sync.RWMutex
	inject InjectFunc
}

// NewErrorFS wraps fs; inject may be nil (no failures).
func NewErrorFS(fs FS, inject InjectFunc) *ErrorFS { return &ErrorFS{FS: fs, inject: inject} }

// SetInject replaces the injector.
func (e *ErrorFS) SetInject(f InjectFunc) {
	e.mu.Lock()
	e.inject = f
	e.mu.Unlock()
}

func (e *ErrorFS) fail(op Op, path string) error {
	e.mu.RLock()
	f := e.inject
	e.mu.RUnlock()
	if f == nil {
		return nil
	}
	if err := f(op, path); err != nil {
		return pathErr(op.String(), path, err)
	}
	return nil
}

type errFile struct {
	File
	e    *ErrorFS
	name string
}

func (e *ErrorFS) wrap(f File, name string, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &errFile{File: f, e: e, name: name}, nil
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.fail(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Create(name)
	return e.wrap(f, name, err)
}

func (e *ErrorFS) OpenRW(name string) (File, error) {
	if err := e.fail(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenRW(name)
	return e.wrap(f, name, err)
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.fail(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.Open(name)
	return e.wrap(f, name, err)
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.fail(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e *ErrorFS) Rename(o, n string) error {
	if err := e.fail(OpRename, o); err != nil {
		return err
	}
	return e.FS.Rename(o, n)
}

func (e *ErrorFS) MkdirAll(dir string) error {
	if err := e.fail(OpMkdir, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.fail(OpList, dir); err != nil {
		return nil, err
	}
	return e.FS.List(dir)
}

func (e *ErrorFS) Lock(name string) (io.Closer, error) { return e.FS.Lock(name) }

func (f *errFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.e.fail(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.e.fail(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errFile) Sync() error {
	if err := f.e.fail(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errFile) Truncate(size int64) error {
	if err := f.e.fail(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Reserve passes through when the wrapped file can reserve blocks.
func (f *errFile) Reserve(off, n int64) error {
	r, ok := f.File.(Reserver)
	if !ok {
		return pathErr("fallocate", f.name, ErrNoAllocate)
	}
	if err := f.e.fail(OpReserve, f.name); err != nil {
		return err
	}
	return r.Reserve(off, n)
}

// CreateShared passes through when the wrapped file system has shared
// memory; an injected create failure fails it.
func (e *ErrorFS) CreateShared(name string, size int64) ([]byte, func() error, error) {
	sm, ok := e.FS.(SharedMemory)
	if !ok {
		return nil, nil, pathErr("create", name, errNoSharedMemory)
	}
	if err := e.fail(OpCreate, name); err != nil {
		return nil, nil, err
	}
	return sm.CreateShared(name, size)
}

// Map passes through when the wrapped file can be mapped.
func (f *errFile) Map(length int) ([]byte, func() error, error) {
	if m, ok := f.File.(Mapper); ok {
		return m.Map(length)
	}
	return nil, nil, pathErr("mmap", f.name, errNotMappable)
}

type strErr string

func (s strErr) Error() string { return string(s) }

const (
	errNotMappable    = strErr("file cannot be mapped")
	errNoSharedMemory = strErr("file system has no shared memory")
)
