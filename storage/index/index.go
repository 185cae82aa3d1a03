package index

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/bits"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

const (
	headerSize = 64
	entrySize  = 32
	magic      = uint32('M') | uint32('Q')<<8 | uint32('G')<<16 | uint32('I')<<24
	version    = 1
	pageSlots  = 1024
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options configure an Index.
type Options struct {
	FS       vfs.FS
	Dir      string
	Slots    int // per file; default 1<<17
	Capacity int // entries per file; default 1<<18
	Logger   *slog.Logger
	// LogMin and LogEnd bound the commit log: files entirely below LogMin
	// are removed, entries at or past LogEnd dropped.
	LogMin, LogEnd int64
	// OnSeal, if set, is called (under the index lock: it must not block
	// or call the index) when Put seals a file, which stays in memory
	// until a Sync writes it: the caller should Sync soon.
	OnSeal func()
}

// Hit is one candidate record.
type Hit struct {
	Phys      int64
	Size      int32
	StoreTime int64
}

type header struct {
	slots, capacity, count uint32
	first, end             int64
	minTime, maxTime       int64
	sealed                 bool
}

func (h header) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], magic)
	le.PutUint32(b[4:], version)
	le.PutUint32(b[8:], h.slots)
	le.PutUint32(b[12:], h.capacity)
	le.PutUint32(b[16:], h.count)
	le.PutUint64(b[20:], uint64(h.first))
	le.PutUint64(b[28:], uint64(h.end))
	le.PutUint64(b[36:], uint64(h.minTime))
	le.PutUint64(b[44:], uint64(h.maxTime))
	var s uint32
	if h.sealed {
		s = 1
	}
	le.PutUint32(b[52:], s)
	le.PutUint32(b[56:], crc32.Checksum(b[:56], castagnoli))
	le.PutUint32(b[60:], 0)
}

func decodeHeader(b []byte) (header, error) {
	le := binary.LittleEndian
	if len(b) < headerSize || le.Uint32(b[0:]) != magic || le.Uint32(b[4:]) != version ||
		le.Uint32(b[56:]) != crc32.Checksum(b[:56], castagnoli) {
		return header{}, fmt.Errorf("%w: index header", serr.ErrCorrupt)
	}
	h := header{
		slots: le.Uint32(b[8:]), capacity: le.Uint32(b[12:]), count: le.Uint32(b[16:]),
		first: int64(le.Uint64(b[20:])), end: int64(le.Uint64(b[28:])),
		minTime: int64(le.Uint64(b[36:])), maxTime: int64(le.Uint64(b[44:])),
		sealed: le.Uint32(b[52:]) == 1,
	}
	if h.slots == 0 || h.count > h.capacity || h.end < h.first {
		return header{}, fmt.Errorf("%w: index header values", serr.ErrCorrupt)
	}
	return h, nil
}

type file struct {
	path string
	// f is nil until the first Sync that writes the file creates it (set
	// under Index.mu; rotation and Open's new active file do no I/O).
	f vfs.File
	h header
	// In memory while the file is active, and once sealed until the Sync
	// that writes it whole (then nil: lookups read the file).
	slots     []uint32
	entries   entryChunks
	persisted uint32  // entries written to the file (changed by Sync only, under syncMu)
	dirtyPg   pageSet // slot pages changed since the last snapshot (active file)
	newFile   bool    // its directory entry is not yet synced
	// damaged is set once Lookup found the file's entries damaged and
	// left a marker for the next Open (see markDamaged).
	damaged atomic.Bool
}

// entryChunks holds a file's entries in chunks of entryChunk, so that an
// active file neither takes its whole capacity up front (8 MiB with the
// defaults, allocated under the index lock at each rotation, and held by
// a store with a handful of messages) nor copies its entries as it grows
// (appending to one slice did: 5 % of the CPU of BenchmarkAppendAsync).
type entryChunks struct {
	chunks [][]byte // entryChunk entries each; the last may be partly used
	n      int
}

const entryChunk = 2048 // 64 KiB

// at returns entry i (< n).
func (es *entryChunks) at(i int) []byte {
	return es.chunks[i/entryChunk][i%entryChunk*entrySize:][:entrySize]
}

func (es *entryChunks) add(e []byte) {
	if es.n == len(es.chunks)*entryChunk {
		es.chunks = append(es.chunks, make([]byte, entryChunk*entrySize))
	}
	es.n++
	copy(es.at(es.n-1), e)
}

