package consumequeue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

// EntrySize is the width of one entry.
const EntrySize = 28

// Entry is one consume-queue entry.
type Entry struct {
	QueueOffset int64 // implied by position; filled on read
	PhysOffset  int64
	Size        int32
	TagHash     int64
	StoreTime   int64
}

func putEntry(b []byte, e Entry) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(e.PhysOffset))
	le.PutUint32(b[8:], uint32(e.Size))
	le.PutUint64(b[12:], uint64(e.TagHash))
	le.PutUint64(b[20:], uint64(e.StoreTime))
}

// DecodeEntry decodes the entry at the start of b (EntrySize bytes), as
// stored in a queue file; QueueOffset is left zero.
func DecodeEntry(b []byte) Entry { return getEntry(b) }

func getEntry(b []byte) Entry {
	le := binary.LittleEndian
	return Entry{
		PhysOffset: int64(le.Uint64(b[0:])),
		Size:       int32(le.Uint32(b[8:])),
		TagHash:    int64(le.Uint64(b[12:])),
		StoreTime:  int64(le.Uint64(b[20:])),
	}
}

// Escape maps a topic name to a directory name.
func Escape(topic string) string {
	var sb strings.Builder
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// Unescape inverts Escape, refusing any name Escape does not produce.
func Unescape(name string) (string, error) {
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			sb.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			return "", fmt.Errorf("%w: bad escaped topic %q", serr.ErrInvalid, name)
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad escaped topic %q", serr.ErrInvalid, name)
		}
		sb.WriteByte(byte(v))
		i += 2
	}
	// Only Escape's own spelling: Open reads a topic's queues from
	// Escape(topic), so another name for it is a stray directory.
	if Escape(sb.String()) != name {
		return "", fmt.Errorf("%w: bad escaped topic %q", serr.ErrInvalid, name)
	}
	return sb.String(), nil
}

type cqFile struct {
	base int64
	path string
	f    vfs.File
	// smu orders Set.Sync's fsync of f against its closing: a file is
	// closed between fsyncs, and not fsynced once removed.
	smu     sync.Mutex
	removed bool
}

// retire closes f for good (its file is being removed).
func (f *cqFile) retire() {
	f.smu.Lock()
	defer f.smu.Unlock()
	f.removed = true
	f.f.Close()
}

// sync fsyncs f unless it was retired (then it reports false).
func (f *cqFile) sync() (bool, error) {
	f.smu.Lock()
	defer f.smu.Unlock()
	if f.removed {
		return false, nil
	}
	return true, f.f.Sync()
}

// Queue is one consume queue.
type Queue struct {
	set   *Set
	Topic string
	ID    int32
	dir   string

	mu    sync.RWMutex // files
	files []*cqFile

	min  atomic.Int64
	next atomic.Int64

	// The newest entries stay in memory (the tail) until it holds
	// tailFlushBytes or a Sync, Close or trim writes them out: the
	// dispatcher then writes a queue's file every few hundred entries
	// instead of once per step. Entries [written, next) are in tail;
	// everything below written is in the files.
	//
	// wmu serializes tail appends and write-outs (the dispatcher, Sync,
	// TrimBelow, close). tmu guards tail and written; it is held only
	// around memory copies, never while taking another lock.
	wmu     sync.Mutex
	tmu     sync.Mutex
	tail    []byte
	written int64
	closed  bool // under wmu
}

// tailFlushBytes is the tail size at which the dispatcher writes it out.
const tailFlushBytes = 8 << 10

// Min is the first readable offset.
func (q *Queue) Min() int64 { return q.min.Load() }

// Next is one past the last visible offset.
func (q *Queue) Next() int64 { return q.next.Load() }

func (q *Queue) fileFor(off int64) (*cqFile, int) {
	i := sort.Search(len(q.files), func(i int) bool { return q.files[i].base > off }) - 1
	if i < 0 {
		return nil, -1
	}
	return q.files[i], i
}

