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
//	md := s.Meta()                            // topics, groups, offsets, blobs
//	st := s.Stats()                           // counters, latency histograms, lags
//
// Broker packages declare the subset they need as their own interfaces
// (broker/pop.Store, broker/staged.Store, ...); *Store satisfies them.
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
//	<dir>/LOCK            flock: one process per data directory
//	<dir>/RUNNING         present while open; survives a crash → full recovery path
//	<dir>/checkpoint      48 bytes, CRC32C: log flushed position, dispatch position
//	                      (every queue/index entry below it fsynced), log end,
//	                      last store time, clean flag (see checkpoint.go)
//	<dir>/commitlog/      segments, see package commitlog
//	<dir>/consumequeue/   see package consumequeue
//	<dir>/index/          see package index
//	<dir>/meta/           see package meta
//
// # Recovery
//
// Clean (checkpoint says clean, no RUNNING marker, log ends where the
// checkpoint says): nothing is scanned or replayed. Otherwise the staging
// ring's records that never reached the log are written to it first
// (commitlog/staging.go), and the log is
// validated (length, magic, CRC32C, position) from the checkpoint's
// flushed position to its end, the first invalid record and everything
// after it are truncated, consume-queue entries at or past the
// checkpoint's dispatch position are dropped, and the log from there is
// re-dispatched into queues and index. Work is proportional to what was
// written since the last checkpoint (CheckpointInterval), not to the log
// size. Without a checkpoint everything is validated and rebuilt; a
// missing or damaged index is rebuilt from the log. ReadMessage checks the
// CRC of every record it returns, so a damaged record is never served.
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
// staging ring the log flusher and block reserver, the dispatcher, and a
// background loop (checkpoint, retention, metadata flush). Each owns its
// files' write side. Locks never nest across packages except through
// the checkpoint (Store.cpMu, then the log's, queues' and index's own)
// and Store → commitlog segment list (read). storage/LOCKS.md lists every
// mutex of storage and its sub-packages and the order they nest in; a
// function that needs a lock held says so as the last line of its doc
// comment ("// l.fmu must be held.").
//
// # Imports
//
// storage and its sub-packages import only the standard library,
// golang.org/x/sys and each other. They must never import gen/, broker/,
// gateway/, sdk/ or protobuf (enforced by TestImportBoundary).
package storage
