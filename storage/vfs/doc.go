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
// SharedMemory (the OS file system on a tmpfs, shm.go; MemFS) holds the
// commit log's staging ring: memory that outlives the process, not the
// machine. MemFS keeps it across a simulated process crash (the store
// abandoned, the file system kept) and drops it in CrashClone.
//
// Writes go through WriteAt: the store always knows the position it
// writes, so a failed or partial write can be retried or truncated away.
// Reserver files (OS, MemFS, and ErrorFS over either) reserve blocks
// ahead of the writes that fill them; MemFS counts reserved blocks against
// its capacity, so a full disk fails the reservation as on the OS.
//
// Files: vfs.go (the FS and File interfaces), os.go (the operating system's
// FS), mem.go (MemFS, which tracks what is durable), errfs.go (ErrorFS,
// which fails chosen operations).
//
// vfs imports only the standard library and golang.org/x/sys. It must not
// import any other mqgate package.
package vfs
