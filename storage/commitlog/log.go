package commitlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Options configure a Log.
type Options struct {
	FS            vfs.FS
	Dir           string
	SegmentSize   int64
	MaxRecordSize int
	// SyncMode: the syncer fsyncs as soon as anything new is written, so
	// one fsync covers every append queued meanwhile (group commit).
	SyncMode bool
	// Async mode: fsync every FlushInterval, or sooner once FlushBytes
	// are unsynced.
	FlushInterval time.Duration
	FlushBytes    int64
	Now           func() time.Time // store times; nil: the system clock (storeClock)
	// Epoch is the origin of the monotonic readings AppendAt takes (a
	// time.Time from time.Now, which carries one). Zero: Open's time.
	Epoch  time.Time
	Logger *slog.Logger
	// OnSync is called after each fsync round (by the syncer, a sync-mode
	// leader, or whoever called Sync).
	OnSync func(bytes int64, d time.Duration, err error)
	// Notify, if set, is signalled (without blocking) whenever the written
	// or durable position advances.
	Notify chan struct{}
	// SyncerNice, when not 0 in sync mode, is the nice value (-20 to 19)
	// the syncer asks for the OS thread it then runs on alone, and a
	// leader for its thread while fsyncs are slow (priority.go). Refused
	// (no CAP_SYS_NICE), it is logged once and both run at the process's
	// priority.
	SyncerNice int
	// ZeroAhead > 0 keeps that many bytes of the active segment past the
	// write position written with zeros and fdatasynced (see zero.go), so
	// that fsyncs of appended records do not change the file's size.
	ZeroAhead int64
	// StagingDir, if set, is a directory on a memory file system (tmpfs)
	// for the staging ring of async appends (staging.go). Open replays a
	// ring left there by a crash in either mode; only async mode writes
	// one.
	StagingDir string
	// StagingLinger: under a steady stream of appends, the flusher waits
	// this long after being woken before it writes the ring out, so that
	// one write takes what arrives meanwhile (staging.go, flushLoop); 0
	// writes as soon as it is woken.
	StagingLinger time.Duration
	// NoWriteBehind: the flusher leaves the staging ring's writes to the
	// kernel's write-back rather than starting it every
	// writeBehindWindow bytes (staging.go).
	NoWriteBehind bool
	// KeepCached > 0: once the flusher is that many bytes past a part
	// of the log, it drops that part's pages from the page cache
	// (staging.go, dropBehind); reads further back go to the device.
	// 0: the kernel decides what stays cached.
	KeepCached int64
	// OnWrite, if set, is called by the writer role once a batch is
	// written (into the segment or the staging ring), before the batch
	// is visible to readers or answered: once per request, in log order.
	// recs' Data are the sealed records, valid during the call only;
	// ents say where they went. A batch that failed is not reported. It
	// must be quick and must not call the Log.
	OnWrite func(recs []Record, ents []Entry)
}

// Recovery tells Open what the previous run left.
type Recovery struct {
	// From is a record boundary known to be durable and valid (the
	// checkpoint's flushed position); validation starts there. A negative
	// value validates the whole log.
	From int64
	// CleanEnd, when >= 0, is the log end recorded by a clean shutdown:
	// if the files end exactly there, no record is scanned.
	CleanEnd int64
	// Cut, when set, ends the log at CutAt, a record boundary at or
	// below the recovered end: the records past it are removed (a
	// replica drops what it applied after its last recorded position and
	// applies it again). A recovered log that ends before CutAt, or
	// starts after it, is an error.
	Cut   bool
	CutAt int64
}

// RecoveryResult reports what Open found.
type RecoveryResult struct {
	Min, End  int64
	Scanned   int64 // bytes validated
	Records   int   // records validated
	Truncated int64 // bytes dropped (torn or invalid tail, orphan segments)
	FastPath  bool
	// Staged, StagedRecords: answered records the last run left in its
	// staging ring, written to the log by this Open.
	Staged        int64
	StagedRecords int
}

// Record is one encoded, not yet sealed, record to append.
type Record struct {
	Data    []byte // from message.Encode
	CRC     uint32 // partial CRC from message.Encode
	Topic   string
	QueueID int32
	// ResetTopic makes the writer forget every queue offset of Topic
	// after this record (a topic deletion marker).
	ResetTopic bool
	// StoreTime, when positive, is the record's store time (unix ms) as
	// the appender fixed it, taken as it is instead of the writer's
	// clock: replicas applying the same records in the same order then
	// write the same bytes. Later clock-stamped records never get an
	// earlier time.
	StoreTime int64
}

// Entry is where an appended record went.
type Entry struct {
	PhysOffset  int64
	Size        int32
	QueueOffset int64
	StoreTime   int64 // unix ms
}

type qkey struct {
	topic string
	queue int32
}

type request struct {
	recs    []Record
	entries []Entry
	end     int64
	err     error
	done    chan struct{} // capacity 1: signalled once (finish)
	inline  bool          // written by its own appender: done when writeBatch returns, nothing signalled
	at      time.Duration // the appender's clock reading (AppendAt); zero: none

	// AppendDurable only: the request is finished when its records are
	// durable (by Sync), not when written. state: reqQueued until the
	// writer writes it, then reqWritten (kept in Log.pending for Sync);
	// an appender that stops waiting before the write sets reqAbandoned
	// and the writer finishes it at the write instead. syncErr is a failed
	// fsync (the records are written, not durable); notDurable: finished
	// by Stop without an fsync covering them.
	durable    bool
	state      atomic.Int32
	syncErr    error
	notDurable bool
}

const (
	reqQueued int32 = iota
	reqWritten
	reqAbandoned
)

// Requests are reused: an append that got its answer returns its request
// to requestPool; one given up on its context leaves it to the writer and
// the GC.
var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// finish hands r's outcome to its appender. The writer calls it exactly
// once per request and does not touch r afterwards.
func (r *request) finish() {
	if !r.inline {
		r.done <- struct{}{}
	}
}

// recycle returns a finished request, whose answer its appender has
// read, to requestPool.
func (r *request) recycle() {
	*r = request{done: r.done}
	requestPool.Put(r)
}

// newRequest takes a request for recs and locks qmu, unless the log is
// closed (then it returns ErrClosed, with qmu released).
func (l *Log) newRequest(recs []Record) (*request, error) {
	r := requestPool.Get().(*request)
	r.recs = recs
	l.qmu.Lock()
	if l.closed {
		l.qmu.Unlock()
		r.recycle()
		return nil, serr.ErrClosed
	}
	return r, nil
}

// enqueueLocked queues r for the writer goroutine, releases qmu and wakes
// the writer.
// l.qmu must be held.
func (l *Log) enqueueLocked(r *request) {
	l.queue = append(l.queue, r)
	l.qmu.Unlock()
	l.wakeWriter()
}

func (l *Log) wakeWriter() { signal(l.wake) }

// signal wakes the goroutine that waits on ch (buffered, capacity 1)
// without blocking: a wake-up already pending covers this one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

type undo struct {
	k       qkey
	v       int64
	existed bool
}

