package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Error sentinels; match with errors.Is.
var (
	ErrClosed      = serr.ErrClosed
	ErrNotWritable = serr.ErrNotWritable
	ErrCorrupt     = serr.ErrCorrupt
	ErrOffsetMoved = serr.ErrOffsetMoved
	ErrTooLarge    = serr.ErrTooLarge
	ErrNotFound    = serr.ErrNotFound
	ErrInvalid     = serr.ErrInvalid
	ErrLocked      = serr.ErrLocked
	ErrDiskFull    = serr.ErrDiskFull
)

// DamageError is the error (wrapped) Open returns when the commit log
// holds an invalid record that valid records follow: damage in the middle
// of the log rather than a torn tail. Nothing was truncated; Verify shows
// the damage and Repair cuts it out.
type DamageError = commitlog.DamageError

// Status is the outcome of an accepted append.
type Status int

const (
	// StatusOK: written, and durable as Durability says.
	StatusOK Status = iota
	// StatusFlushTimeout: sync mode only; the records ARE in the log but
	// their fsync did not finish within min(FlushTimeout, ctx deadline).
	StatusFlushTimeout
)

func (s Status) String() string {
	if s == StatusFlushTimeout {
		return "FLUSH_DISK_TIMEOUT"
	}
	return "OK"
}

// Durability says how far an acknowledged append got.
type Durability int

const (
	// DurabilityMemory: written to the OS (survives a process crash, not
	// a power loss).
	DurabilityMemory Durability = iota
	// DurabilityLocal: fsynced to the local disk.
	DurabilityLocal
)

func (d Durability) String() string {
	if d == DurabilityLocal {
		return "LOCAL"
	}
	return "MEMORY"
}

// AppendEntry is where one appended message went.
type AppendEntry = commitlog.Entry

// AppendResult is the receipt of an Append call.
type AppendResult struct {
	Status     Status
	Durability Durability
	Entries    []AppendEntry // one per message, in order
	// End is the log position after the last record: WaitDispatched(ctx,
	// End) makes the records readable through their queues.
	End int64
}

// QueueEntry is a consume-queue entry.
type QueueEntry = consumequeue.Entry

// ArrivalHook is called on the dispatcher goroutine after new entries of
// (topic, queueID) become visible; next is the queue's new Next. It must
// not block (signal a channel, wake a waiter, return).
type ArrivalHook func(topic string, queueID int32, next int64)

// Store is the mqgate store: one commit log, its consume queues, key
// index, and metadata snapshots. See doc.go.
type Store struct {
	dir    string
	opts   Options
	fs     vfs.FS
	logger *slog.Logger

	lock io.Closer
	log  *commitlog.Log
	cqs  *consumequeue.Set
	idx  *index.Index
	meta *metastore.Store
	disp *dispatcher
	feed *feed // the writer's records for the dispatcher; nil when off

	hook atomic.Pointer[ArrivalHook]
	c    counters
	// writeErr is the ErrNotWritable of the last append that failed, nil
	// once one succeeds (Writable).
	writeErr atomic.Pointer[error]
	space    space // free space against the disk reserve (space.go)

	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	bgStop      chan struct{}
	cpSoon      chan struct{} // a checkpoint now: the index sealed a file, held in memory until written
	bgDone      chan struct{}
	cpMu        sync.Mutex // checkpoint writers
	lastCP      atomic.Int64
	encodedPool sync.Pool // *encoded

	recovery RecoveryInfo
	epoch    time.Time // monotonic origin of append latencies and store times

	dels deletions // LastDeletion's answers and the deletions dispatched since Open
}

// now is Options.Now, or the system clock.
func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// RecoveryInfo describes what Open did.
type RecoveryInfo struct {
	Clean         bool // previous run closed cleanly (fast path)
	Fresh         bool // no previous run: this open created the store
	LogMin        int64
	LogEnd        int64
	ScannedBytes  int64 // log bytes validated
	Truncated     int64 // bytes of torn/invalid tail dropped
	StagedBytes   int64 // answered records the last run left in its staging ring, now in the log
	ReplayedBytes int64 // log bytes re-dispatched into queues/index
	Duration      time.Duration
}

// Open opens (or creates) the store in dir and recovers it.
func Open(dir string, opts Options) (*Store, error) { return open(dir, opts, -1) }