// readRaw reads entries [from, from+n) (all below Next), from the files
// and the in-memory tail.
func (q *Queue) readRaw(from int64, n int, buf []byte) error {
	q.tmu.Lock()
	w := q.written
	if end := from + int64(n); end > w {
		if (end-w)*EntrySize > int64(len(q.tail)) {
			// The queue restarted under this reader (see Append).
			q.tmu.Unlock()
			return fmt.Errorf("%w: queue %s/%d offset %d moved", serr.ErrOffsetMoved, q.Topic, q.ID, from)
		}
		lo := max(from, w)
		copy(buf[(lo-from)*EntrySize:], q.tail[(lo-w)*EntrySize:(end-w)*EntrySize])
		n = int(max(w-from, 0))
	}
	q.tmu.Unlock()
	// Entries below w were written to the files before w moved past them.
	per := q.set.perFile
	for n > 0 {
		f, _ := q.fileFor(from)
		if f == nil {
			return fmt.Errorf("%w: queue %s/%d offset %d has no file", serr.ErrNotFound, q.Topic, q.ID, from)
		}
		k := min(int64(n), f.base+per-from)
		if _, err := f.f.ReadAt(buf[:k*EntrySize], (from-f.base)*EntrySize); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: queue %s/%d short file at %d", serr.ErrCorrupt, q.Topic, q.ID, from)
			}
			return err
		}
		buf = buf[k*EntrySize:]
		from += k
		n -= int(k)
	}
	return nil
}

// Read returns up to max entries starting at from. It returns an error
// wrapping ErrOffsetMoved when from is below Min, and no entries when
// from >= Next.
func (q *Queue) Read(from int64, max int) ([]Entry, error) {
	if max <= 0 {
		return nil, nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	next := q.next.Load()
	if m := q.min.Load(); from < m {
		return nil, fmt.Errorf("%w: queue %s/%d offset %d < min %d", serr.ErrOffsetMoved, q.Topic, q.ID, from, m)
	}
	if from >= next {
		return nil, nil
	}
	n := int(min(int64(max), next-from))
	buf := make([]byte, n*EntrySize)
	if err := q.readRaw(from, n, buf); err != nil {
		return nil, err
	}
	out := make([]Entry, n)
	for i := range out {
		out[i] = getEntry(buf[i*EntrySize:])
		out[i].QueueOffset = from + int64(i)
	}
	return out, nil
}

func (q *Queue) entryAt(off int64) (Entry, error) {
	var b [EntrySize]byte
	if err := q.readRaw(off, 1, b[:]); err != nil {
		return Entry{}, err
	}
	e := getEntry(b[:])
	e.QueueOffset = off
	return e, nil
}

// search returns the first offset in [lo, hi) whose entry satisfies ok
// (which must be monotone), or hi.
func (q *Queue) search(lo, hi int64, ok func(Entry) bool) (int64, error) {
	var err error
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, e2 := q.entryAt(mid)
		if e2 != nil {
			err = e2
			break
		}
		if ok(e) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, err
}

// OffsetForTime returns the first offset whose store time is >= ms, or
// Next if there is none.
func (q *Queue) OffsetForTime(ms int64) (int64, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.search(q.min.Load(), q.next.Load(), func(e Entry) bool { return e.StoreTime >= ms })
}

// TrimBelow advances Min past entries pointing below logMin and removes
// files holding only such entries (never the last file).
func (q *Queue) TrimBelow(logMin int64) error {
	// Files are dropped only behind written entries.
	if err := q.WriteOut(); err != nil {
		return err
	}
	q.mu.RLock()
	m, err := q.search(q.min.Load(), q.next.Load(), func(e Entry) bool { return e.PhysOffset >= logMin })
	q.mu.RUnlock()
	if err != nil {
		return err
	}
	// Readers and retention trim concurrently: only ever raise Min.
	for cur := q.min.Load(); m > cur && !q.min.CompareAndSwap(cur, m); cur = q.min.Load() {
	}
	per := q.set.perFile
	q.mu.Lock()
	var drop []*cqFile
	for len(q.files) > 1 && q.files[0].base+per <= m {
		drop = append(drop, q.files[0])
		q.files = q.files[1:]
	}
	q.mu.Unlock()
	for _, f := range drop {
		f.retire()
		if err := q.set.fs.Remove(f.path); err != nil {
			return err
		}
	}
	if len(drop) > 0 {
		return q.set.fs.SyncDir(q.dir)
	}
	return nil
}

// Append adds entries for offsets [first, first+len) and makes them
// visible; they reach the files when the tail is full or on the next
// WriteOut. Only the dispatcher calls it. first must equal Next, except
// on an empty queue, which then starts at first. An error is a failed
// write-out: the entries are visible all the same and stay in the tail.
func (q *Queue) Append(first int64, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return fmt.Errorf("consumequeue: queue %s/%d: %w", q.Topic, q.ID, serr.ErrClosed)
	}
	next := q.next.Load()
	q.tmu.Lock()
	if first != next {
		if q.min.Load() != next {
			q.tmu.Unlock()
			return fmt.Errorf("%w: queue %s/%d append at %d, next is %d", serr.ErrInvalid, q.Topic, q.ID, first, next)
		}
		// Empty queue: restart at first (a recreated or trimmed queue).
		// Whatever the tail held is below the new min.
		q.tail, q.written = q.tail[:0], first
		q.min.Store(first)
		q.next.Store(first)
	}
	n := len(q.tail)
	q.tail = append(q.tail, make([]byte, len(entries)*EntrySize)...)
	for i, e := range entries {
		putEntry(q.tail[n+i*EntrySize:], e)
	}
	q.next.Store(first + int64(len(entries)))
	full := len(q.tail) >= tailFlushBytes
	q.tmu.Unlock()
	if full {
		return q.writeOutLocked(true)
	}
	return nil
}