// truncate keeps the first n entries.
func (es *entryChunks) truncate(n int) {
	es.n = n
	es.chunks = es.chunks[:(n+entryChunk-1)/entryChunk]
}

// spans returns entries [from, to) as one slice per chunk they lie in,
// sharing the memory: entries below n never change.
func (es *entryChunks) spans(from, to int) [][]byte {
	var out [][]byte
	for from < to {
		c, off := from/entryChunk, from%entryChunk
		k := min(entryChunk-off, to-from)
		out = append(out, es.chunks[c][off*entrySize:(off+k)*entrySize])
		from += k
	}
	return out
}

// inMemory: the file's slots and entries are held (active, or sealed and
// not yet written whole).
// Index.mu must be held.
func (f *file) inMemory() bool { return f.slots != nil }

func (f *file) slotsOff() int64   { return headerSize }
func (f *file) entriesOff() int64 { return headerSize + int64(f.h.slots)*4 }

// Index is the key index. Put/SetEnd are called by the dispatcher only;
// Lookup is safe concurrently.
type Index struct {
	opts   Options
	logger *slog.Logger

	mu     sync.RWMutex
	sealed []*file // oldest first; the newest may wait in memory for Sync
	active *file
	// syncMu: every write to, creation and close of a file happens under
	// it (Sync, RemoveBelow, Close), so writers never race each other.
	// Lock order: syncMu, then mu.
	syncMu sync.Mutex
}

