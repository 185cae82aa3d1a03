// Package metastore owns the store's metadata: topics, consumer groups,
// consumer offsets and named blobs of broker state (POP revive progress,
// the receipt-handle MAC key, ...).
//
// Each kind is one whole-snapshot file in the meta directory:
//
//	topics.snap  groups.snap  offsets.snap  blob-<name>.snap
//
// written as: temp file, fsync, rename the current file to .prev, rename
// the temp file into place, fsync the directory. A snapshot is
//
//	0  4 magic "MQGS"   4  4 version (1)   8  4 payload length   12 4 CRC32C(payload)
//	16 …  payload (JSON)
//
// The version is SnapshotVersion. A snapshot with a higher one was
// written by a newer mqgate: loading it fails with an error wrapping
// ErrFormat (never a fallback to .prev, which would lose what it holds).
//
// Durability of writes: PutTopic, DeleteTopic, PutGroup, DeleteGroup and
// SaveBlob return after the snapshot is fsynced (durable when they return
// nil). A change becomes visible in memory only after its snapshot is
// durable: when the write fails (a read-only or full disk) the call
// returns the error and nothing changed, so nothing is accepted on the
// strength of metadata that a restart would not find. CommitOffset only updates memory and returns DurabilityMemory; the
// offsets are persisted by Flush (the store calls it every
// MetaFlushInterval and on Close).
//
// Loading: a corrupt current snapshot is a clear error wrapping
// ErrCorrupt that names the file and says whether the previous snapshot
// (<file>.prev, absent before the second write) is on disk;
// Options.FallbackToPrevious makes Open use it instead. A crash
// between the two renames is recovered from the fsynced temp file.
//
// Files: metastore.go holds the metadata types and their persistence.
//
// metastore imports storage/vfs, storage/internal/serr and the standard library.
package metastore
