package storage

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

// FlushMode selects when appended records are fsynced.
type FlushMode int

const (
	// FlushAsync: fsync every FlushInterval or FlushBytes; appends return
	// once written (Durability Memory).
	FlushAsync FlushMode = iota
	// FlushSync: an append returns after the fsync that covers it
	// (Durability Local); one fsync serves every append queued meanwhile.
	FlushSync
)

func (m FlushMode) String() string {
	if m == FlushSync {
		return "sync"
	}
	return "async"
}

// ParseFlushMode parses "async" or "sync".
func ParseFlushMode(s string) (FlushMode, error) {
	switch s {
	case "async", "":
		return FlushAsync, nil
	case "sync":
		return FlushSync, nil
	}
	return 0, fmt.Errorf("%w: flush mode %q (want async|sync)", serr.ErrInvalid, s)
}

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	FS vfs.FS // default vfs.Default

	// SalvageTopic chooses the topics whose records Salvage appends again
	// and Verify counts as salvageable (nil: every topic). The broker
	// leaves out its own bookkeeping topics.
	SalvageTopic func(topic string) bool

	SegmentSize int64 // commit-log segment size; default 1 GiB

	FlushMode     FlushMode
	FlushInterval time.Duration // async: default 500ms
	FlushBytes    int64         // async: default 16 MiB
	// FlushTimeout bounds how long a sync-mode append waits for its fsync
	// before answering FlushTimeout (the record IS in the log). Default 2s.
	FlushTimeout time.Duration

	MaxBodySize   int // default 4 MiB
	MaxRecordSize int // default MaxBodySize + 256 KiB (topic, hosts, properties)

	// RetentionTime deletes whole segments whose records are all older;
	// default 72h; negative disables.
	RetentionTime time.Duration
	// DiskUsagePercent deletes the oldest segments while the file system
	// is fuller than this; default 85; negative disables.
	DiskUsagePercent  float64
	RetentionInterval time.Duration // default 10s

	// DiskReserve and DiskReservePercent set the disk reserve: free space
	// on the store's file system kept for the writes that let consumers
	// drain the store (their POP journal records, acknowledgements,
	// metadata, consume-queue and index files). CheckSpace refuses once
	// less is free; the broker asks it before storing a new message, and
	// nothing else is refused. The reserve is the larger of DiskReserve
	// bytes and DiskReservePercent of the file system's size. Defaults
	// 1 GiB and 5; a negative value leaves that part out, both negative
	// turn the reserve off (space.go).
	DiskReserve        int64
	DiskReservePercent float64

	// CheckpointInterval: how often consume queues and the index are
	// fsynced and the checkpoint written (also at once when the index
	// seals a full file, which waits in memory until then). Recovery
	// after a crash replays the log written since the last checkpoint.
	// Default 1s.
	CheckpointInterval time.Duration
	// MetaFlushInterval: how often asynchronous metadata (consumer
	// offsets) is persisted. Default 5s.
	MetaFlushInterval time.Duration

	CQEntriesPerFile int64 // default 300000 (8.4 MB files)
	IndexSlots       int   // default 1<<17
	IndexCapacity    int   // entries per index file; default 1<<18 (8 MiB)

	// StagingDir is a directory on a memory file system (tmpfs) where
	// async appends are staged before the commit log writes them out in
	// runs of up to 1 MiB (commitlog/staging.go): the ring survives a
	// process crash, and the next Open writes what it holds into the log.
	// The ring is a file of FS, which must be a vfs.SharedMemory. Default
	// /dev/shm when the store is on the OS file system and /dev/shm is a
	// tmpfs; "off" disables it. A change between a crash and the next
	// start is safe: the ring the last run wrote is replayed from where
	// it was.
	StagingDir string
	// StagingLinger is how long, under a steady stream of async appends,
	// the commit log waits for more before writing the staging ring out
	// (commitlog/staging.go, flushLoop): fewer, larger writes for less
	// CPU a send, while records reach their consume queues up to this
	// much later. It does not linger while readers wait for new records
	// (SetReadersWaiting), nor for the first record after a quiet spell.
	// Default 500µs; -1 writes as soon as something is staged.
	StagingLinger time.Duration
	// NoWriteBehind leaves the commit log's written pages to the kernel's
	// write-back until the next fsync. By default the log starts the
	// write-back of every 16 MiB it writes out of the staging ring as
	// soon as it is written (commitlog/staging.go, writeBehind).
	NoWriteBehind bool
	// LogCacheBytes is how much of the commit log behind the write
	// position stays in the page cache once written back: older pages
	// are dropped (commitlog/staging.go, dropBehind), and reads of them
	// (consumers that far behind) go to the disk. Default 1 GiB; -1
	// leaves it to the kernel. Async mode with a staging ring only.
	LogCacheBytes int64

	StoreHost string // written into each record's store host
	// Now is the clock for store times and retention; nil means the
	// system clock, read more cheaply than through time.Now (commitlog's
	// storeClock).
	Now    func() time.Time
	Logger *slog.Logger

	// feedMax overrides how many records the writer's feed to the
	// dispatcher holds (feed.go); < 0 turns the feed off. For tests.
	feedMax int
	// noSpaceLooks stops the background loop's looks at the free space
	// (space.go), so that a test counts CheckSpace's own.
	noSpaceLooks bool
}

