// Package storage is mqgate's embedded store: one commit log of records
// (package message), per-(topic, queue) consume queues and a key index
// built from it by a dispatcher, whole-snapshot metadata (package meta),
// checkpoints, crash recovery and retention. It knows bytes, offsets and
// topic names; it knows nothing of POP, sessions or protocols. The broker
// builds everything else (POP checkpoints, delay, transactions,
// retry/DLQ, offsets) from ordinary records.
//
// # What the broker uses
//
//	s, err := storage.Open(dir, storage.Options{FlushMode: storage.FlushSync})
//	defer s.Close(ctx)                        // nil only if the close was clean
//
//	res, err := s.Append(ctx, msgs...)        // AppendResult{Status, Durability, Entries, End}
//	s.WaitDispatched(ctx, res.End)            // read your own writes through the queues
//	ents, err := s.ReadQueue(topic, q, from, max)   // ErrOffsetMoved below the queue's min
//	m, err := s.ReadMessage(e.PhysOffset, e.Size)   // CRC checked; body copied once
//	ms, next, err := s.ReadMessages(topic, q, from, max)
//	min, max := s.QueueRange(topic, q)        // max is the next offset
//	off, err := s.OffsetForTime(topic, q, unixMs)
//	ids := s.QueueIDs(topic); topics := s.Topics()
//	s.SetArrivalHook(func(topic string, q int32, next int64) { ... }) // must not block
//	ms, err := s.LookupByID(topic, uniqKey, max)
//	ms, err := s.LookupByKey(topic, key, beginMs, endMs, max)
//	err := s.DeleteTopic(ctx, topic)
//	pos, err := s.LastDeletion(topic)         // log position of its newest deletion record, -1 if none
//	md := s.Meta()                            // topics, groups, offsets, blobs
//	st := s.Stats()                           // counters, latency histograms, lags
//	err := s.CheckSpace()                     // ErrDiskFull below the disk reserve (space.go)
//	sp := s.Space()                           // free space, reserve, refusals
//
// Broker packages declare the subset they need as their own interfaces
// (broker/pop.Store, broker/deferred.Store, ...); *Store satisfies them.
//
// # Appends and durability
//
// The messages of one Append call are written contiguously, in order, by
// the commit log's writer role (one holder at a time: the appender itself
// when nobody else writes or waits in async mode, otherwise the writer
// goroutine); they may name different topics and queues. The writer
// assigns physical offsets, per-(topic, queue) queue offsets (dense, from
// 0, recovered on Open) and store times (monotonic). Concurrent calls are
// batched into one write (group commit).
//
//   - FlushAsync: Append returns once the batch is in memory that outlives
//     the process: the staging ring in StagingDir (a tmpfs file, written
//     to the log in runs by a flusher; the next Open writes what a
//     crash left there into the log), or without one the OS page cache.
//     StatusOK, DurabilityMemory (survives a process crash, not a power
//     loss). A syncer fsyncs every FlushInterval or FlushBytes.
//   - FlushSync: Append returns after the fsync that covers the batch;
//     one fsync serves every append queued while the previous one ran.
//     StatusOK + DurabilityLocal, or, if the fsync did not complete within
//     min(FlushTimeout, ctx deadline), StatusFlushTimeout +
//     DurabilityMemory: the records ARE in the log and will become
//     durable; the client's message id is the dedup key if it retries.
//   - A receipt never claims more than happened: DurabilityLocal is
//     reported only when the fsync covering the record has returned.
//   - Errors (sentinels, wrapped with %w): ErrClosed; ErrTooLarge
//     (MaxBodySize/MaxRecordSize); ErrInvalid; ErrNotWritable — a write
//     failed (disk full, I/O error): nothing of that call is in the log,
//     queue offsets are rolled back, acknowledged records are untouched
//     and later appends succeed when space returns; or an fsync failed:
//     the store refuses writes until reopened (page-cache state unknown).
//
// In sync mode the dispatcher publishes only fsynced records, so no
// reader ever sees a record that a power loss could take back. In async
// mode records are visible once written to the log file (a read of one
// still in the staging ring writes the ring out first).
//
// The dispatcher does not read back what it has just been handed: the
// writer role describes each record it wrote (queue, offsets, tag hash,
// index keys, from the sealed bytes) into a bounded feed (feed.go), and
// the dispatcher applies those descriptions up to the visible limit. It
// parses the log itself on replay and wherever the feed has no record
// for its position (feed full, a failed step). Stats reports how many
// records came each way (DispatchFed, DispatchRead).
//
// # Files
//
//	<dir>/FORMAT          "mqgate-data-format N\n": the layout version of the
//	                      directory (FormatVersion). Written when Open first
//	                      meets the directory; one without it predates the
//	                      file and is version 1. Open, Verify and Repair
//	                      refuse a higher version than the build supports
//	                      (ErrFormat: "data directory ... has format
//	                      version N; this mqgate supports up to M"), and
//	                      change nothing then. Each file kind also carries
//	                      its own version in its header (records, the
//	                      checkpoint, index files, meta snapshots:
//	                      meta.SnapshotVersion).
//	<dir>/LOCK            flock: one process per data directory
//	<dir>/RUNNING         present while open; survives a crash → full recovery path
//	<dir>/checkpoint      48 bytes, CRC32C: log flushed position, dispatch position
//	                      (every queue/index entry below it fsynced), log end,
//	                      last store time, clean flag (see checkpoint.go)
//	<dir>/commitlog/      segments, see package commitlog
//	<dir>/consumequeue/   see package consumequeue
//	<dir>/index/          see package index
//	<dir>/meta/           see package meta
//	<dir>/repair-saved/   what Repair cut off the log, one directory per cut;
//	                      SALVAGE in one marks a salvage not yet finished,
//	                      salvage-<position>.plan its consumer-offset moves
//
// # Recovery
//
// Clean (checkpoint says clean, no RUNNING marker, log ends where the
// checkpoint says): nothing is scanned or replayed. Otherwise the staging
// ring's records that never reached the log are written to it first
// (commitlog/staging.go), and the log is validated (length, magic,
// CRC32C, position) from the checkpoint's flushed position to its end.
// At the first invalid record recovery looks further: if nothing valid
// follows it anywhere in the log (zeros, the rest of a partly written
// record), it is a torn tail, what a crash leaves, and it is truncated.
// If a valid record follows (one passing its CRC that names its own
// position), the bytes were damaged after they were written, and
// truncating would drop every record after them: Open then truncates
// nothing and fails with an error wrapping ErrCorrupt and a
// *DamageError, naming the segment file, the log position and file
// offset, and how many bytes and valid records follow, and pointing to
// `mqgate verify` and `mqgate repair`. Consume-queue entries at or past
// the checkpoint's dispatch position are dropped, and the log from
// there is re-dispatched into queues and index. Work is proportional to
// what was written since the last checkpoint (CheckpointInterval), not
// to the log size. Without a checkpoint everything is validated and
// rebuilt; a missing or damaged index is rebuilt from the log.
// ReadMessage checks the CRC of every record it returns, so a damaged
// record is never served.
//
// # Verify and repair
//
// Verify (mqgate verify) reads a closed data directory and changes
// nothing: the FORMAT file, every record of the log (each stretch of
// invalid bytes, whether valid records follow it, how many), the
// checkpoint (readable, and not claiming more log than is valid), every
// consume-queue entry the checkpoint vouches for against the record it
// points at, and the index files' headers. Each problem says what Repair
// would do about it and what that drops; Damaged is false when all it
// found is what a crash leaves, which Open handles itself: a torn tail,
// or a segment ending short of the next one's base (see package
// commitlog), unless the checkpoint says those bytes were fsynced.
//
// Repair (mqgate repair) does it: damage in the log is cut out by
// truncating the log at its first invalid byte. Records cannot be taken
// out of the middle of the log and the ones after kept, as physical and
// queue offsets are sealed into each record and queues are dense: so
// every record before the damage is kept, and the records after it
// leave the store but are not destroyed: the cut part of the segment
// and every later segment are saved under repair-saved. A damaged
// checkpoint is removed; damaged consume queues and index files are
// removed and rebuilt from the log. Repair then opens and closes the
// store, which rebuilds them.
//
// Salvage (mqgate repair --salvage) repairs the same way and then
// appends the valid records the cut saved again, in their order, with
// new offsets and every other field they carried, marked with
// message.PropSalvaged; records of topics Options.SalvageTopic excludes
// (the broker's bookkeeping) are left out, and committed consumer
// offsets past the cut are moved to the copies' numbering. Each step is
// safe against a crash: a salvage run again finishes what one left and
// copies nothing twice (salvage.go). Verify reports what a salvage would
// bring back, and salvages left unfinished.
//
// # Disk reserve
//
// Options.DiskReserve (and DiskReservePercent) is free space kept for the
// writes that let consumers drain the store. CheckSpace answers
// ErrDiskFull while less is free; the broker asks it before storing a new
// message, and the store itself refuses nothing for it, so POP journal
// records, metadata and the store's own files go on into the reserve.
// Free space counts the blocks the log holds reserved ahead. See space.go.
//
// # Retention
//
// RunRetention (every RetentionInterval) deletes whole segments whose
// records are all older than RetentionTime, or the oldest while the disk
// is fuller than DiskUsagePercent; never the active segment, nor one
// holding records not yet fsynced or dispatched. A reader holding a
// deleted segment keeps reading it (reference counted, unmapped after the
// last reader). Queues' min offsets advance; reads below them return
// ErrOffsetMoved.
//
// # Goroutines and locks
//
// Each Store runs: the log writer, the log syncer, in async mode with a
// staging ring the log flusher and block reserver, in sync mode the log
// zeroer (pre-zeroes the active segment's tail, see commitlog), the
// dispatcher, and a background loop (checkpoint, retention, metadata
// flush). Each owns its files' write side (the zeroer writes only ranges
// the writer has not reserved, through its own handle). Locks never nest across packages except through
// the checkpoint (Store.cpMu, then the log's, queues' and index's own)
// and Store → commitlog segment list (read). docs/locks.md lists every
// mutex of the binary, storage's included, and the order they nest in; a
// function that needs a lock held says so as the last line of its doc
// comment ("// l.fmu must be held.").
//
// Files: store.go (Store: Open, recovery, append, reads, close), options.go
// (Options and their defaults), dispatch.go (the dispatcher that feeds
// consume queues and the index from the log), deletions.go (LastDeletion:
// where a topic was last deleted), verify.go (Verify and Repair of a
// stopped store).
//
// # Imports
//
// storage and its sub-packages import only the standard library,
// golang.org/x/sys and each other. They must never import gen/, broker/,
// gateway/, sdk/ or protobuf (enforced by TestImportBoundary).
package storage