// OpenCut is Open for a replica that applies a replicated log: after
// recovery the commit log ends at logEnd, a record boundary the replica
// recorded after fsyncing the log (Sync) up to it. Records past it (the
// replica applied them after that record and applies them again, to the
// same bytes) are removed with their queue and index entries. A log that
// recovered shorter than logEnd, or whose retained part starts past it,
// is an ErrCorrupt error.
func OpenCut(dir string, opts Options, logEnd int64) (*Store, error) {
	if logEnd < 0 {
		return nil, fmt.Errorf("%w: log end %d", serr.ErrInvalid, logEnd)
	}
	return open(dir, opts, logEnd)
}

func open(dir string, opts Options, cutAt int64) (*Store, error) {
	t0 := time.Now()
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fs := opts.FS
	if err := fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	lk, err := fs.Lock(filepath.Join(dir, lockFile))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s: %w", serr.ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("storage: lock %s: %w", dir, err)
	}
	if err := ensureFormat(fs, dir); err != nil {
		lk.Close()
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, fs: fs, logger: opts.Logger, lock: lk, epoch: time.Now(), bgStop: make(chan struct{}), bgDone: make(chan struct{}), cpSoon: make(chan struct{}, 1)}
	if err := s.open(cutAt); err != nil {
		s.closeParts()
		lk.Close()
		return nil, err
	}
	s.recovery.Duration = time.Since(t0)
	if sp := s.Space(); sp.Err == nil && sp.Reserve > sp.Total/2 {
		s.logger.Warn("storage: the disk reserve is more than half of the file system: new messages will be refused early",
			"dir", dir, "reserve", sp.Reserve, "total", sp.Total)
	}
	if s.recovery.Fresh {
		s.logger.Info("storage: created a new store", "dir", dir, "took", s.recovery.Duration)
		return s, nil
	}
	s.logger.Info("storage: opened", "dir", dir, "clean", s.recovery.Clean, "log_end", s.recovery.LogEnd,
		"scanned", s.recovery.ScannedBytes, "replayed", s.recovery.ReplayedBytes, "truncated", s.recovery.Truncated,
		"took", s.recovery.Duration)
	return s, nil
}