// Defaults returns o with every zero field set to its default.
func (o Options) Defaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 30
	}
	switch {
	case o.StagingDir == "off":
		o.StagingDir = ""
	case o.StagingDir == "" && o.FS == vfs.Default && vfs.IsTmpfs("/dev/shm"):
		o.StagingDir = "/dev/shm"
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 500 * time.Millisecond
	}
	if o.FlushBytes == 0 {
		o.FlushBytes = 16 << 20
	}
	if o.LogCacheBytes == 0 {
		o.LogCacheBytes = 1 << 30
	}
	if o.StagingLinger == 0 {
		o.StagingLinger = 500 * time.Microsecond
	}
	if o.FlushTimeout == 0 {
		o.FlushTimeout = 2 * time.Second
	}
	if o.MaxBodySize == 0 {
		o.MaxBodySize = 4 << 20
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = o.MaxBodySize + 256<<10
	}
	if o.RetentionTime == 0 {
		o.RetentionTime = 72 * time.Hour
	}
	if o.DiskUsagePercent == 0 {
		o.DiskUsagePercent = 85
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = 10 * time.Second
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = DefaultDiskReserve
	}
	if o.DiskReservePercent == 0 {
		o.DiskReservePercent = DefaultDiskReservePercent
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Second
	}
	if o.MetaFlushInterval == 0 {
		o.MetaFlushInterval = 5 * time.Second
	}
	if o.CQEntriesPerFile == 0 {
		o.CQEntriesPerFile = 300_000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports an inconsistent configuration.
func (o Options) Validate() error {
	switch {
	case o.SegmentSize < 4<<10:
		return fmt.Errorf("%w: segment size %d < 4 KiB", serr.ErrInvalid, o.SegmentSize)
	case o.MaxBodySize <= 0 || o.MaxRecordSize <= o.MaxBodySize:
		return fmt.Errorf("%w: max body %d, max record %d", serr.ErrInvalid, o.MaxBodySize, o.MaxRecordSize)
	case int64(o.MaxRecordSize) > o.SegmentSize:
		return fmt.Errorf("%w: max record %d larger than segment %d", serr.ErrInvalid, o.MaxRecordSize, o.SegmentSize)
	case o.FlushMode != FlushAsync && o.FlushMode != FlushSync:
		return fmt.Errorf("%w: flush mode %d", serr.ErrInvalid, o.FlushMode)
	case o.FlushInterval < 0 || o.FlushTimeout < 0 || o.CheckpointInterval < 0 || o.RetentionInterval < 0:
		return fmt.Errorf("%w: negative interval", serr.ErrInvalid)
	case o.DiskUsagePercent > 100:
		return fmt.Errorf("%w: disk usage percent %v", serr.ErrInvalid, o.DiskUsagePercent)
	case o.DiskReservePercent >= 100:
		return fmt.Errorf("%w: disk reserve percent %v", serr.ErrInvalid, o.DiskReservePercent)
	}
	return nil
}