// Log is the commit log. See the package doc.
//
// Its fields are grouped by who writes them, each group on cache lines of
// its own (the pads): an appender writing inline and the flusher run on
// different cores, and a line that both write (or one writes and the
// other reads on every append) moves between the cores each time. In
// BenchmarkAppendAsync the writer's wake-up of the flusher spent 15 % of
// writeBatch's own time loading fwake, which lay on the line of flushed.
type Log struct {
	opts   Options
	logger *slog.Logger
	failed atomic.Pointer[error]
	min    atomic.Int64

	_    cpu.CacheLinePad
	mu   sync.RWMutex // segment list; readers take it
	segs []*segment

	// Published by the flusher (or the writer without a ring) and the
	// syncer.
	_       cpu.CacheLinePad
	written atomic.Int64
	durable atomic.Int64

	// writer state, owned by whoever holds the writer role (busy, below)
	// after Start: an appender writing inline or the writer goroutine
	_      cpu.CacheLinePad
	active *segment
	qoff   map[qkey]*int64 // next queue offsets: one lookup per record, not a lookup and an insert
	// qcache holds recently used qoff entries (nextOffset); it is cleared
	// whenever qoff loses a key or a key's counter is replaced.
	qcache [qcacheSlots]qcached
	// entSlab: the entries handed out next (newEntries).
	entSlab   []Entry
	lastStore int64
	clock     storeClock
	buf       []byte
	undo      []undo
	wpos      int64 // where the next record goes

	// Staging ring (staging.go): stg is set by Open and cleared by Stop;
	// staging tells whether appends go through it. staged is the end of
	// what the writer staged and answered. fmu serializes writing the
	// ring out: flushed (changed under fmu only; atomic so the writer's
	// room check reads it without the lock) and fseg, the segment it goes
	// to.
	stg     *staging
	staging atomic.Bool
	staged  atomic.Int64
	fwake   chan struct{}
	// lingerCut tells a lingering flusher that lingerBytes are waiting
	// or that a reader waits (Hurry); readersWaiting is
	// SetReadersWaiting's function.
	lingerCut      chan struct{}
	readersWaiting atomic.Pointer[func() bool]
	// runEnds: per flushRun-sized stretch of the log (chunk c in slot
	// c mod len), the last record boundary the writer staged in it
	// (noteRunEnds); the flusher cuts its runs there (runEnd).
	runEnds   [runEndSlots]atomic.Int64
	noFlusher bool // tests: stage without writing out (a crash's view)
	// lingerWithin: lingerQuiet, or what a test set before Start.
	lingerWithin time.Duration
	stopFlusher  chan struct{}
	flusherDone  chan struct{}

	// The flusher's (staging.go).
	_       cpu.CacheLinePad
	fmu     sync.Mutex
	flushed atomic.Int64
	fseg    *segment
	// Write-behind (staging.go), under fmu: the write-back of wbSeg's
	// file is started up to file offset wbFrom.
	wbSeg  *segment
	wbFrom int64
	// dropFrom: the log position from which pages have not been dropped
	// (dropBehind), under fmu.
	dropFrom int64

	// Every appender's.
	_      cpu.CacheLinePad
	qmu    sync.Mutex
	queue  []*request
	spare  []*request
	closed bool
	wake   chan struct{}
	// busy: an appender (inline) or the writer goroutine holds the writer
	// role; idle is signalled (on qmu) when it is given up.
	busy      bool
	idle      sync.Cond
	one       [1]*request // the inline writer's batch: &inlineReq
	inlineReq request     // owned by the writer role

	_ cpu.CacheLinePad
	// The reserver (reserve.go): rsvSeg is the segment handed to it.
	rsvSeg  atomic.Pointer[segment]
	rsvWake chan struct{}
	rsvStop chan struct{}
	rsvDone chan struct{}

	syncWake chan struct{}
	syncMu   sync.Mutex // serializes Sync rounds (syncer and explicit calls)

	dmu sync.Mutex
	dch chan struct{}

	// pending: AppendDurable requests written and waiting for the fsync
	// that covers them, in log order; Sync finishes them. leading: a
	// leader goroutine runs fsync rounds for them (runLead); noLead
	// (Stop): none starts any more; leaderGone is signalled (on pmu) when
	// leading turns false. niceOK: raising a leader's priority has not
	// failed; lastFsync: the last round's fsync time, in ns.
	pmu        sync.Mutex
	pending    []*request
	leading    bool
	noLead     bool
	leaderGone sync.Cond
	niceOK     atomic.Bool
	lastFsync  atomic.Int64

	z zeroState // pre-zeroing, see zero.go

	stopWriter chan struct{}
	writerDone chan struct{}
	stopSyncer chan struct{}
	syncerDone chan struct{}
	started    bool
}

// Open opens (creating if needed) the log in opts.Dir and recovers it.
// Call SetQueueOffsets, then Start before appending.
func Open(opts Options, rec Recovery) (*Log, RecoveryResult, error) {
	if opts.SegmentSize <= 0 || opts.MaxRecordSize <= message.MinSize || int64(opts.MaxRecordSize) > opts.SegmentSize {
		return nil, RecoveryResult{}, fmt.Errorf("%w: segment size %d, max record %d", serr.ErrInvalid, opts.SegmentSize, opts.MaxRecordSize)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 500 * time.Millisecond
	}
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Now()
	}
	l := &Log{
		opts: opts, logger: opts.Logger, qoff: map[qkey]*int64{}, clock: storeClock{now: opts.Now, epoch: opts.Epoch},
		wake: make(chan struct{}, 1), syncWake: make(chan struct{}, 1), dch: make(chan struct{}),
		stopWriter: make(chan struct{}), writerDone: make(chan struct{}),
		stopSyncer: make(chan struct{}), syncerDone: make(chan struct{}),
		fwake: make(chan struct{}, 1), lingerWithin: lingerQuiet, lingerCut: make(chan struct{}, 1), stopFlusher: make(chan struct{}), flusherDone: make(chan struct{}),
		rsvWake: make(chan struct{}, 1), rsvStop: make(chan struct{}), rsvDone: make(chan struct{}),
	}
	l.idle.L = &l.qmu
	l.leaderGone.L = &l.pmu
	l.niceOK.Store(true)
	l.inlineReq.inline = true
	l.one[0] = &l.inlineReq
	if err := opts.FS.MkdirAll(opts.Dir); err != nil {
		return nil, RecoveryResult{}, err
	}
	res, err := l.recover(rec)
	if err != nil {
		l.closeSegments()
		return nil, res, err
	}
	return l, res, nil
}

func (l *Log) mapLen() int {
	if l.opts.SegmentSize > 1<<40 {
		return 0
	}
	return int(l.opts.SegmentSize)
}