func (s *Store) open(cutAt int64) error {
	fs, dir, o := s.fs, s.dir, s.opts
	cp, haveCP := readCheckpoint(fs, dir)
	_, _, runErr := fs.Stat(filepath.Join(dir, runningFile))
	clean := haveCP && cp.Clean && vfs.IsNotExist(runErr)
	rec := commitlog.Recovery{From: -1, CleanEnd: -1}
	if haveCP {
		rec.From = cp.Flushed
	}
	if clean {
		rec.CleanEnd = cp.LogEnd
	}
	if cutAt >= 0 {
		rec.Cut, rec.CutAt = true, cutAt
	}
	notify := make(chan struct{}, 1)
	var onWrite func([]commitlog.Record, []commitlog.Entry)
	if o.feedMax >= 0 {
		s.feed = &feed{max: cmp.Or(o.feedMax, defaultFeedMax)}
		onWrite = s.feed.add
	}
	lg, res, err := commitlog.Open(commitlog.Options{
		FS: fs, Dir: filepath.Join(dir, "commitlog"), SegmentSize: o.SegmentSize, MaxRecordSize: o.MaxRecordSize,
		SyncMode: o.FlushMode == FlushSync, FlushInterval: o.FlushInterval, FlushBytes: o.FlushBytes,
		Now: o.Now, Epoch: s.epoch, Logger: o.Logger, Notify: notify, ZeroAhead: zeroAhead(o.FlushMode), SyncerNice: syncerNice(o.FlushMode),
		StagingDir: o.StagingDir, StagingLinger: max(o.StagingLinger, 0), NoWriteBehind: o.NoWriteBehind, KeepCached: max(o.LogCacheBytes, 0), OnWrite: onWrite,
		OnSync: func(_ int64, d time.Duration, err error) {
			s.c.fsyncs.Add(1)
			s.c.fsyncLat.observe(d)
			if err != nil {
				s.c.fsyncErrors.Add(1)
			}
		},
	}, rec)
	if err != nil {
		if _, ok := errors.AsType[*commitlog.DamageError](err); ok {
			return fmt.Errorf("storage: data directory %s: %w; the store will not open until it is repaired: "+
				"`mqgate verify --data-dir %s` lists the damage and what a repair drops, `mqgate repair --data-dir %s` repairs it",
				dir, err, dir, dir)
		}
		return fmt.Errorf("storage: commit log: %w", err)
	}
	s.log = lg
	clean = clean && res.FastPath
	s.recovery = RecoveryInfo{Clean: clean, LogMin: res.Min, LogEnd: res.End, ScannedBytes: res.Scanned, Truncated: res.Truncated, StagedBytes: res.Staged,
		Fresh: !haveCP && vfs.IsNotExist(runErr) && res.End == 0 && res.Min == 0}

	// Consume queues: keep entries below the checkpointed dispatch
	// position (fsynced before the checkpoint was written).
	d := res.Min
	if haveCP {
		d = max(min(cp.Dispatched, res.End), res.Min)
	}
	if s.cqs, err = consumequeue.Open(consumequeue.Options{FS: fs, Dir: filepath.Join(dir, "consumequeue"),
		EntriesPerFile: o.CQEntriesPerFile, Logger: o.Logger, TruncateAt: d}); err != nil {
		return fmt.Errorf("storage: consume queues: %w", err)
	}
	if s.idx, err = index.Open(index.Options{FS: fs, Dir: filepath.Join(dir, "index"), Slots: o.IndexSlots,
		Capacity: o.IndexCapacity, Logger: o.Logger, LogMin: res.Min, LogEnd: res.End, OnSeal: s.checkpointSoon}); err != nil {
		return fmt.Errorf("storage: index: %w", err)
	}
	if s.meta, err = metastore.Open(fs, filepath.Join(dir, "meta"), metastore.Options{Logger: o.Logger}); err != nil {
		return fmt.Errorf("storage: metadata: %w", err)
	}
	s.cqs.All(func(q *consumequeue.Queue) { q.TrimBelow(res.Min) })

	// Replay the log tail into the views, synchronously.
	start := max(min(d, s.idx.End()), res.Min)
	s.disp = newDispatcher(s, start, notify)
	if err := s.disp.catchUp(res.End); err != nil {
		return fmt.Errorf("storage: replay: %w", err)
	}
	s.recovery.ReplayedBytes = res.End - start
	lg.SetQueueOffsets(func(yield func(string, int32, int64)) {
		s.cqs.All(func(q *consumequeue.Queue) { yield(q.Topic, q.ID, q.Next()) })
	})
	lg.SetLastStoreTime(max(cp.LastStoreTime, s.disp.lastStore))

	// From here on a crash must take the recovery path.
	if err := s.markRunning(); err != nil {
		return err
	}
	if !clean || !haveCP {
		// Make the recovered state the new baseline.
		if err := s.checkpoint(false); err != nil {
			return err
		}
	}
	lg.Start()
	go s.disp.run()
	go s.background()
	return nil
}

func (s *Store) markRunning() error {
	f, err := s.fs.Create(filepath.Join(s.dir, runningFile))
	if err != nil {
		return fmt.Errorf("storage: marker: %w", err)
	}
	f.Close()
	return s.fs.SyncDir(s.dir)
}

// checkpointSoon asks the background loop for a checkpoint without
// waiting for it.
func (s *Store) checkpointSoon() {
	select {
	case s.cpSoon <- struct{}{}:
	default:
	}
}

// checkpoint fsyncs the views and records how far recovery can trust them.
func (s *Store) checkpoint(clean bool) error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	d := s.disp.pos.Load()
	if err := s.cqs.Sync(); err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	if err := s.idx.Sync(); err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	cp := checkpoint{Flushed: s.log.Durable(), Dispatched: d, LogEnd: s.log.Written(), LastStoreTime: s.disp.lastStoreTime(), Clean: clean}
	if err := writeCheckpoint(s.fs, s.dir, cp); err != nil {
		return fmt.Errorf("storage: checkpoint: %w", err)
	}
	s.lastCP.Store(d)
	return nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// DiskUsage reports the capacity of the file system holding the store.
func (s *Store) DiskUsage() (vfs.DiskUsage, error) { return s.fs.Usage(s.dir) }

// Recovery reports what Open found and did.
func (s *Store) Recovery() RecoveryInfo { return s.recovery }

// Meta is the metadata store (topics, groups, offsets, blobs).
func (s *Store) Meta() *metastore.Store { return s.meta }