// Open loads the index, dropping what is damaged or past opts.LogEnd.
// End() tells from which log position the caller must re-index.
func Open(opts Options) (*Index, error) {
	if opts.Slots <= 0 {
		opts.Slots = 1 << 17
	}
	if opts.Capacity <= 0 {
		opts.Capacity = 1 << 18
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Index{opts: opts, logger: opts.Logger}
	if err := opts.FS.MkdirAll(opts.Dir); err != nil {
		return nil, err
	}
	names, err := opts.FS.List(opts.Dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	marked := map[string]bool{}
	for _, n := range names {
		if f, ok := strings.CutSuffix(n, damagedSuffix); ok {
			marked[f] = true
			continue
		}
		if !strings.HasSuffix(n, ".idx") {
			continue
		}
		if b, err := strconv.ParseInt(strings.TrimSuffix(n, ".idx"), 10, 64); err == nil {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var files []*file
	var bad bool
	for _, b := range bases {
		p := filepath.Join(opts.Dir, fmt.Sprintf("%020d.idx", b))
		if bad {
			opts.FS.Remove(p)
			continue
		}
		f, err := x.load(p, b)
		if err == nil && marked[filepath.Base(p)] {
			f.f.Close()
			err = fmt.Errorf("%w: marked damaged by a lookup", serr.ErrCorrupt)
		}
		if err != nil {
			x.logger.Warn("index: dropping damaged file and later ones; they will be rebuilt", "file", p, "err", err)
			opts.FS.Remove(p)
			bad = true
			continue
		}
		files = append(files, f)
	}
	// Only the last file can be unsealed, as Sync writes them in order.
	// Should an earlier one be (files of another writer), its header says
	// up to where it is complete: the files after it are dropped and
	// re-indexed from there.
	for i := 0; i+1 < len(files); i++ {
		if !files[i].h.sealed {
			x.logger.Warn("index: unsealed file before the last; dropping the later ones, they will be rebuilt", "file", files[i].path)
			for _, g := range files[i+1:] {
				g.f.Close()
				opts.FS.Remove(g.path)
			}
			files = files[:i+1]
			break
		}
	}
	// Drop files entirely past the log end or below the log min.
	for len(files) > 0 && files[len(files)-1].h.first >= opts.LogEnd && files[len(files)-1].h.first > opts.LogMin {
		f := files[len(files)-1]
		f.f.Close()
		opts.FS.Remove(f.path)
		files = files[:len(files)-1]
	}
	for len(files) > 1 && files[0].h.end <= opts.LogMin && files[0].h.sealed {
		files[0].f.Close()
		opts.FS.Remove(files[0].path)
		files = files[1:]
	}
	if err := opts.FS.SyncDir(opts.Dir); err != nil {
		return nil, err
	}
	// Markers go only once the removal of what they marked is durable.
	if len(marked) > 0 {
		for n := range marked {
			if err := opts.FS.Remove(filepath.Join(opts.Dir, n+damagedSuffix)); err != nil {
				return nil, err
			}
		}
		if err := opts.FS.SyncDir(opts.Dir); err != nil {
			return nil, err
		}
	}
	// The last file becomes the active one if it is not sealed, or if it
	// indexes records past the log end (activate cuts them).
	if n := len(files); n > 0 && (!files[n-1].h.sealed || files[n-1].h.end > opts.LogEnd) {
		files[n-1].h.sealed = false
		x.active = files[len(files)-1]
		files = files[:len(files)-1]
		if err := x.activate(x.active); err != nil {
			return nil, err
		}
	}
	x.sealed = files
	if x.active == nil {
		start := opts.LogMin
		if n := len(files); n > 0 {
			start = max(files[n-1].h.end, opts.LogMin)
		}
		x.newActive(start)
	}
	return x, nil
}

func (x *Index) load(p string, base int64) (*file, error) {
	f, err := x.opts.FS.OpenRW(p)
	if err != nil {
		return nil, err
	}
	var hb [headerSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %v", serr.ErrCorrupt, err)
	}
	h, err := decodeHeader(hb[:])
	if err == nil && h.first != base {
		err = fmt.Errorf("%w: index file name/header mismatch", serr.ErrCorrupt)
	}
	if err == nil {
		// A file without entries may end at its header: Sync writes a
		// slot table's pages as entries fill them, and an empty one has
		// none to write (it reads as all zero: no entries).
		need := int64(headerSize)
		if h.count > 0 {
			need += int64(h.slots)*4 + int64(h.count)*entrySize
		}
		sz, _ := f.Size()
		if sz < need {
			err = fmt.Errorf("%w: index file short", serr.ErrCorrupt)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{path: p, f: f, h: h}, nil
}

// activate loads the active file's entries and rebuilds its slot table,
// cutting entries at or past LogEnd or the file's end.
func (x *Index) activate(f *file) error {
	// What the file holds (checked against its size in load); Put's
	// appends go on from there.
	count := int(f.h.count)
	f.entries = entryChunks{}
	for i := 0; i < count; i += entryChunk {
		c := make([]byte, entryChunk*entrySize)
		k := min(entryChunk, count-i)
		if _, err := f.f.ReadAt(c[:k*entrySize], f.entriesOff()+int64(i)*entrySize); err != nil {
			return err
		}
		f.entries.chunks = append(f.entries.chunks, c)
	}
	f.entries.n = count
	// A Sync can capture the entries of a dispatcher step before its
	// SetEnd: entries at or past the header's end are of records the
	// dispatcher indexes again on replay, so they go too (kept, each
	// would be found twice).
	end := min(f.h.end, x.opts.LogEnd)
	n := sort.Search(count, func(i int) bool {
		return int64(binary.LittleEndian.Uint64(f.entries.at(i)[8:])) >= end
	})
	if n != count || f.h.end > x.opts.LogEnd {
		f.h.count = uint32(n)
		f.entries.truncate(n)
		f.h.end = min(f.h.end, x.opts.LogEnd)
	}
	f.persisted = f.h.count
	f.slots = make([]uint32, f.h.slots)
	f.dirtyPg = newPageSet(len(f.slots))
	// The on-disk slot table may be torn: rewrite all of it on next Sync.
	f.dirtyPg.setAll()
	for i := 0; i < n; i++ {
		e := f.entries.at(i)
		s := binary.LittleEndian.Uint64(e) % uint64(f.h.slots)
		binary.LittleEndian.PutUint32(e[20:], f.slots[s])
		f.slots[s] = uint32(i + 1)
	}
	// Rebuilding in entry order reproduces exactly the prev links written
	// by Put, so the entries on disk stay valid; only slot pages (all
	// marked dirty above) and the header are rewritten by the next Sync.
	return nil
}

// newActive starts an active file at first, in memory only: the Sync
// that first writes it creates it.
// x.mu must be held (or the index not yet shared, as in Open).
func (x *Index) newActive(first int64) {
	x.active = &file{path: filepath.Join(x.opts.Dir, fmt.Sprintf("%020d.idx", first)),
		h:     header{slots: uint32(x.opts.Slots), capacity: uint32(x.opts.Capacity), first: first, end: first},
		slots: make([]uint32, x.opts.Slots), dirtyPg: newPageSet(x.opts.Slots), newFile: true}
}

// Unwritten is the number of sealed files still in memory, waiting for a
// Sync to write them.
func (x *Index) Unwritten() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for _, f := range x.sealed {
		if f.inMemory() {
			n++
		}
	}
	return n
}

// End is the log position up to which every record is indexed.
func (x *Index) End() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.active.h.end
}

// Put adds one key hash for the record at phys, in log order, then
// SetEnd. A record with several keys goes through PutAll, which keeps
// them in one file.
func (x *Index) Put(hash uint64, phys int64, size int32, storeTime int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.put(Key{hash, phys, size, storeTime})
	return nil
}

// Key is one key hash of the record at Phys, for PutAll.
type Key struct {
	Hash      uint64
	Phys      int64
	Size      int32
	StoreTime int64
}

// PutAll is Put of each of keys, in order, under one lock: the dispatcher
// adds a step's keys at once (a lock per key was 2 % of the CPU of
// BenchmarkAppendAsync). Like Put it does no I/O (a full file is sealed
// in memory, see rotate), so it cannot fail.
//
// The keys of one record (a run of equal Phys) go into one file: a file
// rotates before a record whose keys it has no room for, so that a
// sealed file's end is past every entry it holds and a replay from the
// index's end adds no key twice. A record with more keys than a file
// holds keeps the first Capacity of them.
func (x *Index) PutAll(keys []Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for len(keys) > 0 {
		n := 1
		for n < len(keys) && keys[n].Phys == keys[0].Phys {
			n++
		}
		f := x.active
		if f.h.count > 0 && int64(f.h.count)+int64(n) > int64(f.h.capacity) {
			x.rotate(keys[0].Phys)
			f = x.active
		}
		for _, k := range keys[:min(n, int(f.h.capacity))] {
			x.put(k)
		}
		keys = keys[n:]
	}
}

// put adds k to the active file, rotating first if it is full.
// x.mu must be held.
func (x *Index) put(k Key) {
	f := x.active
	if f.h.count >= f.h.capacity {
		x.rotate(k.Phys)
		f = x.active
	}
	s := k.Hash % uint64(f.h.slots)
	var e [entrySize]byte
	le := binary.LittleEndian
	le.PutUint64(e[0:], k.Hash)
	le.PutUint64(e[8:], uint64(k.Phys))
	le.PutUint32(e[16:], uint32(k.Size))
	le.PutUint32(e[20:], f.slots[s])
	le.PutUint64(e[24:], uint64(k.StoreTime))
	f.entries.add(e[:])
	f.h.count++
	f.slots[s] = f.h.count
	f.dirtyPg.set(int(s) / pageSlots)
	if f.h.count == 1 || k.StoreTime < f.h.minTime {
		f.h.minTime = k.StoreTime
	}
	if k.StoreTime > f.h.maxTime {
		f.h.maxTime = k.StoreTime
	}
}

// SetEnd records that every record below end is indexed.
func (x *Index) SetEnd(end int64) {
	x.mu.Lock()
	if end > x.active.h.end {
		x.active.h.end = end
	}
	x.mu.Unlock()
}

// rotate seals the active file and starts one at phys, in memory: the
// next Sync writes the sealed file whole, creates the new one, and only
// then frees the sealed file's memory. Writing and fsyncing the sealed
// file here, under mu, would stall the dispatcher's Puts (and every
// Lookup) for 11-42 ms each time a file fills (BenchmarkPutWithSync).
// x.mu must be held.
func (x *Index) rotate(phys int64) {
	f := x.active
	f.h.end = phys
	f.h.sealed = true
	x.sealed = append(x.sealed, f)
	x.newActive(phys)
	if x.opts.OnSeal != nil {
		x.opts.OnSeal()
	}
}

// snapshot is what one Sync writes of the active file, captured under
// Index.mu.
type snapshot struct {
	entries [][]byte // entries [from, count), chunk by chunk
	from    uint32
	count   uint32
	pages   map[int][]byte // slot page index → bytes
	// allSlots: the whole slot table of a sealed file, written in one
	// call.
	allSlots []uint32
	header   [headerSize]byte
}

// snap captures the unpersisted state of the active file f.
// x.mu must be held.
func (x *Index) snap(f *file) *snapshot {
	sn := &snapshot{from: f.persisted, count: f.h.count, pages: map[int][]byte{}}
	// Entries below count are never modified again: share them.
	sn.entries = f.entries.spans(int(f.persisted), int(f.h.count))
	for p := range f.dirtyPg.all {
		sn.pages[p] = encodeSlots(f.slots, p*pageSlots, min((p+1)*pageSlots, len(f.slots)))
	}
	f.dirtyPg.clear()
	f.h.encode(sn.header[:])
	return sn
}

// encodeSlots encodes slots [lo, hi) as they lie in the file.
func encodeSlots(slots []uint32, lo, hi int) []byte {
	b := make([]byte, (hi-lo)*4)
	for i := lo; i < hi; i++ {
		binary.LittleEndian.PutUint32(b[(i-lo)*4:], slots[i])
	}
	return b
}

// sealedSnap is the whole of a sealed file that is still in memory. Put
// never changes a sealed file, so its slot table is encoded by write,
// without x.mu.
// x.mu must be held.
func sealedSnap(f *file) *snapshot {
	sn := &snapshot{from: f.persisted, count: f.h.count, allSlots: f.slots}
	sn.entries = f.entries.spans(int(f.persisted), int(f.h.count))
	f.h.encode(sn.header[:])
	return sn
}

// write persists a snapshot of f: entries, fsync, slot pages and header,
// fsync (so that no slot or header ever names an entry not on disk).
// x.syncMu must be held, and x.mu must not be.
func (x *Index) write(f *file, sn *snapshot) error {
	if f.f == nil {
		vf, err := x.opts.FS.Create(f.path)
		if err != nil {
			return err
		}
		x.mu.Lock()
		f.f = vf
		x.mu.Unlock()
	}
	off := f.entriesOff() + int64(sn.from)*entrySize
	for _, b := range sn.entries {
		if _, err := f.f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	for p, b := range sn.pages {
		if _, err := f.f.WriteAt(b, f.slotsOff()+int64(p*pageSlots)*4); err != nil {
			return err
		}
	}
	if sn.allSlots != nil {
		if _, err := f.f.WriteAt(encodeSlots(sn.allSlots, 0, len(sn.allSlots)), f.slotsOff()); err != nil {
			return err
		}
	}
	if _, err := f.f.WriteAt(sn.header[:], 0); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if f.newFile {
		if err := x.opts.FS.SyncDir(x.opts.Dir); err != nil {
			return err
		}
		f.newFile = false
	}
	return nil
}

// Sync makes everything Put so far durable, with End() as of the call:
// first the sealed files still in memory (oldest first: a file is created
// only once every earlier one is sealed on disk), then the active file.
// The dispatcher keeps indexing while the writes and fsyncs run: only
// capturing the snapshots holds the index lock.
func (x *Index) Sync() error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	var sealed []*file
	var sealedSns []*snapshot
	for _, f := range x.sealed {
		if f.inMemory() {
			sealed = append(sealed, f)
			sealedSns = append(sealedSns, sealedSnap(f))
		}
	}
	f := x.active
	sn := x.snap(f)
	x.mu.Unlock()
	if testHookSyncSnapped != nil {
		testHookSyncSnapped()
	}
	for i, sf := range sealed {
		if err := x.write(sf, sealedSns[i]); err != nil {
			return err // still in memory: the next Sync writes it whole again
		}
		x.mu.Lock()
		sf.persisted = sf.h.count
		sf.slots, sf.entries, sf.dirtyPg = nil, entryChunks{}, pageSet{}
		x.mu.Unlock()
	}
	// f may have been sealed since the snapshot: its write here is then
	// an older state, which the next Sync's whole write supersedes.
	if err := x.write(f, sn); err != nil {
		x.mu.Lock()
		x.requeue(f, sn)
		x.mu.Unlock()
		return err
	}
	x.mu.Lock()
	f.persisted = sn.count
	x.mu.Unlock()
	return nil
}

// requeue marks a failed snapshot's pages dirty again.
// x.mu must be held.
func (x *Index) requeue(f *file, sn *snapshot) {
	if !f.inMemory() || f.h.sealed {
		return // a sealed file is written whole
	}
	for p := range sn.pages {
		f.dirtyPg.set(p)
	}
}

// Test hook (nil outside tests): Sync after its snapshots.
var testHookSyncSnapped func()

// Lookup returns up to max records whose key hash is hash and whose store
// time is in [beginMs, endMs], newest first.
func (x *Index) Lookup(hash uint64, beginMs, endMs int64, max int) ([]Hit, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Hit
	le := binary.LittleEndian
	for i := len(x.sealed); i >= 0 && len(out) < max; i-- {
		f := x.active
		if i < len(x.sealed) {
			f = x.sealed[i]
		}
		if f.h.count == 0 || f.h.maxTime < beginMs || f.h.minTime > endMs {
			continue
		}
		if f.inMemory() {
			for n := f.slots[hash%uint64(f.h.slots)]; n != 0 && len(out) < max; {
				e := f.entries.at(int(n - 1))
				if le.Uint64(e) == hash {
					if t := int64(le.Uint64(e[24:])); t >= beginMs && t <= endMs {
						out = append(out, Hit{Phys: int64(le.Uint64(e[8:])), Size: int32(le.Uint32(e[16:])), StoreTime: t})
					}
				}
				n = le.Uint32(e[20:])
			}
			continue
		}
		var sb [4]byte
		if _, err := f.f.ReadAt(sb[:], f.slotsOff()+int64(hash%uint64(f.h.slots))*4); err != nil {
			return out, err
		}
		var e [entrySize]byte
		// Put links each entry to an earlier one, so a chain strictly
		// descends; entries are not covered by the header CRC, and a
		// damaged link that does not descend would loop forever.
		limit := f.h.count + 1
		for n := le.Uint32(sb[:]); n != 0 && len(out) < max; n = le.Uint32(e[20:]) {
			if n >= limit {
				x.markDamaged(f)
				return out, fmt.Errorf("%w: index %s: chain link to entry %d, not below %d (the next start rebuilds the file from the log)", serr.ErrCorrupt, f.path, n, limit)
			}
			limit = n
			if _, err := f.f.ReadAt(e[:], f.entriesOff()+int64(n-1)*entrySize); err != nil {
				return out, err
			}
			if le.Uint64(e[:]) == hash {
				if t := int64(le.Uint64(e[24:])); t >= beginMs && t <= endMs {
					out = append(out, Hit{Phys: int64(le.Uint64(e[8:])), Size: int32(le.Uint32(e[16:])), StoreTime: t})
				}
			}
		}
	}
	return out, nil
}

// damagedSuffix names the marker file that makes Open treat an index file
// as damaged (it is dropped with every later file, and the caller
// re-indexes from End()).
const damagedSuffix = ".damaged"

// markDamaged leaves a durable marker for a sealed file whose entries
// Lookup found damaged (they are not covered by the header CRC, so Open
// cannot see it). Until the next Open, lookups through the damaged part
// keep failing with ErrCorrupt; nothing is written into the file itself.
func (x *Index) markDamaged(f *file) {
	if !f.damaged.CompareAndSwap(false, true) {
		return
	}
	x.logger.Error("index: damaged file; it and the files after it are rebuilt from the log at the next start", "file", f.path)
	m, err := x.opts.FS.Create(f.path + damagedSuffix)
	if err == nil {
		m.Close()
		err = x.opts.FS.SyncDir(x.opts.Dir)
	}
	if err != nil {
		x.logger.Error("index: could not mark the damaged file", "file", f.path, "err", err)
	}
}

// RemoveBelow deletes sealed files that index only records below logMin
// (one not yet written is dropped from memory without being written).
func (x *Index) RemoveBelow(logMin int64) error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	var drop []*file
	for len(x.sealed) > 0 && x.sealed[0].h.end <= logMin {
		drop = append(drop, x.sealed[0])
		x.sealed = x.sealed[1:]
	}
	x.mu.Unlock()
	removed := false
	for _, f := range drop {
		if f.f == nil {
			continue // never written
		}
		f.f.Close()
		if err := x.opts.FS.Remove(f.path); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return x.opts.FS.SyncDir(x.opts.Dir)
	}
	return nil
}

// Close closes the files (without syncing: what Sync has not written is
// lost, and the caller re-indexes from End() at the next Open).
func (x *Index) Close() {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, f := range x.sealed {
		if f.f != nil {
			f.f.Close()
		}
	}
	if x.active != nil && x.active.f != nil {
		x.active.f.Close()
	}
	x.sealed, x.active = nil, nil
}

// pageSet is a set of slot pages, one bit each: Put marks a page per
// entry, and a map insert there cost more than the rest of Put.
type pageSet struct {
	bits  []uint64
	pages int
}

func newPageSet(slots int) pageSet {
	pages := (slots + pageSlots - 1) / pageSlots
	return pageSet{bits: make([]uint64, (pages+63)/64), pages: pages}
}

func (ps pageSet) set(p int) { ps.bits[p/64] |= 1 << (p % 64) }

func (ps pageSet) setAll() {
	for p := range ps.pages {
		ps.set(p)
	}
}

func (ps pageSet) clear() { clear(ps.bits) }

// all yields the pages in the set, in order.
func (ps pageSet) all(yield func(int) bool) {
	for w, word := range ps.bits {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			if !yield(w*64 + b) {
				return
			}
		}
	}
}