func (l *Log) recover(rec Recovery) (RecoveryResult, error) {
	fs, dir := l.opts.FS, l.opts.Dir
	names, err := fs.List(dir)
	if err != nil {
		return RecoveryResult{}, err
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegName(n); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var res RecoveryResult
	if len(bases) == 0 {
		f, err := fs.Create(segPath(dir, 0))
		if err != nil {
			return res, err
		}
		if err := fs.SyncDir(dir); err != nil {
			f.Close()
			return res, err
		}
		l.segs = []*segment{newSegment(0, segPath(dir, 0), f, l.mapLen())}
		l.segs[0].dirSynced.Store(true)
		l.active = l.segs[0]
		res.FastPath = rec.CleanEnd == 0
		_, err = l.openStaging(0, &res)
		return res, err
	}
	sizes := make([]int64, 0, len(bases))
	for _, b := range bases {
		f, err := fs.OpenRW(segPath(dir, b))
		if err != nil {
			return res, err
		}
		sz, err := f.Size()
		if err != nil {
			f.Close()
			return res, err
		}
		l.segs = append(l.segs, newSegment(b, segPath(dir, b), f, l.mapLen()))
		sizes = append(sizes, sz)
	}
	// Contiguity: a segment that does not start where the previous one
	// ends follows lost bytes; it and everything after it are orphans.
	for i := 0; i+1 < len(l.segs); i++ {
		if l.segs[i].base+sizes[i] != l.segs[i+1].base {
			l.logger.Warn("commitlog: segment gap, dropping later segments",
				"segment", l.segs[i].path, "end", l.segs[i].base+sizes[i], "next", l.segs[i+1].base)
			for j := i + 1; j < len(l.segs); j++ {
				res.Truncated += sizes[j]
				l.segs[j].release()
				if err := fs.Remove(l.segs[j].path); err != nil {
					return res, err
				}
			}
			l.segs, sizes = l.segs[:i+1], sizes[:i+1]
			if err := fs.SyncDir(dir); err != nil {
				return res, err
			}
			break
		}
	}
	last := len(l.segs) - 1
	end := l.segs[last].base + sizes[last]
	res.Min = l.segs[0].base
	if rec.CleanEnd >= 0 && rec.CleanEnd == end {
		res.FastPath = true
	} else {
		start := rec.From
		if start < l.segs[0].base || start > end {
			start = l.segs[0].base
		}
		var err error
		end, err = l.scanFrom(start, sizes, &res)
		if err != nil {
			return res, err
		}
	}
	if end, err = l.openStaging(end, &res); err != nil {
		return res, err
	}
	if res.Staged > 0 {
		res.FastPath = false
	}
	if rec.Cut && rec.CutAt != end {
		if end, err = l.cut(rec.CutAt, end, &res); err != nil {
			return res, err
		}
		res.FastPath = false
	}
	if !res.FastPath {
		// What recovery kept outlived a process crash in the page cache,
		// not necessarily on the disk, nor did the names of segments
		// that no Sync covered: make it durable before Durable says so.
		if err := l.syncRecovered(rec.From, end); err != nil {
			return res, err
		}
	}
	for _, s := range l.segs {
		s.dirSynced.Store(true)
	}
	l.active = l.segs[len(l.segs)-1]
	l.min.Store(l.segs[0].base)
	l.written.Store(end)
	l.durable.Store(end)
	res.End = end
	return res, nil
}

// cut ends the recovered log at at (Recovery.Cut). Open only.
func (l *Log) cut(at, end int64, res *RecoveryResult) (int64, error) {
	if at > end || at < l.segs[0].base {
		return 0, fmt.Errorf("%w: commitlog: cannot cut at %d: the log holds [%d, %d)", serr.ErrCorrupt, at, l.segs[0].base, end)
	}
	// The segment holding the byte before at (the first one if at is 0).
	i := max(sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base >= at })-1, 0)
	s := l.segs[i]
	sz, err := s.f.Size()
	if err != nil {
		return 0, err
	}
	if at-s.base < sz {
		l.logger.Info("commitlog: cutting log", "segment", s.path, "at", at, "dropped", end-at)
		if err := s.f.Truncate(at - s.base); err != nil {
			return 0, err
		}
		if err := s.f.Sync(); err != nil {
			return 0, err
		}
	}
	for j := i + 1; j < len(l.segs); j++ {
		l.segs[j].release()
		if err := l.opts.FS.Remove(l.segs[j].path); err != nil {
			return 0, err
		}
	}
	l.segs = l.segs[:i+1]
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return 0, err
	}
	res.Truncated += end - at
	return at, nil
}

// syncRecovered fsyncs the segments that hold log past from (all of them
// if from < 0) and the directory. Open only.
func (l *Log) syncRecovered(from, end int64) error {
	for i, s := range l.segs {
		segEnd := end
		if i+1 < len(l.segs) {
			segEnd = l.segs[i+1].base
		}
		if from >= 0 && segEnd <= from {
			continue
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("commitlog: fsync recovered %s: %w", s.path, err)
		}
	}
	return l.opts.FS.SyncDir(l.opts.Dir)
}

// scanFrom validates records from start to the end of the log, truncating
// a torn tail at the first invalid record; if valid records follow that
// one, it truncates nothing and fails with a *DamageError. It returns the
// valid end.
func (l *Log) scanFrom(start int64, sizes []int64, res *RecoveryResult) (int64, error) {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > start }) - 1
	pos := start
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		segEnd := s.base + sizes[i]
		valid, n, err := ScanValid(s.f, pos-s.base, sizes[i], s.base, l.opts.MaxRecordSize, 4<<20)
		if err != nil {
			return 0, fmt.Errorf("commitlog: scan %s: %w", s.path, err)
		}
		res.Records += n
		res.Scanned += valid - (pos - s.base)
		pos = s.base + valid
		if pos == segEnd {
			continue
		}
		// Invalid or torn record at pos. If a valid record follows it
		// anywhere, this is damage in the middle of the log: refuse to
		// open rather than cut the records after it (damage.go).
		if derr, err := l.damageAt(pos, sizes); err != nil {
			return 0, err
		} else if derr != nil {
			return 0, derr
		}
		// A torn tail: keep the valid prefix only. A tail of zeros
		// (see allZeroAt) holds no data.
		if i == len(l.segs)-1 && allZeroAt(s.f, pos-s.base, sizes[i]) {
			l.logger.Debug("commitlog: cutting zero tail", "segment", s.path, "at", pos, "bytes", segEnd-pos)
		} else {
			l.logger.Warn("commitlog: truncating invalid tail", "segment", s.path, "at", pos, "dropped", segEnd-pos)
			res.Truncated += segEnd - pos
		}
		if err := s.f.Truncate(pos - s.base); err != nil {
			return 0, err
		}
		if err := s.f.Sync(); err != nil {
			return 0, err
		}
		for j := i + 1; j < len(l.segs); j++ {
			res.Truncated += sizes[j]
			l.segs[j].release()
			if err := l.opts.FS.Remove(l.segs[j].path); err != nil {
				return 0, err
			}
		}
		l.segs = l.segs[:i+1]
		if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
			return 0, err
		}
		break
	}
	return pos, nil
}

// ScanValid validates records in r between file offsets off and end,
// where file offset 0 is log position base, reading chunk bytes at a time.
// It returns the file offset where the valid prefix ends and the number of
// valid records. A record is valid when message.Verify accepts it and its
// physical offset field equals its position.
func ScanValid(r io.ReaderAt, off, end, base int64, maxRecord, chunk int) (int64, int, error) {
	if chunk < maxRecord {
		chunk = maxRecord
	}
	buf := make([]byte, min(int64(chunk), max(end-off, 0)))
	records := 0
	for off < end {
		n := min(int64(len(buf)), end-off)
		if _, err := r.ReadAt(buf[:n], off); err != nil && !(errors.Is(err, io.EOF)) {
			return off, records, err
		}
		b := buf[:n]
		p := 0
		for p < len(b) {
			size, err := message.Verify(b[p:], maxRecord)
			if errors.Is(err, message.ErrShort) && int64(len(b)) == n && off+int64(len(b)) < end && p > 0 {
				break // record continues past this chunk: read from it again
			}
			if err != nil {
				return off + int64(p), records, nil
			}
			h, _ := message.ParseHeader(b[p:])
			if h.PhysOffset != base+off+int64(p) {
				return off + int64(p), records, nil
			}
			p += size
			records++
		}
		if p == 0 {
			return off, records, nil
		}
		off += int64(p)
	}
	return off, records, nil
}