// encoded is one append call's records and the buffers that hold their
// bytes. The whole of it, buffers included, is reused (s.encodedPool)
// once the writer is done with the records.
type encoded struct {
	recs  []commitlog.Record
	bufs  [][]byte // bufs[i] holds recs[i].Data; kept for the next use
	total int
}

// maxPooledBytes bounds the buffer capacity one reused encoded form
// keeps (a batch of large records would otherwise pin it in the pool),
// and maxPooledBatch the batches whose encoded form is kept at all.
const (
	maxPooledBytes = 1 << 20
	maxPooledBatch = 1024
)

// encode validates msgs and encodes them into reused buffers; release
// hands them back once the writer is done with them.
func (s *Store) encode(msgs []*message.Message, control bool, st *Stamp) (_ *encoded, err error) {
	e, _ := s.encodedPool.Get().(*encoded)
	if e == nil {
		e = &encoded{}
	}
	defer func() {
		if err != nil {
			s.release(e)
		}
	}()
	for i, m := range msgs {
		if m == nil || m.QueueID < 0 && !control || m.Flags&message.FlagControl != 0 && !control {
			return nil, fmt.Errorf("%w: message %d: nil, negative queue id or reserved flag", serr.ErrInvalid, i)
		}
		if len(m.Body) > s.opts.MaxBodySize {
			return nil, fmt.Errorf("%w: body of %d bytes exceeds %d", serr.ErrTooLarge, len(m.Body), s.opts.MaxBodySize)
		}
		mm := *m
		mm.StoreHost = s.opts.StoreHost
		var storeTime int64
		if st != nil {
			mm.StoreHost, storeTime = st.StoreHost, st.StoreTime
		}
		if i == len(e.bufs) {
			e.bufs = append(e.bufs, nil)
		}
		data, crc, encErr := message.Encode(e.bufs[i][:0], &mm)
		if encErr != nil {
			return nil, fmt.Errorf("%w: message %d: %w", serr.ErrInvalid, i, encErr)
		}
		e.bufs[i] = data
		if len(data) > s.opts.MaxRecordSize {
			return nil, fmt.Errorf("%w: record of %d bytes exceeds %d", serr.ErrTooLarge, len(data), s.opts.MaxRecordSize)
		}
		e.total += len(data)
		e.recs = append(e.recs, commitlog.Record{Data: data, CRC: crc, Topic: m.Topic, QueueID: m.QueueID, ResetTopic: control, StoreTime: storeTime})
	}
	return e, nil
}

// release puts e back for reuse, with its buffers up to maxPooledBytes
// in all; the rest, and an unusually large batch, are left to the GC.
func (s *Store) release(e *encoded) {
	if len(e.bufs) > maxPooledBatch {
		return
	}
	kept := 0
	for i, b := range e.bufs {
		if kept += cap(b); kept > maxPooledBytes {
			e.bufs[i] = nil
		}
	}
	clear(e.recs)
	e.recs, e.total = e.recs[:0], 0
	s.encodedPool.Put(e)
}

// Append appends msgs to the log as one contiguous batch (they may name
// different topics and queues) and returns the receipt. The store sets
// StoreTime, StoreHost, queue and physical offsets; msgs are not modified.
//
// In async mode it returns once the records are written (Durability
// Memory). In sync mode it then waits for the fsync that covers them, at
// most min(FlushTimeout, ctx deadline): StatusOK with DurabilityLocal, or
// StatusFlushTimeout with DurabilityMemory — the records are in the log
// either way. Errors: ErrClosed, ErrTooLarge, ErrInvalid, ErrNotWritable
// (disk full or I/O error: nothing of this call is in the log; or a failed
// fsync, after which the store refuses writes until reopened).
func (s *Store) Append(ctx context.Context, msgs ...*message.Message) (AppendResult, error) {
	return s.appendCounted(ctx, msgs, nil)
}

// appendCounted is append of ordinary records, counted in the append
// metrics (latency or error).
func (s *Store) appendCounted(ctx context.Context, msgs []*message.Message, st *Stamp) (AppendResult, error) {
	t0 := time.Since(s.epoch) // one clock read (time.Now takes two), also the store time
	res, err := s.append(ctx, msgs, false, t0, st)
	if err != nil {
		s.c.appendErrors.Add(1)
		return res, err
	}
	s.c.appendLat.observe(time.Since(s.epoch) - t0)
	return res, nil
}

