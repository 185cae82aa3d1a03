// Package index owns the key index: lookup of commit-log records by a
// 64-bit key hash (the store hashes "topic + message id", "topic + key"
// and, for a topic's deletion records, the topic) within a store-time
// range. It is a view rebuilt from the commit log: missing or damaged
// files are dropped and re-indexed.
//
// # Design and memory bound
//
// Like RocketMQ's IndexFile, the index is a sequence of fixed-capacity
// hash-slot files, each an on-disk hash table with chaining:
//
//	<dir>/<first log position, 20 digits>.idx
//
//	header (64 bytes, little-endian)
//	  0  4 magic "MQGI"     4  4 version (1)
//	  8  4 slot count       12 4 entry capacity
//	  16 4 entry count      20 8 first log position covered
//	  28 8 end log position (every record below it is indexed)
//	  36 8 min store time   44 8 max store time
//	  52 4 sealed (0/1)     56 4 CRC32C of bytes [0,56)
//	slots:   slot count × 4 bytes   (entry number + 1 of the newest entry in the slot; 0 = empty)
//	entries: capacity × 32 bytes    (hash 8 | log position 8 | size 4 | previous entry number + 1 4 | store time 8)
//
// The active (last) file is held in memory — its slot table and the
// entries it has so far, in 64 KiB chunks: at most SlotCount×4 +
// Capacity×32 bytes (8.5 MiB with the defaults) — and so is a sealed file
// until the Sync that writes it. Memory is therefore bounded by the files
// sealed between two Syncs (the store checkpoints as soon as one is
// sealed, and replay syncs after each one) plus the active one, however
// large the log grows. Files written by Sync are read with pread on
// lookup. Lookups walk files newest first, skipping those whose time
// range cannot match. Hash collisions are possible: the caller must check
// the record it reads.
//
// Durability: Put does no I/O, so the dispatcher never waits for the
// disk, not even when a file fills and is sealed (writing and fsyncing the
// sealed file there stalled it 11-42 ms per file; BenchmarkPutWithSync).
// Sync writes the sealed files still in memory whole, oldest first, then
// the active file's new entries: entries, fsync, then the slot pages and
// the header (with the end position), fsync again. A file is created by
// the Sync that first writes it, after every earlier file is sealed on
// disk, so only the last file on disk can be unsealed; Open still treats
// an unsealed file before the last as the end of the index (the later
// ones are dropped and re-indexed). On open the active file's slot table
// is rebuilt from its entries, so a torn slot page cannot point at a
// missing entry. A file whose header fails its CRC is dropped with every
// later file and re-indexed from the log. A sealed file's entries are not
// covered by that CRC: Lookup checks that every chain strictly descends,
// answers ErrCorrupt where it does not, and leaves a "<file>.damaged"
// marker that makes the next Open drop the file (and the later ones) the
// same way.
//
// Files: index.go holds the Index: its files, entries and lookups.
//
// index imports storage/vfs, storage/internal/serr and the standard library.
package index