// SetQueueOffsets installs the next queue offset of each (topic, queue),
// as recovered from the consume queues. Call before Start.
func (l *Log) SetQueueOffsets(next func(yield func(topic string, queue int32, next int64))) {
	next(func(t string, q int32, n int64) { l.qoff[qkey{t, q}] = &n })
	clear(l.qcache[:])
}

// SetLastStoreTime makes store times at least ms (monotonic across restarts).
func (l *Log) SetLastStoreTime(ms int64) {
	if ms > l.lastStore {
		l.lastStore = ms
	}
}

// Start launches the writer and syncer goroutines.
func (l *Log) Start() {
	l.qmu.Lock()
	l.started = true
	l.qmu.Unlock()
	l.wpos = l.written.Load()
	l.staged.Store(l.wpos)
	l.flushed.Store(l.wpos)
	l.fseg = l.active
	l.dropFrom = l.wpos
	l.startZeroer()
	go l.writeLoop()
	go l.syncLoop()
	if l.staging.Load() && !l.noFlusher {
		go l.flushLoop()
	} else {
		close(l.flusherDone)
	}
	go l.reserveLoop()
	l.reserveAhead(l.active)
}

// Min is the first position still stored.
func (l *Log) Min() int64 { return l.min.Load() }

// Written is the end of the written log; readers see bytes below it.
func (l *Log) Written() int64 { return l.written.Load() }

// WrittenFor returns Written, after writing the staging ring out up to
// the record that holds position end-1 if end lies in what was answered
// but is still staged: for a reader that knows a record's position before
// any queue does (Read, the store's reads by position).
func (l *Log) WrittenFor(end int64) (int64, error) {
	if w := l.written.Load(); end <= w || !l.staging.Load() || end > l.staged.Load() {
		return w, nil
	}
	if err := l.flushStagedTo(end); err != nil {
		return 0, err
	}
	return l.written.Load(), nil
}

// Staging reports whether appends go through a staging ring.
func (l *Log) Staging() bool { return l.staging.Load() }

// Answered is the end of what appends were answered for: Written, or with
// a staging ring the end of what was staged, which the flusher writes out
// soon after.
func (l *Log) Answered() int64 {
	w := l.written.Load()
	if l.staging.Load() {
		return max(l.staged.Load(), w)
	}
	return w
}

// Durable is the end of the fsynced log.
func (l *Log) Durable() int64 { return l.durable.Load() }

// Failed returns the sticky error that made the log read-only, if any.
func (l *Log) Failed() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) setFailed(err error) {
	e := fmt.Errorf("%w: %w", serr.ErrNotWritable, err)
	l.failed.CompareAndSwap(nil, &e)
}

// Append queues records for the writer and waits until they are written
// (not necessarily durable). Records of one call are contiguous in the
// log. It returns each record's entry and the end position of the call.
func (l *Log) Append(ctx context.Context, recs []Record) ([]Entry, int64, error) {
	return l.AppendAt(ctx, recs, 0)
}

// AppendAt is Append for a caller that has just read the monotonic clock:
// at is that reading, as time since Options.Epoch, and becomes the store
// time (never earlier than the last one) instead of the writer reading the
// clock again. Zero (or negative): the writer reads it.
func (l *Log) AppendAt(ctx context.Context, recs []Record, at time.Duration) ([]Entry, int64, error) {
	if err := l.Failed(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("commitlog: append: %w (nothing written)", err)
	}
	l.qmu.Lock()
	if l.closed {
		l.qmu.Unlock()
		return nil, 0, serr.ErrClosed
	}
	if !l.opts.SyncMode && l.started && !l.busy && len(l.queue) == 0 {
		// Nobody is writing and nobody waits: write inline, sparing the
		// hand-off to the writer goroutine and back (two wake-ups per
		// append when appends come one at a time, as gRPC sends do). Not
		// in sync mode: there the writer goroutine's batches fill the
		// fsync rounds better (AppendSync: 35-38 appends per fsync with
		// inline writes against 44 without, 12 % fewer appends/s).
		r := &l.inlineReq
		r.recs, r.at = recs, at
		return l.writeInline(r)
	}
	r := requestPool.Get().(*request)
	r.recs, r.at = recs, at
	l.enqueueLocked(r)
	select {
	case <-r.done:
		ents, end, err := r.entries, r.end, r.err
		r.recycle()
		return ents, end, err
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("commitlog: append: %w (the records may still be written)", ctx.Err())
	}
}

// writeInline takes the free writer role (l.qmu held, released here),
// writes r alone and gives the role up again. It returns r's answer when r
// is the role's own request (Log.inlineReq), whose fields it clears; any
// other request is answered as the writer answers it (finished, or parked
// in pending when durable).
func (l *Log) writeInline(r *request) ([]Entry, int64, error) {
	l.busy = true
	l.qmu.Unlock()
	l.one[0] = r
	l.writeBatch(l.one[:])
	l.one[0] = &l.inlineReq
	var ents []Entry
	var end int64
	var err error
	if r == &l.inlineReq {
		// The role's own: read before the role is given up.
		ents, end, err = r.entries, r.end, r.err
		r.recs, r.entries, r.err = nil, nil, nil
	}
	l.release()
	return ents, end, err
}

// release gives up the writer role after an inline write and hands what
// was queued meanwhile to the writer goroutine.
func (l *Log) release() {
	l.qmu.Lock()
	l.busy = false
	pending := len(l.queue) > 0
	l.idle.Broadcast()
	l.qmu.Unlock()
	if pending {
		l.wakeWriter()
	}
}

// writeLoop writes the appends that found the writer role taken: under
// contention it batches them (group commit of the write calls).
func (l *Log) writeLoop() {
	defer close(l.writerDone)
	for {
		select {
		case <-l.wake:
		case <-l.stopWriter:
			// Drain what was queued before close, after any inline
			// write (closed is set: no new one starts).
			l.qmu.Lock()
			for l.busy {
				l.idle.Wait()
			}
			batch := l.queue
			l.queue = nil
			l.qmu.Unlock()
			if len(batch) > 0 {
				l.writeBatch(batch)
				if l.opts.SyncMode {
					l.elect()
				}
			}
			return
		}
		for {
			// Let appenders that are runnable (typically the ones the last
			// batch just woke) enqueue first: batches grow under load, and
			// with nothing else runnable this returns at once.
			l.gather()
			l.qmu.Lock()
			if l.busy || len(l.queue) == 0 {
				// An inline writer holds the role: it wakes this
				// goroutine when it is done if anything is queued.
				l.qmu.Unlock()
				break
			}
			l.busy = true
			batch := l.queue
			l.queue, l.spare = l.spare[:0], nil
			l.qmu.Unlock()
			l.writeBatch(batch)
			clear(batch)
			l.spare = batch
			l.qmu.Lock()
			l.busy = false
			l.idle.Broadcast()
			l.qmu.Unlock()
			if l.opts.SyncMode {
				l.elect()
			}
		}
	}
}