// Stamp is what a replicated append fixes instead of the store: the
// store time and store host of its records.
type Stamp struct {
	StoreTime int64 // unix ms, > 0
	StoreHost string
}

// AppendStamped is Append with the store time and store host of every
// record given by st instead of taken from the clock and Options.
// Everything else a record's bytes hold (physical and queue offsets)
// follows from the log it is appended to, so stores that apply the same
// AppendStamped calls in the same order, from the same state, with the
// same SegmentSize, hold byte-identical commit logs with identical queue
// offsets. A replicated store is appended to only this way; store times
// are then whatever the callers fixed (they keep them monotonic).
func (s *Store) AppendStamped(ctx context.Context, st Stamp, msgs ...*message.Message) (AppendResult, error) {
	if st.StoreTime <= 0 {
		return AppendResult{}, fmt.Errorf("%w: store time %d", serr.ErrInvalid, st.StoreTime)
	}
	return s.appendCounted(ctx, msgs, &st)
}

// append writes msgs; at is the caller's clock reading since s.epoch,
// which the commit log takes as the store time (zero: it reads the clock)
// unless st fixes it.
func (s *Store) append(ctx context.Context, msgs []*message.Message, control bool, at time.Duration, st *Stamp) (AppendResult, error) {
	if s.closed.Load() {
		return AppendResult{}, serr.ErrClosed
	}
	if len(msgs) == 0 {
		return AppendResult{}, fmt.Errorf("%w: no messages", serr.ErrInvalid)
	}
	enc, err := s.encode(msgs, control, st)
	if err != nil {
		return AppendResult{}, err
	}
	total := enc.total
	syncMode := s.opts.FlushMode == FlushSync
	var (
		ents    []commitlog.Entry
		end     int64
		durable bool
		syncErr error
	)
	if syncMode {
		// One wait for the write and the fsync that covers it, at most
		// min(FlushTimeout, ctx deadline).
		deadline := time.Now().Add(s.opts.FlushTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		ents, end, durable, err = s.log.AppendDurable(ctx, enc.recs, deadline)
		if err != nil && ents != nil {
			syncErr, err = err, nil // written, then the fsync failed
		}
	} else {
		ents, end, err = s.log.AppendAt(ctx, enc.recs, at)
	}
	if err == nil || ctx.Err() == nil {
		// The writer is done with the records. (A call given up on its
		// context may still be queued: its buffers are left to the GC.)
		s.release(enc)
	}
	if err != nil {
		if errors.Is(err, serr.ErrClosed) {
			return AppendResult{}, err
		}
		err = fmt.Errorf("storage: append: %w", err)
		if errors.Is(err, serr.ErrNotWritable) {
			e := err // escapes here only, not on every append
			s.writeErr.Store(&e)
		}
		return AppendResult{}, err
	}
	if s.writeErr.Load() != nil {
		s.writeErr.Store(nil)
	}
	res := AppendResult{Status: StatusOK, Durability: DurabilityMemory, Entries: ents, End: end}
	s.c.appends.Add(uint64(len(msgs)))
	s.c.appendBytes.Add(uint64(total))
	if syncMode {
		if syncErr != nil {
			return res, fmt.Errorf("storage: records written but not durable: %w", syncErr)
		}
		if !durable {
			s.c.flushTimeouts.Add(1)
			res.Status = StatusFlushTimeout
			return res, nil
		}
		res.Durability = DurabilityLocal
	} else if s.log.Durable() >= end {
		res.Durability = DurabilityLocal
	}
	return res, nil
}

// Sync fsyncs everything appended so far (any mode).
func (s *Store) Sync() error { return s.log.Sync() }

// ReadMessage reads and verifies the record at physOffset. The body is
// copied once from the log into the returned message.
func (s *Store) ReadMessage(physOffset int64, size int32) (*message.Message, error) {
	if physOffset < s.log.Min() {
		return nil, fmt.Errorf("%w: log position %d below log start %d", serr.ErrOffsetMoved, physOffset, s.log.Min())
	}
	b, err := s.log.Read(physOffset, int(size))
	if err != nil {
		return nil, err
	}
	m, err := message.Decode(b, s.opts.MaxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("%w: record at %d: %w", serr.ErrCorrupt, physOffset, err)
	}
	if m.PhysOffset != physOffset || m.Size != size {
		return nil, fmt.Errorf("%w: record at %d claims position %d size %d", serr.ErrCorrupt, physOffset, m.PhysOffset, m.Size)
	}
	return m, nil
}

// maxRun bounds the bytes ReadEntries reads with one copy: the messages
// of a run share its buffer, which stays in memory while any of them does.
const maxRun = 64 << 10

// ReadEntries reads the records of ents (entries ReadQueue returned) as
// ReadMessage(e.PhysOffset, e.Size) would, each one's result in msgs[i]
// or errs[i] (both len(ents) long). Records laid out one after another in
// one segment of the log are read with one copy per run rather than one
// per record; what cannot be read that way is read record by record, so
// that each entry gets exactly ReadMessage's result.
func (s *Store) ReadEntries(ents []QueueEntry, msgs []*message.Message, errs []error) {
	for i := 0; i < len(ents); {
		// The run: ents[i:j], each record starting where the one before
		// ended, maxRun bytes at most (a longer record is a run alone).
		pos, end := ents[i].PhysOffset, ents[i].PhysOffset+int64(ents[i].Size)
		j := i + 1
		for j < len(ents) && ents[j].PhysOffset == end && ents[j].Size > 0 && end+int64(ents[j].Size)-pos <= maxRun {
			end += int64(ents[j].Size)
			j++
		}
		n := 0
		if j-i > 1 {
			n = s.readRun(ents[i:j], msgs[i:j], errs[i:j])
		}
		if n == 0 {
			msgs[i], errs[i] = s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
			n = 1
		}
		i += n
	}
}

// readRun reads the leading records of a run of adjacent ones with one
// copy (up to the end of the first one's segment) and decodes them. It
// returns how many it read; it stops before a record that does not decode
// as its entry says, for ReadMessage to give that one's error.
func (s *Store) readRun(ents []QueueEntry, msgs []*message.Message, errs []error) int {
	pos := ents[0].PhysOffset
	last := ents[len(ents)-1]
	if pos < s.log.Min() || ents[0].Size <= 0 {
		return 0
	}
	b, err := s.log.ReadSpan(pos, int(last.PhysOffset+int64(last.Size)-pos))
	if err != nil {
		return 0
	}
	for k, e := range ents {
		off, end := e.PhysOffset-pos, e.PhysOffset-pos+int64(e.Size)
		if end > int64(len(b)) {
			return k
		}
		m, err := message.Decode(b[off:end:end], s.opts.MaxRecordSize)
		if err != nil || m.PhysOffset != e.PhysOffset || m.Size != e.Size {
			return k
		}
		msgs[k], errs[k] = m, nil
	}
	return len(ents)
}

// ReadQueue returns up to max dispatched entries of (topic, queueID) from
// fromOffset. Below the queue's min it fails with ErrOffsetMoved; at or
// past its max it returns no entries. A queue never written is empty.
func (s *Store) ReadQueue(topic string, queueID int32, fromOffset int64, max int) ([]QueueEntry, error) {
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		return nil, nil
	}
	ents, err := q.Read(fromOffset, max)
	if err != nil {
		return nil, err
	}
	if len(ents) > 0 && ents[0].PhysOffset < s.log.Min() {
		// Retention removed the log under these entries; trim the queue.
		if err := q.TrimBelow(s.log.Min()); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: queue %s/%d offset %d < min %d", serr.ErrOffsetMoved, topic, queueID, fromOffset, q.Min())
	}
	return ents, nil
}

