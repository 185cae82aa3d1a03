// Package vfs is the file-system seam of the store.
//
// It owns the FS and File interfaces and three implementations:
//
//   - Default: the real file system (pread/pwrite, fdatasync,
//     flock, statfs, read-only mmap of files, blocks reserved ahead of
//     the writes that fill them: Reserver; and starting the write-back of
//     written pages ahead of an fsync, or dropping them from the page
//     cache: WriteBehind, DropPages).
//   - NewMem(): an in-memory file system that also tracks durability the
//     way a strict POSIX file system does: file contents become durable on
//     File.Sync, directory entries (create, rename, remove) on SyncDir of
//     the parent. (*MemFS).CrashClone returns the file system a machine
//     would see after power loss — the "crash FS" of the tests: unsynced
//     bytes and unsynced names are dropped, optionally keeping a random
//     prefix of unsynced appends (a torn tail).
//   - NewErrorFS(fs, inject): wraps any FS and lets a test fail chosen
//     operations (ENOSPC on write, EIO on sync, ...).
//
// Outside FS, shm.go maps files of a memory file system (tmpfs) for the
// commit log's staging ring: memory that outlives the process.
//
// Writes go through WriteAt: the store always knows the position it
// writes, so a failed or partial write can be retried or truncated away.
// MemFS and ErrorFS files are not Reservers, so the crash and fault tests
// that use them write without reserving blocks; reservation is tested on
// the OS file system.
//
// vfs imports only the standard library and golang.org/x/sys. It must not
// import any other mqgate package.
package vfs