// WriteOut writes the tail to the files (not fsynced) and lets go of its
// buffer. Set.Sync calls it before fsyncing.
func (q *Queue) WriteOut() error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.closed {
		return nil
	}
	return q.writeOutLocked(false)
}

// writeOutLocked writes the tail. keep retains the buffer for the next
// appends (the dispatcher's case).
// q.wmu must be held.
func (q *Queue) writeOutLocked(keep bool) error {
	q.tmu.Lock()
	orig, off := q.tail, q.written
	q.tmu.Unlock()
	b := orig
	// Only wmu holders change tail, so b stays as it is while it is
	// written; readers keep reading it from memory until written moves.
	per := q.set.perFile
	for len(b) > 0 {
		base := off / per * per
		f, err := q.fileAt(base)
		if err != nil {
			return err
		}
		k := min(int64(len(b)/EntrySize), base+per-off)
		if _, err := f.f.WriteAt(b[:k*EntrySize], (off-base)*EntrySize); err != nil {
			return fmt.Errorf("consumequeue: write %s: %w", f.path, err)
		}
		q.set.markDirty(f)
		b = b[k*EntrySize:]
		off += k
		q.tmu.Lock()
		q.tail, q.written = q.tail[k*EntrySize:], off
		q.tmu.Unlock()
	}
	q.tmu.Lock()
	// Readers copy under tmu and keep no reference: the buffer can be
	// reused.
	if keep && cap(orig) <= 4*tailFlushBytes {
		q.tail = orig[:0]
	} else {
		q.tail = nil
	}
	q.tmu.Unlock()
	return nil
}

// fileAt returns the file with the given base, creating it (dispatcher only).
func (q *Queue) fileAt(base int64) (*cqFile, error) {
	q.mu.RLock()
	if n := len(q.files); n > 0 && q.files[n-1].base == base {
		f := q.files[n-1]
		q.mu.RUnlock()
		return f, nil
	}
	q.mu.RUnlock()
	p := filepath.Join(q.dir, fileName(base))
	vf, err := q.set.fs.Create(p)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", p, err)
	}
	f := &cqFile{base: base, path: p, f: vf}
	q.mu.Lock()
	q.files = append(q.files, f)
	q.mu.Unlock()
	q.set.markDirtyDir(q.dir)
	return f, nil
}

// close closes the files, writing the tail out first when keep is set
// (a store closing) and dropping it otherwise (a deleted topic).
func (q *Queue) close(keep bool) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	var err error
	if keep && !q.closed {
		err = q.writeOutLocked(false)
	}
	q.closed = true
	q.tmu.Lock()
	q.tail = nil
	q.tmu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, f := range q.files {
		f.retire()
	}
	q.files = nil
	return err
}

// fileName is the name of the queue file whose first entry is base.
func fileName(base int64) string { return fmt.Sprintf("%020d.cq", base) }