// ReadMessages reads up to max messages of (topic, queueID) from
// fromOffset (ReadQueue + ReadMessage) and returns the next offset to read.
func (s *Store) ReadMessages(topic string, queueID int32, fromOffset int64, max int) ([]*message.Message, int64, error) {
	ents, err := s.ReadQueue(topic, queueID, fromOffset, max)
	if err != nil {
		return nil, fromOffset, err
	}
	out := make([]*message.Message, 0, len(ents))
	for _, e := range ents {
		m, err := s.ReadMessage(e.PhysOffset, e.Size)
		if err != nil {
			return out, e.QueueOffset, err
		}
		m.QueueOffset = e.QueueOffset
		out = append(out, m)
	}
	return out, fromOffset + int64(len(ents)), nil
}

// QueueRange returns the queue's min offset and max (next) offset.
func (s *Store) QueueRange(topic string, queueID int32) (min, max int64) {
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		return 0, 0
	}
	return q.Min(), q.Next()
}

// OffsetForTime returns the first offset of the queue stored at or after
// unixMs (the max offset if none).
func (s *Store) OffsetForTime(topic string, queueID int32, unixMs int64) (int64, error) {
	q := s.cqs.Get(topic, queueID)
	if q == nil {
		return 0, nil
	}
	return q.OffsetForTime(unixMs)
}

