// Package commitlog owns the append-only log of records (package message)
// in segment files, its single writer goroutine, group commit, fsync
// policy, torn-tail recovery and ref-counted read access to segments.
//
// # Files
//
//	<dir>/<base offset, 20 digits>.log
//
// A segment holds whole records only. Segments are contiguous: the base of
// segment i+1 is the base of segment i plus its length. A segment is
// closed (a new one started) when the next record would take it past
// SegmentSize; there is no filler record. Physical offsets are therefore
// global byte positions in the concatenated log.
//
// A segment file is as long as its part of the log: records are written
// with pwrite (or by the flusher, from the staging ring), which extends
// it; blocks reserved ahead of a staged log lie past the file's end. In
// sync mode (Options.ZeroAhead) the active segment's file is longer: a
// zeroer goroutine keeps ZeroAhead bytes past the write position written
// with zeros and fdatasynced through its own handle, so that fsync rounds
// overwrite allocated blocks and commit no metadata (zero.go); a roll and
// a clean Stop cut that tail. Also in sync mode, the syncer may run on an
// OS thread of its own at a higher priority (Options.SyncerNice,
// priority.go), so that it gets a core as soon as an fdatasync returns. The
// log ends at the first invalid record. Recovery cuts only a tail: an
// invalid record that a valid one follows anywhere in the log is damage,
// and Open fails with a *DamageError without truncating anything
// (damage.go; Check reports it and Cut removes it, for the store's Verify
// and Repair). A tail of zeros past the last record holds no data and is
// cut without a warning (allZeroAt). The new segment's directory entry is
// fsynced by the next Sync, before Durable passes its base, not by the
// roll (which held the writer role through an ext4 journal commit). A
// segment shorter than the next one's base says (a power loss took its
// unsynced tail) ends the log there: the later ones are dropped. Open
// fsyncs what an unclean recovery kept, and the directory, before it
// reports it durable.
//
// # Concurrency
//
// The writer role owns the active segment's record writes, assigns
// physical offsets, per-(topic, queue) queue offsets and store times. In
// async mode an appender that finds the role free and nobody queued takes
// it and writes its records itself (no hand-off to another goroutine and
// back); otherwise it queues, and the writer goroutine takes the role and
// writes each batch of queued appends with as few write calls as
// possible. The role is held under Log.qmu's busy flag, so one holder at
// a time. One
// syncer goroutine fsyncs (every FlushInterval/FlushBytes in async mode,
// as soon as anything is written in sync mode) and publishes the durable
// position. A sync-mode append (AppendDurable) is answered once, by the
// fsync that covers it: the writer parks written requests in Log.pending
// (Log.pmu) and Sync finishes them, so the appender is woken once rather
// than after the write and again after the fsync. Those fsyncs are run by
// a leader goroutine the writer starts when it parks requests and none
// runs; it runs rounds back to back until nothing is pending and ends
// (the syncer's own thread would be woken for every round). One that stops waiting
// (deadline, context) marks its request abandoned if it is not written
// yet, and whoever finishes it later does so without waiting for it.
// Readers see bytes below Written() only. Segments are reference
// counted: retention removes a segment from the list and unlinks its file,
// but the mapping and descriptor live until the last reader releases it.
//
// In async mode with Options.StagingDir set, the writer copies batches
// into a staging ring held by a tmpfs file (created, read back, listed
// and removed through Options.FS, which must be a vfs.SharedMemory) and
// answers the appenders; a
// flusher goroutine writes the ring out into the segment in runs of up to
// 1 MiB that end at record boundaries, and publishes Written (staging.go,
// which also says how Open replays a ring a crash left). It starts the
// write-back of every 16 MiB it has written (sync_file_range, no wait;
// Options.NoWriteBehind turns it off): buffered writes of a log that
// grows at disk speed cost less when its dirty pages do not pile up until
// the next fsync. Durability is still the fsyncs' alone. With
// Options.KeepCached it also drops from the page cache what lies that far
// behind (dropBehind), so the kernel reuses those pages for new writes.
// Blocks for staged records are reserved before an append is answered,
// past the file's end (the flusher's pwrites extend it), so the file is
// never longer than the log; a reserver goroutine reserves each new
// active segment whole, and the writer reserves only where it has not yet
// (reserve.go). Without a ring (sync mode, Options.StagingDir empty, or a
// file system that cannot reserve blocks) the writer role writes records
// with pwrite.
//
// Lock order: Log.mu (segment list) is never held while waiting on the
// writer's queue lock (Log.qmu) or during I/O other than Map. Log.pmu
// (pending durable appends) is a leaf: nothing is locked under it, and
// only Stop waits under it (for the leader, on its condition variable). Log.fmu (writing the ring out) is taken by the flusher, by
// the writer role (ring full, roll, failed batch), by Sync and by a Read
// of a record still in the ring, never while holding qmu or mu; under it
// the flusher's drop-behind takes mu to look segments up (fmu, then mu).
// docs/locks.md has the whole order.
//
// Files: log.go holds the Log: segments, appends and group commit, flushing,
// recovery and reads.
//
// commitlog imports storage/message, storage/vfs, storage/internal/serr,
// golang.org/x/sys (its cache-line pad) and the standard library only; it
// knows nothing of consume queues, the index, or the broker.
package commitlog