const maxWriteChunk = 4 << 20

// gather yields while appenders keep arriving (a few times at most), so
// one write serves many of them.
func (l *Log) gather() {
	for i := 0; i < 8; i++ {
		l.qmu.Lock()
		n := len(l.queue)
		l.qmu.Unlock()
		runtime.Gosched()
		l.qmu.Lock()
		m := len(l.queue)
		l.qmu.Unlock()
		if m == n {
			return
		}
	}
}

func (l *Log) roll(old *segment, base int64) (*segment, error) {
	// The old segment must end exactly at base, durably, before a segment
	// starting at base exists: recovery checks contiguity by file sizes.
	// A pre-zeroed tail is cut.
	l.retarget(nil, 0)
	if l.staging.Load() {
		// Everything staged for the old segment goes into it first.
		if err := l.flushTo(base, true); err != nil {
			return nil, err
		}
	}
	if err := l.cutTail(old, base-old.base); err != nil {
		return nil, err
	}
	p := segPath(l.opts.Dir, base)
	f, err := l.opts.FS.Create(p)
	if err != nil {
		return nil, err
	}
	// Not fsyncing the directory here: Sync does before Durable passes
	// base (dirSynced). Here it held the writer role, and so every
	// append, for 10-90 ms on a test VM (an ext4 journal commit that
	// waits for the data written before it).
	s := newSegment(base, p, f, l.mapLen())
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	l.reserveAhead(s)
	if l.staging.Load() {
		l.fmu.Lock()
		l.fseg = s
		l.fmu.Unlock()
	}
	l.retarget(s, 0)
	return s, nil
}

// writeAt writes b at file offset off of seg, the active segment: into
// the staging ring when there is one, otherwise with pwrite.
func (l *Log) writeAt(seg *segment, b []byte, off int64) error {
	if l.staging.Load() {
		err := l.stage(seg, b, off)
		if err == nil || !errors.Is(err, vfs.ErrNoAllocate) {
			return err
		}
		if err := l.stopStaging(seg.base + off); err != nil {
			return err
		}
	}
	_, err := seg.f.WriteAt(b, off)
	return err
}

// cutTail truncates seg's file to size if it is longer and makes the new
// size durable.
func (l *Log) cutTail(seg *segment, size int64) error {
	sz, err := seg.f.Size()
	if err != nil {
		return err
	}
	if sz <= size {
		return nil
	}
	if err := seg.truncate(size); err != nil {
		return err
	}
	if err := seg.f.Sync(); err != nil {
		l.setFailed(fmt.Errorf("fsync: %w", err))
		l.broadcast()
		return err
	}
	return nil
}

func (l *Log) writeBatch(batch []*request) {
	if err := l.Failed(); err != nil {
		for _, r := range batch {
			r.err = err
			r.finish()
		}
		return
	}
	// The latest of the appenders' clock readings, unless one of them
	// has none.
	at := time.Duration(0)
	for _, r := range batch {
		if r.at <= 0 {
			at = 0
			break
		}
		at = max(at, r.at)
	}
	now := l.clock.millis(at)
	if now < l.lastStore {
		now = l.lastStore
	}
	l.lastStore = now
	start := l.wpos
	first := l.active
	pos := start
	seg := l.active
	bufPos := pos
	buf := l.buf[:0]
	l.undo = l.undo[:0]
	var newSegs []*segment
	var err error
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		l.reserve(seg, bufPos-seg.base+int64(len(buf)))
		err := l.writeAt(seg, buf, bufPos-seg.base)
		buf = buf[:0]
		bufPos = pos
		return err
	}
outer:
	for _, r := range batch {
		r.entries = l.newEntries(len(r.recs))
		for i := range r.recs {
			rec := &r.recs[i]
			n := int64(len(rec.Data))
			if pos > seg.base && pos-seg.base+n > l.opts.SegmentSize {
				if err = flush(); err != nil {
					break outer
				}
				if seg, err = l.roll(seg, pos); err != nil {
					break outer
				}
				newSegs = append(newSegs, seg)
				bufPos = pos
			}
			k := qkey{rec.Topic, rec.QueueID}
			next, existed := l.nextOffset(k)
			qo := *next
			l.undo = append(l.undo, undo{k, qo, existed})
			*next = qo + 1
			if rec.ResetTopic {
				for kk, v := range l.qoff {
					if kk.topic == rec.Topic {
						l.undo = append(l.undo, undo{kk, *v, true})
						delete(l.qoff, kk)
					}
				}
				clear(l.qcache[:])
			}
			t := now
			if rec.StoreTime > 0 {
				t = rec.StoreTime
				l.lastStore = max(l.lastStore, t)
			}
			message.Seal(rec.Data, rec.CRC, pos, qo, t)
			if len(buf) == 0 && l.staging.Load() {
				// Straight into the ring, not copied through buf first.
				if err = l.writeAt(seg, rec.Data, pos-seg.base); err != nil {
					break outer
				}
				bufPos = pos + n
			} else {
				buf = append(buf, rec.Data...)
			}
			r.entries[i] = Entry{PhysOffset: pos, Size: int32(n), QueueOffset: qo, StoreTime: t}
			pos += n
			if len(buf) >= maxWriteChunk {
				if err = flush(); err != nil {
					break outer
				}
			}
		}
		r.end = pos
	}
	if err == nil {
		err = flush()
	}
	if cap(buf) <= 2*maxWriteChunk {
		l.buf = buf[:0]
	}
	if err != nil {
		l.rollback(start, first, newSegs)
		e := fmt.Errorf("%w: %w", serr.ErrNotWritable, err)
		l.logger.Error("commitlog: write failed; batch rejected", "err", err, "records_at", start)
		for _, r := range batch {
			r.entries, r.end, r.err = nil, 0, e
			r.finish()
		}
		return
	}
	if l.opts.OnWrite != nil {
		for _, r := range batch {
			l.opts.OnWrite(r.recs, r.entries)
		}
	}
	l.active = seg
	l.wpos = pos
	if l.staging.Load() {
		l.noteRunEnds(batch)
		l.staged.Store(pos)
		l.wakeFlusher()
		if l.opts.StagingLinger > 0 && pos-l.flushed.Load() >= lingerBytes {
			signal(l.lingerCut)
		}
	} else {
		l.written.Store(pos)
		l.notify()
	}
	parked, others := false, false
	for _, r := range batch {
		if r.durable && r.state.CompareAndSwap(reqQueued, reqWritten) {
			// Sync finishes it: one wake-up for its appender, not two.
			if !parked {
				l.pmu.Lock()
				parked = true
			}
			l.pending = append(l.pending, r)
			continue
		}
		others = true
		r.finish()
	}
	if parked {
		l.pmu.Unlock()
	}
	// Durable appends are covered by the leader's rounds (elect, which
	// the writer calls next); the syncer covers the rest.
	if l.opts.SyncMode && others || pos-l.durable.Load() >= l.opts.FlushBytes && l.opts.FlushBytes > 0 {
		signal(l.syncWake)
	}
}

// qcached is a slot of Log.qcache.
type qcached struct {
	k    qkey
	next *int64
}

const qcacheSlots = 64

