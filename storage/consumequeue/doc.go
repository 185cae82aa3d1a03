// Package consumequeue owns the per-(topic, queue) consume queues: dense
// arrays of fixed-width entries, one per message of the queue, pointing
// into the commit log. Entry i of a queue is the message with queue offset
// i. They are built by the dispatcher (a single writer) and read
// concurrently; readers see only entries below Queue.Next.
//
// # Files
//
//	<root>/<escaped topic>/<queue id>/<base queue offset, 20 digits>.cq
//
// Each file holds EntriesPerFile entries; its base is a multiple of
// EntriesPerFile. Topic names are escaped: bytes outside [A-Za-z0-9_-]
// become %XX.
//
// # Entry layout (28 bytes, little-endian)
//
//	0  8  commit-log physical offset
//	8  4  record size
//	12 8  tag hash (message.TagHash of TAGS; 0 = no tag)
//	20 8  store time (unix ms)
//
// A zero size marks a hole (never written). Entries are not checksummed:
// the checkpoint records the log position below which every entry was
// fsynced; on recovery entries at or past it are dropped and rebuilt from
// the log, which is checksummed.
//
// # Tail
//
// A queue's newest entries stay in memory until 8 KiB of them gather,
// a Sync (the checkpoint) or Close writes them out, or a trim needs the
// files: the dispatcher then writes each file every few hundred entries
// instead of once per step. Readers see them from memory. A crash loses
// only entries past the checkpoint, which recovery rebuilds anyway.
//
// Files: cq.go (one queue: its entries and files) and set.go (the Set of
// every queue of a store).
//
// Lock order: Set.mu before Queue.wmu before Queue.mu; Queue.tmu is
// innermost and held only around memory copies. consumequeue imports storage/vfs,
// storage/internal/serr and the standard library only.
package consumequeue