// QueueIDs lists the queues of topic that exist in the store.
func (s *Store) QueueIDs(topic string) []int32 { return s.cqs.QueueIDs(topic) }

// Topics lists the topics that have consume queues in the store.
func (s *Store) Topics() []string { return s.cqs.Topics() }

// DeleteTopic removes the topic's consume queues and forgets its queue
// offsets (a recreated topic starts at 0). It appends a control record so
// that recovery replays the deletion; the log keeps the bytes until
// retention. It returns once the queues are gone.
func (s *Store) DeleteTopic(ctx context.Context, topic string) error {
	_, err := s.deleteTopic(ctx, topic, nil)
	return err
}

// DeleteTopicStamped is DeleteTopic with the deletion record's store time
// and host fixed by the caller, as AppendStamped fixes them: replicas that
// apply the same deletions in the same order write the same bytes.
func (s *Store) DeleteTopicStamped(ctx context.Context, st Stamp, topic string) (AppendResult, error) {
	if st.StoreTime <= 0 {
		return AppendResult{}, fmt.Errorf("%w: store time %d", serr.ErrInvalid, st.StoreTime)
	}
	return s.deleteTopic(ctx, topic, &st)
}

func (s *Store) deleteTopic(ctx context.Context, topic string, st *Stamp) (AppendResult, error) {
	m := &message.Message{Topic: topic, QueueID: -1, Flags: message.FlagControl}
	m.Set(ctrlProp, ctrlDeleteTopic)
	res, err := s.append(ctx, []*message.Message{m}, true, 0, st)
	if err != nil {
		return res, err
	}
	if s.opts.FlushMode == FlushSync && res.Durability != DurabilityLocal {
		// The deletion record must reach the queues: wait for its fsync.
		if _, err := s.log.WaitDurable(ctx, res.End, time.Time{}); err != nil {
			return res, err
		}
	}
	return res, s.WaitDispatched(ctx, res.End)
}

const (
	ctrlProp        = "__MQGATE_CTRL"
	ctrlDeleteTopic = "DELETE_TOPIC"
)

// SetReadersWaiting installs f, which reports whether readers wait for
// records not yet appended (parked long polls): while it says so, the
// staging ring is written out as soon as something is staged instead of
// lingering for more (Options.StagingLinger). nil removes it. f is called
// by the flusher at each wake-up and must be cheap.
func (s *Store) SetReadersWaiting(f func() bool) { s.log.SetReadersWaiting(f) }

// Hurry tells the store that a reader has started waiting for what comes
// next: a staging-ring linger in progress is cut short. It never blocks.
func (s *Store) Hurry() { s.log.Hurry() }

// SetArrivalHook installs the hook called when queues grow (nil removes it).
func (s *Store) SetArrivalHook(h ArrivalHook) {
	if h == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&h)
}

// DispatchedUpTo is the log position below which every record is visible
// through its consume queue and the index.
func (s *Store) DispatchedUpTo() int64 { return s.disp.pos.Load() }

// WaitDispatched waits until every record below pos is visible through
// its queue (read-your-writes: pass AppendResult.End).
func (s *Store) WaitDispatched(ctx context.Context, pos int64) error { return s.disp.wait(ctx, pos) }

// LogRange returns the first and one-past-last positions of the log.
// With a staging ring (Options.StagingDir) written may lag behind
// records already answered until they are written out of the ring; use
// Answered to wait for everything answered.
func (s *Store) LogRange() (min, written int64) { return s.log.Min(), s.log.Written() }

// Answered is the log position after the last record an append was
// answered for: LogRange's written end, or past it while records
// answered from a staging ring are still to be written out.
// WaitDispatched(ctx, Answered()) returns once every record answered
// before the call is readable through its queue.
func (s *Store) Answered() int64 { return s.log.Answered() }