// nextOffset returns the counter of k's next queue offset, made (at 0)
// if k has none, and whether it existed. Writer only.
//
// A small cache in front of the map: looking the key up in qoff hashes
// its topic, 3 % of BenchmarkAppendAsync's CPU, where a cache hit
// compares the topic with the cached one (the same string, usually, and
// equal pointers compare at once).
func (l *Log) nextOffset(k qkey) (*int64, bool) {
	h := uint(k.queue) * 0x9E3779B1
	if n := len(k.topic); n > 0 {
		h += uint(n)<<7 ^ uint(k.topic[0])<<11 ^ uint(k.topic[n-1])<<3
	}
	c := &l.qcache[h%qcacheSlots]
	if c.next != nil && c.k == k {
		return c.next, true
	}
	next, existed := l.qoff[k]
	if !existed {
		next = new(int64)
		l.qoff[k] = next
	}
	*c = qcached{k, next}
	return next, existed
}

// entrySlab: how many entries newEntries allocates at once.
const entrySlab = 256

// newEntries returns n zeroed entries for a request. They come from a
// slab of entrySlab, so that an append of one record does not allocate
// (4 % of BenchmarkAppendAsync's CPU went to allocating one Entry per
// append). A caller that keeps its entries keeps the slab's 8 KiB alive
// with them. Writer only.
func (l *Log) newEntries(n int) []Entry {
	if n > entrySlab/4 {
		return make([]Entry, n)
	}
	if len(l.entSlab) < n {
		l.entSlab = make([]Entry, entrySlab)
	}
	e := l.entSlab[:n:n]
	l.entSlab = l.entSlab[n:]
	return e
}

// rollback undoes a failed batch: queue offsets, new segments, and any
// bytes written past start.
func (l *Log) rollback(start int64, first *segment, newSegs []*segment) {
	if l.staging.Load() {
		l.fmu.Lock()
		if l.flushed.Load() > start {
			l.flushed.Store(start)
		} else if err := l.flushLocked(start, true); err != nil {
			l.logger.Warn("commitlog: write staged records before a failed batch", "err", err)
		}
		l.fseg = first
		if l.flushed.Load()+l.stg.size >= start+message.MinSize {
			// Not over bytes still to be written out.
			l.forgetStaged(start)
		}
		l.fmu.Unlock()
	}
	clear(l.qcache[:])
	for i := len(l.undo) - 1; i >= 0; i-- {
		u := l.undo[i]
		if u.existed {
			if next := l.qoff[u.k]; next != nil {
				*next = u.v
			} else { // deleted by a topic reset in the batch
				v := u.v
				l.qoff[u.k] = &v
			}
		} else {
			delete(l.qoff, u.k)
		}
	}
	if len(newSegs) > 0 {
		l.mu.Lock()
		l.segs = l.segs[:len(l.segs)-len(newSegs)]
		l.mu.Unlock()
		for _, s := range newSegs {
			s.release()
			l.opts.FS.Remove(s.path)
		}
		l.opts.FS.SyncDir(l.opts.Dir)
	}
	l.retarget(nil, 0) // no zero write in flight while truncating
	if err := first.truncate(start - first.base); err != nil {
		// The bytes past start are garbage that recovery will cut; later
		// writes overwrite them in place.
		l.logger.Warn("commitlog: truncate after failed write", "err", err)
	}
	l.retarget(first, start-first.base)
	l.active = first
	l.reserveAhead(first)
}

func (l *Log) syncLoop() {
	defer close(l.syncerDone)
	raised := false
	if l.opts.SyncMode && l.opts.SyncerNice != 0 {
		restore, err := raiseSyncerPriority(l.opts.SyncerNice)
		if err != nil {
			l.logger.Info("commitlog: the fsync thread keeps the process's priority", "nice", l.opts.SyncerNice, "err", err)
		}
		raised = err == nil
		defer restore()
	}
	var tick <-chan time.Time
	if !l.opts.SyncMode {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-l.syncWake:
		case <-tick:
		case <-l.stopSyncer:
			return
		}
		// On a thread of its own the syncer starts the round at once,
		// with what is written: yielding first to let more appenders in
		// cost more than it gathered (each yield of a locked goroutine
		// is two thread switches), and the appends that arrive during
		// the fdatasync make the next round.
		if l.opts.SyncMode && !raised {
			l.pace()
		}
		_ = l.Sync() // a failure is recorded by Sync and seen by every waiter
	}
}

// pace lets the appenders that are runnable (typically the ones the last
// fsync released) append before a sync-mode fsync starts, so that it covers
// them; it returns as soon as no append is queued and nothing more was
// written, and never waits on a timer. Only a syncer that shares the
// scheduler's threads paces (syncLoop).
//
// It does not wait for as many appenders as the previous fsync released:
// over gRPC a released producer's next send arrives only after its answer
// has travelled to the client and back, so such a wait would mostly run
// out a timer while the disk stood idle (measured: sync sends over gRPC
// 10 % slower with it, AppendSync level).
func (l *Log) pace() {
	for i := 0; i < 16; i++ {
		w := l.written.Load()
		l.gather()
		l.qmu.Lock()
		idle := len(l.queue) == 0 && !l.busy
		l.qmu.Unlock()
		if idle && l.written.Load() == w {
			return
		}
	}
}

// Sync fsyncs everything written so far and publishes the durable
// position. The syncer calls it; Close and tests may too.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.Failed(); err != nil {
		// Requests parked after the round that failed the log (written
		// between their append's check and the failure) get it too.
		l.finishDurable(-1, err)
		return err
	}
	if err := l.flushStaged(); err != nil {
		return err
	}
	target := l.written.Load()
	from := l.durable.Load()
	if target <= from {
		l.finishDurable(from, nil)
		return nil
	}
	t0 := time.Now()
	l.mu.RLock()
	var segs []*segment
	for i, s := range l.segs {
		end := target
		if i+1 < len(l.segs) {
			end = l.segs[i+1].base
		}
		if end > from && s.base < target {
			s.acquire()
			segs = append(segs, s)
		}
	}
	l.mu.RUnlock()
	var err error
	newDir := false
	for _, s := range segs {
		if err == nil {
			err = s.f.Sync()
		}
		newDir = newDir || !s.dirSynced.Load()
	}
	if err == nil && newDir {
		// A segment created since the last round: its name too.
		if err = l.opts.FS.SyncDir(l.opts.Dir); err == nil {
			for _, s := range segs {
				s.dirSynced.Store(true)
			}
		}
	}
	for _, s := range segs {
		s.release()
	}
	took := time.Since(t0)
	l.lastFsync.Store(int64(took))
	if l.opts.OnSync != nil {
		l.opts.OnSync(target-from, took, err)
	}
	if err != nil {
		// After a failed fsync the page cache state is unknown: stop
		// accepting writes until the store is reopened and recovered.
		l.setFailed(fmt.Errorf("fsync: %w", err))
		l.logger.Error("commitlog: fsync failed; log is now read-only", "err", err)
		l.broadcast()
		l.finishDurable(-1, l.Failed())
		return l.Failed()
	}
	l.durable.Store(target)
	l.finishDurable(target, nil)
	l.broadcast()
	l.notify()
	return nil
}

// finishDurable finishes the pending AppendDurable requests that end at or
// below durable; with err (a failed fsync), every pending request.
func (l *Log) finishDurable(durable int64, err error) {
	l.pmu.Lock()
	n := 0
	for n < len(l.pending) && (err != nil || l.pending[n].end <= durable) {
		n++
	}
	done := l.pending[:n:n]
	l.pending = l.pending[n:]
	if len(l.pending) == 0 {
		l.pending = nil
	}
	l.pmu.Unlock()
	for _, r := range done {
		r.syncErr = err
		r.finish()
	}
}

// AppendDurable is Append followed by WaitDurable(ctx, end, deadline),
// with one wake-up instead of two: the request stays with the log until
// the fsync that covers it (Sync finishes it). It reports whether the
// records are durable; false with a nil error means they are written but
// the deadline (or ctx) came first, or the log stopped without an fsync.
// An error after the write (a failed fsync) comes with the entries: the
// records are in the log, not durable. Sync mode only.
//
// The fsync rounds that cover durable appends are not the syncer's: once
// the writer has parked written requests and no round runs, it starts a
// leader goroutine (elect) that runs rounds back to back until nothing is
// pending, then ends. The syncer runs on a thread of its own, and waking
// that thread for every round cost more than the round itself wherever
// fsyncs are fast.
func (l *Log) AppendDurable(ctx context.Context, recs []Record, deadline time.Time) ([]Entry, int64, bool, error) {
	if err := l.Failed(); err != nil {
		return nil, 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, false, fmt.Errorf("commitlog: append: %w (nothing written)", err)
	}
	r, err := l.newRequest(recs)
	if err != nil {
		return nil, 0, false, err
	}
	r.durable = true
	if l.started && !l.busy && len(l.queue) == 0 && l.lastFsync.Load() < int64(slowFsync) {
		// Fast fsyncs: write inline, as async appends do (slowFsync).
		l.writeInline(r)
		l.elect()
	} else {
		l.enqueueLocked(r)
	}
	var tc <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-r.done:
		ents, end, err, syncErr, notDurable := r.entries, r.end, r.err, r.syncErr, r.notDurable
		r.recycle()
		if err != nil {
			return nil, 0, false, err
		}
		return ents, end, syncErr == nil && !notDurable, syncErr
	case <-tc:
	case <-ctx.Done():
	}
	// Given up waiting. r is left to whoever finishes it, then the GC.
	if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
		// Not written yet: the writer finishes r when it has written it.
		if ctx.Err() != nil {
			return nil, 0, false, fmt.Errorf("commitlog: append: %w (the records may still be written)", ctx.Err())
		}
		select {
		case <-r.done:
			if r.err != nil {
				return nil, 0, false, r.err
			}
			return r.entries, r.end, l.durable.Load() >= r.end, nil
		case <-ctx.Done():
			return nil, 0, false, fmt.Errorf("commitlog: append: %w (the records may still be written)", ctx.Err())
		}
	}
	// Written (state reqWritten, set after entries and end): Sync will
	// finish r; it may already be durable.
	return r.entries, r.end, l.durable.Load() >= r.end, nil
}

// elect makes sure an fsync round covers what the writer role has just
// parked in pending: unless a round runs, it starts a goroutine that runs
// rounds (runLead) until nothing is pending.
func (l *Log) elect() {
	l.pmu.Lock()
	if l.leading || l.noLead || len(l.pending) == 0 {
		l.pmu.Unlock()
		return
	}
	l.leading = true
	l.pmu.Unlock()
	go l.runLead()
}

// runLead runs fsync rounds back to back while durable appends are
// pending (elect started it). When the last fsync was slow it first raises
// its thread's priority as the syncer does (priority.go), and puts it back
// before it ends.
func (l *Log) runLead() {
	if l.opts.SyncerNice != 0 && l.niceOK.Load() && l.lastFsync.Load() >= int64(slowFsync) {
		restore, err := raiseSyncerPriority(l.opts.SyncerNice)
		if err != nil {
			l.niceOK.Store(false)
		} else {
			defer func() { restore(); runtime.UnlockOSThread() }()
		}
	}
	for {
		err := l.Sync()
		l.pmu.Lock()
		if l.noLead || err != nil || len(l.pending) == 0 {
			l.leading = false
			l.leaderGone.Broadcast()
			l.pmu.Unlock()
			return
		}
		l.pmu.Unlock()
	}
}

// stopLeaders keeps any further leader from starting and waits for the
// one running, if any, to end its round.
func (l *Log) stopLeaders() {
	l.pmu.Lock()
	l.noLead = true
	for l.leading {
		l.leaderGone.Wait()
	}
	l.pmu.Unlock()
}

func (l *Log) notify() {
	if l.opts.Notify != nil {
		signal(l.opts.Notify)
	}
}

func (l *Log) broadcast() {
	l.dmu.Lock()
	close(l.dch)
	l.dch = make(chan struct{})
	l.dmu.Unlock()
}

func (l *Log) durableCh() <-chan struct{} {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.dch
}

// WaitDurable waits until pos is durable, ctx is done or the deadline
// passes. It reports whether pos is durable; a non-nil error means the
// log failed (fsync error).
func (l *Log) WaitDurable(ctx context.Context, pos int64, deadline time.Time) (bool, error) {
	if l.durable.Load() >= pos {
		return true, nil
	}
	var timer *time.Timer
	var tc <-chan time.Time
	for {
		if l.durable.Load() >= pos {
			return true, nil
		}
		if err := l.Failed(); err != nil {
			return false, err
		}
		ch := l.durableCh()
		if l.durable.Load() >= pos {
			return true, nil
		}
		if timer == nil && !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return false, nil
			}
			timer = time.NewTimer(d)
			defer timer.Stop()
			tc = timer.C
		}
		select {
		case <-ch:
		case <-tc:
			return l.durable.Load() >= pos, nil
		case <-ctx.Done():
			return l.durable.Load() >= pos, nil
		}
	}
}

// segFor returns the segment holding pos, acquired, and its end.
func (l *Log) segFor(pos int64) (*segment, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return nil, 0, serr.ErrClosed
	}
	if pos < l.segs[0].base {
		return nil, 0, fmt.Errorf("%w: position %d below log start %d", serr.ErrOffsetMoved, pos, l.segs[0].base)
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > pos }) - 1
	s := l.segs[i]
	end := l.written.Load()
	if i+1 < len(l.segs) {
		end = l.segs[i+1].base
	}
	s.acquire()
	return s, end, nil
}

// Read returns a fresh copy of the record bytes [pos, pos+size). The CRC is
// not checked here (message.Decode does).
func (l *Log) Read(pos int64, size int) ([]byte, error) {
	if size < message.MinSize || size > l.opts.MaxRecordSize || pos < 0 {
		return nil, fmt.Errorf("%w: read at %d size %d", serr.ErrInvalid, pos, size)
	}
	return l.copyWritten(pos, size, false)
}

// MaxSpan is the largest ReadSpan.
const MaxSpan = 1 << 20

// ReadSpan returns a fresh copy of the log bytes from pos to pos+size or
// to the end of pos's segment, whichever comes first: a run of records
// laid out back to back, with one copy for the run instead of one Read per
// record. The bytes must be written log; like Read, it checks no CRC
// (message.Decode does, record by record).
func (l *Log) ReadSpan(pos int64, size int) ([]byte, error) {
	if size < message.MinSize || size > MaxSpan || pos < 0 {
		return nil, fmt.Errorf("%w: read at %d size %d", serr.ErrInvalid, pos, size)
	}
	return l.copyWritten(pos, size, true)
}