// Stats returns a snapshot of counters, positions and latencies.
func (s *Store) Stats() Stats {
	st := Stats{
		Appends: s.c.appends.Load(), AppendBytes: s.c.appendBytes.Load(), AppendErrors: s.c.appendErrors.Load(),
		FlushTimeouts: s.c.flushTimeouts.Load(), Fsyncs: s.c.fsyncs.Load(), FsyncErrors: s.c.fsyncErrors.Load(),
		AppendLatency: s.c.appendLat.snapshot(), FsyncLatency: s.c.fsyncLat.snapshot(),
		LogMin: s.log.Min(), Written: s.log.Written(), Durable: s.log.Durable(), Dispatched: s.disp.pos.Load(),
		Segments: len(s.log.Segments()), CheckpointedDispatch: s.lastCP.Load(),
		DispatchFed: s.c.dispatchFed.Load(), DispatchRead: s.c.dispatchRead.Load(),
	}
	st.FlushLag = st.Written - st.Durable
	st.DispatchLag = st.Written - st.Dispatched
	s.cqs.All(func(*consumequeue.Queue) { st.Queues++ })
	return st
}

// Close stops appends, lets the dispatcher catch up, fsyncs everything and
// writes a clean checkpoint, all bounded by ctx. It returns nil only if
// the shutdown was clean; otherwise the error says why and the next Open
// takes the full recovery path (nothing acknowledged is lost either way).
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx, false) })
	return s.closeErr
}

func (s *Store) close(ctx context.Context, crash bool) error {
	s.closed.Store(true)
	close(s.bgStop)
	<-s.bgDone
	var errs []error
	if err := s.log.Stop(crash); err != nil {
		errs = append(errs, fmt.Errorf("final log fsync: %w", err))
	}
	if crash {
		s.disp.stop()
		s.closeParts()
		s.lock.Close()
		return nil
	}
	// In sync mode only durable records are dispatched; after a failed
	// fsync that is less than what was written.
	if err := s.disp.wait(ctx, s.disp.limit()); err != nil {
		errs = append(errs, fmt.Errorf("dispatch catch-up: %w", err))
	}
	s.disp.stop()
	clean := len(errs) == 0 && s.disp.pos.Load() == s.log.Written() && s.log.Durable() == s.log.Written()
	if err := ctx.Err(); err != nil && clean {
		clean = false
		errs = append(errs, err)
	}
	if err := s.checkpoint(clean); err != nil {
		errs = append(errs, err)
		clean = false
	}
	if err := s.meta.Close(); err != nil {
		errs = append(errs, fmt.Errorf("metadata: %w", err))
	}
	if clean {
		if err := s.fs.Remove(filepath.Join(s.dir, runningFile)); err != nil {
			errs = append(errs, err)
		} else if err := s.fs.SyncDir(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	s.closeParts()
	s.lock.Close()
	if len(errs) > 0 {
		return fmt.Errorf("storage: unclean close (next open recovers from the last checkpoint): %w", errors.Join(errs...))
	}
	return nil
}

// closeParts closes files of whatever was opened.
func (s *Store) closeParts() {
	if s.idx != nil {
		s.idx.Close()
	}
	if s.cqs != nil {
		s.cqs.Close()
	}
	if s.log != nil {
		s.log.Close()
	}
}

// Abandon stops the store the way a killed process leaves it: no final
// fsync or checkpoint, the running marker stays, and the next Open takes
// the recovery path. For crash tests of the packages built on the store.
func (s *Store) Abandon() { s.crash() }

// crash stops the store as a kill -9 would leave it: no final fsync, no
// checkpoint, the running marker stays. For tests and benchmarks.
func (s *Store) crash() {
	s.closeOnce.Do(func() { s.closeErr = s.close(context.Background(), true) })
}

// syncZeroAhead is how far the commit log keeps its tail pre-zeroed in
// sync mode (commitlog.Options.ZeroAhead): an fsync round then writes data
// pages only, without a journal commit for the grown file. Async mode does
// not pre-zero: it is CPU-bound, and writing every byte twice costs more
// than it saves there.
const syncZeroAhead = 16 << 20

// syncSyncerNice is the nice value the commit log's fsync threads ask for
// in sync mode (commitlog.Options.SyncerNice): durable appends wait on
// them after every slow fdatasync. Async mode's acks do not wait on them.
const syncSyncerNice = -10

func syncerNice(m FlushMode) int {
	if m == FlushSync {
		return syncSyncerNice
	}
	return 0
}

func zeroAhead(m FlushMode) int64 {
	if m == FlushSync {
		return syncZeroAhead
	}
	return 0
}