// copyWritten copies [pos, pos+size) of the written log out of pos's
// segment. Past the segment's end it fails (a record cannot cross it),
// or with cut copies only up to that end.
func (l *Log) copyWritten(pos int64, size int, cut bool) ([]byte, error) {
	written, err := l.WrittenFor(pos + int64(size))
	if err != nil {
		return nil, err
	}
	if pos+int64(size) > written {
		return nil, fmt.Errorf("%w: position %d beyond written log %d", serr.ErrNotFound, pos+int64(size), written)
	}
	s, end, err := l.segFor(pos)
	if err != nil {
		return nil, err
	}
	defer s.release()
	switch {
	case cut && end <= pos:
		return nil, fmt.Errorf("%w: position %d at segment end %d", serr.ErrNotFound, pos, end)
	case cut:
		size = int(min(int64(size), end-pos))
	case pos+int64(size) > end:
		return nil, fmt.Errorf("%w: record at %d size %d crosses segment end %d", serr.ErrCorrupt, pos, size, end)
	}
	return s.copyOut(pos, size)
}

// mapCopyMax is the largest copy copyOut makes from the segment's mapping;
// longer ones (runs of records) are read with pread. A first read of log
// pages through the mapping pays for mapping them in, which for a run of
// records costs more than the system call; for one small record the call
// costs more.
const mapCopyMax = 16 << 10

// copyOut returns a fresh copy of [pos, pos+size) of the segment.
func (s *segment) copyOut(pos int64, size int) ([]byte, error) {
	off := pos - s.base
	if mm := s.data(); size <= mapCopyMax && mm != nil && off+int64(size) <= int64(len(mm)) {
		// append to nil allocates without zeroing what it copies over.
		return append([]byte(nil), mm[off:off+int64(size)]...), nil
	}
	buf := make([]byte, size)
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("commitlog: read %s at %d: %w", s.path, off, err)
	}
	return buf, nil
}

// ReadRange copies log bytes starting at pos into buf, stopping at limit
// and at the end of pos's segment. It returns the number of bytes copied.
func (l *Log) ReadRange(pos int64, buf []byte, limit int64) (int, error) {
	s, end, err := l.segFor(pos)
	if err != nil {
		return 0, err
	}
	defer s.release()
	end = min(end, limit, pos+int64(len(buf)))
	if end <= pos {
		return 0, nil
	}
	n := int(end - pos)
	off := pos - s.base
	if mm := s.data(); mm != nil && off+int64(n) <= int64(len(mm)) {
		return copy(buf[:n], mm[off:]), nil
	}
	if _, err := s.f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return n, nil
}

// View returns the log bytes from pos up to limit (and the end of pos's
// segment) without copying when the segment is memory-mapped; otherwise it
// copies into buf. Call release when done with the bytes.
func (l *Log) View(pos int64, buf []byte, limit int64) ([]byte, func(), error) {
	s, end, err := l.segFor(pos)
	if err != nil {
		return nil, nil, err
	}
	end = min(end, limit)
	off := pos - s.base
	if mm := s.data(); mm != nil && end > pos && s.base+int64(len(mm)) >= end {
		return mm[off : end-s.base], s.release, nil
	}
	s.release()
	n, err := l.ReadRange(pos, buf, limit)
	if err != nil {
		return nil, nil, err
	}
	return buf[:n], func() {}, nil
}

// SegmentInfo describes a segment.
type SegmentInfo struct {
	Base, End int64
	Active    bool
}

// Segments lists the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	w := l.written.Load()
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, End: w, Active: i == len(l.segs)-1}
		if i+1 < len(l.segs) {
			out[i].End = l.segs[i+1].base
		}
	}
	return out
}

// StoreTimeAt returns the store time of the record at pos.
func (l *Log) StoreTimeAt(pos int64) (int64, error) {
	var hdr [64]byte
	s, _, err := l.segFor(pos)
	if err != nil {
		return 0, err
	}
	defer s.release()
	if _, err := s.f.ReadAt(hdr[:], pos-s.base); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	h, err := message.ParseHeader(hdr[:])
	if err != nil {
		return 0, err
	}
	return h.StoreTime, nil
}

// RemoveOldest deletes the oldest segment if it is not the active one and
// it ends at or below upTo. Readers holding it keep their access until
// they release it.
func (l *Log) RemoveOldest(upTo int64) (bool, error) {
	l.mu.Lock()
	if len(l.segs) < 2 || l.segs[1].base > upTo {
		l.mu.Unlock()
		return false, nil
	}
	s := l.segs[0]
	l.segs = l.segs[1:]
	l.min.Store(l.segs[0].base)
	l.mu.Unlock()
	err := l.opts.FS.Remove(s.path)
	s.release()
	if err != nil {
		return true, err
	}
	return true, l.opts.FS.SyncDir(l.opts.Dir)
}

// Stop stops accepting appends, writes what was queued and fsyncs (unless
// abandon is set, which simulates a crash). Reads keep working until Close.
func (l *Log) Stop(abandon bool) error {
	l.qmu.Lock()
	if l.closed {
		l.qmu.Unlock()
		return serr.ErrClosed
	}
	l.closed = true
	l.qmu.Unlock()
	var err error
	switch {
	case l.started && abandon:
		// A crash stops the flusher and the syncer (whose Sync writes the
		// ring out) where they are: what was not written out stays in
		// the ring, as a process that dies leaves it. Likewise the
		// leader's rounds: none starts after this.
		l.stopLeaders()
		close(l.stopFlusher)
		<-l.flusherDone
		close(l.stopSyncer)
		<-l.syncerDone
		close(l.stopWriter)
		<-l.writerDone
		l.stopZeroer()
		close(l.rsvStop)
		<-l.rsvDone
	case l.started:
		close(l.stopWriter)
		<-l.writerDone
		// The final Sync below covers what the leader's rounds have
		// not.
		l.stopLeaders()
		close(l.stopSyncer)
		<-l.syncerDone
		l.stopZeroer()
		close(l.stopFlusher)
		<-l.flusherDone
		close(l.rsvStop)
		<-l.rsvDone
	}
	if !abandon {
		err = l.Sync()
		if err == nil && l.started {
			// A closed log has no zero tail: the file size is the log end
			// again (the clean-open fast path compares them).
			if err = l.cutTail(l.active, l.written.Load()-l.active.base); err != nil {
				err = fmt.Errorf("commitlog: cut the tail: %w", err)
			}
		}
	}
	// After a clean stop the log holds everything the ring did; otherwise
	// the ring stays for the next Open.
	l.closeStaging(!abandon && err == nil)
	// What no fsync covered (abandon, or the final one failed and
	// finished them with its error) is answered as not durable.
	l.pmu.Lock()
	left := l.pending
	l.pending = nil
	l.pmu.Unlock()
	for _, r := range left {
		r.notDurable = true
		r.finish()
	}
	l.broadcast()
	return err
}

// Close closes the segment files (after Stop). Readers holding a segment
// keep it until they release it.
func (l *Log) Close() { l.closeSegments() }

func (l *Log) closeSegments() {
	l.mu.Lock()
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
}
