package commitlog

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// The staging ring (async mode).
//
// Getting a record into the page cache is the expensive part of an async
// append on Linux: a store through a shared mapping takes a page fault and
// the file system's page_mkwrite for every new 4 KiB page, and a pwrite
// of one or two records pays a system call and two partial pages. One
// pwrite of 64 KiB or more into reserved blocks costs a fifth to a tenth
// as much per byte (measured on a 2-vCPU VM, ext4). But an async append is answered
// once its record would survive the process being killed, and 16 waiting
// appenders never make more than 16 records to write at once.
//
// So the writer copies each batch into a ring held by a file in a memory
// file system (Options.StagingDir, normally /dev/shm), answers the
// appenders, and a flusher goroutine writes the ring into the segment in
// whatever runs have accumulated: large ones under load, up to flushRun
// each, cut at record boundaries (runEnd). A process crash keeps the ring
// (it is memory of the file system, not of the process), as it keeps the
// page cache; a machine crash loses both, and async mode never promised
// more (fsync every FlushInterval/FlushBytes).
//
// Positions: the ring holds log position p at ring offset p mod size.
// Written() (what readers see) is the end of what the flusher wrote, at
// most the end of what the writer has answered (staged); a read by
// position of a record answered but not yet written (Read, and the
// store's reads by position through WrittenFor) writes the ring out up to
// that record first.
// The writer never overwrites ring bytes not yet written to the segment:
// when the ring is full it writes out itself what it needs room for. The
// flushed position only ever moves to a record boundary, so a record
// whose head reached the file before a crash and whose tail did not is
// still whole in the ring. A write larger than half the ring (16 MiB,
// whatever MaxRecordSize is) goes to the segment at once, behind
// everything staged before it. A segment is rolled only after everything
// staged for it is in its file, so the ring never holds bytes of a
// segment that is not the last one.
//
// Recovery: Open scans the ring from the end of the log in the files and
// writes every valid record whose sealed position is where it lies (the
// checks of the recovery scan, ScanValid), stopping at the first that is
// not. The ring file is then created afresh, all zeros, so bytes staged in
// an earlier life can never pass for records of this one. A ring belongs
// to one log: its header carries the id kept in <dir>/STAGING, and a ring
// with another id (a log directory removed and made again at the same
// path) is ignored. A batch that fails after being staged has its first
// record's header zeroed in the ring, so that its records (answered with
// an error) are not replayed.
//
// The ring file is named after the log directory's absolute path and
// removed by a clean Stop. A crashed log leaves it for the next Open,
// which finds it through the id file (<dir>/STAGING also records the
// ring's path) even if the staging directory was changed or turned off,
// or the log directory moved, in between, and removes it from a former
// place once replayed (unless it names another log directory that still
// exists: a copy of the crashed one, which still needs it).

const (
	stagingMagic   = "MQGSTAGE"
	stagingVersion = 1
	stagingFixed   = 44       // header bytes before the log directory's path
	stagingMaxPath = 4000     // longer paths are not recorded
	stagingData    = 4096     // ring bytes start here
	stagingSize    = 16 << 20 // the ring; larger writes bypass it (stage)
	// flushRun bounds one write of the flusher's (runEnd): Written
	// advances at least every flushRun bytes while a backlog is written
	// out, and a writer that finds the ring full waits for one run at
	// most, not for all of the backlog. Uncapped, a flusher that has
	// fallen behind writes up to the whole ring in one call: measured,
	// the writer's full-ring waits then take 1-15 % of
	// BenchmarkAppendAsync's time, against 2-4 % with runs, and the median
	// rate is a quarter lower.
	flushRun = 1 << 20
	// runEndSlots: how many stretches of flushRun bytes Log.runEnds
	// remembers (64 MiB of log, four rings' worth).
	runEndSlots   = 64
	stagingIDFile = "STAGING"
	// writeBehindWindow: the flusher starts the write-back of what it
	// wrote every this many bytes (writeBehind).
	writeBehindWindow = 16 << 20
	// lingerBytes: staged and not yet written, this much cuts the
	// flusher's linger short (flushLoop); one pwrite of it already costs
	// little per byte, and the ring stays far from full.
	lingerBytes = 256 << 10
	// lingerQuiet: a wake-up this soon after the flusher's last write
	// means appends keep coming, and the flusher lingers (flushLoop).
	lingerQuiet = 2 * time.Millisecond
)

var pageSize = int64(os.Getpagesize())

type stagingHeader struct {
	size int64
	id   [16]byte
	dir  string // the log directory, absolute ("" if too long to record)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header: magic, version, flags (0), ring size, id, path length, path,
// CRC32C of all that (little endian).
func encodeStagingHeader(h stagingHeader) []byte {
	dir := h.dir
	if len(dir) > stagingMaxPath {
		dir = ""
	}
	b := make([]byte, stagingFixed+len(dir)+4)
	copy(b, stagingMagic)
	binary.LittleEndian.PutUint32(b[8:], stagingVersion)
	binary.LittleEndian.PutUint64(b[16:], uint64(h.size))
	copy(b[24:40], h.id[:])
	binary.LittleEndian.PutUint32(b[40:], uint32(len(dir)))
	copy(b[stagingFixed:], dir)
	n := stagingFixed + len(dir)
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

var errStagingHeader = errors.New("commitlog: not a staging ring header")

// decodeStagingHeader parses the header at the start of a ring file.
func decodeStagingHeader(b []byte) (stagingHeader, error) {
	var h stagingHeader
	if len(b) < stagingFixed+4 || string(b[:8]) != stagingMagic {
		return h, errStagingHeader
	}
	pl := binary.LittleEndian.Uint32(b[40:])
	if pl > stagingMaxPath || len(b) < stagingFixed+int(pl)+4 {
		return h, fmt.Errorf("%w: path length %d", errStagingHeader, pl)
	}
	n := stagingFixed + int(pl)
	if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
		return h, fmt.Errorf("%w: checksum", errStagingHeader)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != stagingVersion {
		return h, fmt.Errorf("%w: version %d", errStagingHeader, v)
	}
	if binary.LittleEndian.Uint32(b[12:]) != 0 {
		return h, fmt.Errorf("%w: flags", errStagingHeader)
	}
	h.size = int64(binary.LittleEndian.Uint64(b[16:]))
	if h.size <= 0 || h.size%4096 != 0 || h.size > 1<<40 {
		return h, fmt.Errorf("%w: size %d", errStagingHeader, h.size)
	}
	copy(h.id[:], b[24:40])
	h.dir = string(b[stagingFixed:n])
	return h, nil
}

// staging is the mapped ring of a log that uses one.
type staging struct {
	path  string
	unmap func() error
	ring  []byte
	size  int64
}

// put copies b into the ring at log position pos (wrapping).
func (s *staging) put(pos int64, b []byte) {
	n := copy(s.ring[pos%s.size:], b)
	copy(s.ring, b[n:])
}

// get copies the ring's bytes at log position pos into b.
func (s *staging) get(pos int64, b []byte) {
	n := copy(b, s.ring[pos%s.size:])
	copy(b[n:], s.ring)
}

// StagingPath is where the ring of the log in dir lives within stagingDir.
func StagingPath(stagingDir, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return stagingPathAbs(stagingDir, abs), nil
}

func stagingPathAbs(stagingDir, absDir string) string {
	h := sha256.Sum256([]byte(absDir))
	return filepath.Join(stagingDir, "mqgate-"+hex.EncodeToString(h[:10])+".stage")
}

// readStagingID returns the log's ring id and the path of the ring the
// log last wrote; ok is false when it has no id file (or an unreadable
// one).
func (l *Log) readStagingID() (id [16]byte, last string, ok bool) {
	f, err := l.opts.FS.Open(filepath.Join(l.opts.Dir, stagingIDFile))
	if err != nil {
		return id, "", false
	}
	defer f.Close()
	b := make([]byte, 33+stagingMaxPath+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return id, "", false
	}
	lines := strings.SplitN(string(b[:n]), "\n", 3)
	// Three parts: the id, the ring's path (a whole line: not cut short)
	// and what follows the last newline.
	if len(lines) < 3 || len(lines[0]) != 32 || !filepath.IsAbs(lines[1]) {
		return id, "", false
	}
	if _, err := hex.Decode(id[:], []byte(lines[0])); err != nil {
		return id, "", false
	}
	return id, lines[1], true
}

// openStaging replays what the previous run staged and did not write
// (records from end on), then, in async mode, creates this run's ring. It
// returns the log's new end. A ring that cannot be created leaves the log
// writing without one.
//
// The ring replayed is the one the id file says the last run wrote, even
// if the staging directory has changed since (or is now off): a run
// records its ring there before it stages a record, so no other ring can
// hold records of this log. A ring left in a former place is removed once
// replayed (removeFormerRing): its records are in the log, fsynced.
func (l *Log) openStaging(end int64, res *RecoveryResult) (int64, error) {
	abs, err := filepath.Abs(l.opts.Dir)
	if err != nil {
		return end, err
	}
	path := ""
	if l.opts.StagingDir != "" {
		path = stagingPathAbs(l.opts.StagingDir, abs)
	}
	id, last, ok := l.readStagingID()
	if ok {
		if end, err = l.replayRing(last, id, end, res); err != nil {
			return end, err
		}
	}
	_, canReserve := l.segs[len(l.segs)-1].f.(vfs.Reserver)
	ring := path != "" && !l.opts.SyncMode && canReserve
	if path != "" && !ring {
		// No ring: sync appends wait for the fsync anyway, and the ring's
		// records need blocks reserved for them before they are answered.
		if err := l.opts.FS.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("commitlog: cannot remove the staging ring", "path", path, "err", err)
		}
	}
	if ring && (!ok || last != path) {
		if !ok {
			if _, err := rand.Read(id[:]); err != nil {
				return end, err
			}
		}
		if err := vfs.WriteFileAtomic(l.opts.FS, filepath.Join(l.opts.Dir, stagingIDFile), []byte(hex.EncodeToString(id[:])+"\n"+path+"\n")); err != nil {
			return end, err
		}
	}
	if last != "" && last != path {
		l.removeFormerRing(last, abs)
	}
	if path != "" {
		// After the replay: the last run's ring may be one whose log
		// directory is gone because this one was moved there.
		l.removeOrphanRings(path)
	}
	if !ring {
		return end, nil
	}
	size := int64(stagingSize)
	sm, ok := l.opts.FS.(vfs.SharedMemory)
	if !ok {
		l.logger.Info("commitlog: no staging ring: the file system has no shared memory", "path", path)
		return end, nil
	}
	mem, unmap, err := sm.CreateShared(path, stagingData+size)
	if err != nil {
		l.logger.Info("commitlog: no staging ring; async appends write to the segment themselves", "path", path, "err", err)
		return end, nil
	}
	copy(mem, encodeStagingHeader(stagingHeader{size: size, id: id, dir: abs}))
	l.stg = &staging{path: path, unmap: unmap, ring: mem[stagingData:], size: size}
	l.staging.Store(true)
	return end, nil
}

// removeFormerRing removes the ring the last run wrote at path, now
// replayed, unless it names another log directory that still exists (the
// log was copied, not moved: the ring is that one's too).
func (l *Log) removeFormerRing(path, abs string) {
	if h, err := l.readStagingHeader(path); err == nil && h.dir != "" && h.dir != abs {
		if _, _, err := l.opts.FS.Stat(h.dir); err == nil {
			return
		}
	}
	if err := l.opts.FS.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.logger.Warn("commitlog: cannot remove the former staging ring", "path", path, "err", err)
	}
}

// removeOrphanRings removes the rings in the staging directory (other
// than own) whose log directory no longer exists: a log that crashed and
// whose directory was then deleted (test directories, a store wiped by
// hand) would otherwise keep its ring in memory until the machine
// restarts. A ring whose header cannot be read, or that does not record
// its directory, is left alone.
func (l *Log) removeOrphanRings(own string) {
	fs := l.opts.FS
	names, err := fs.List(l.opts.StagingDir)
	if err != nil {
		return
	}
	for _, name := range names {
		p := filepath.Join(l.opts.StagingDir, name)
		if p == own || !strings.HasPrefix(name, "mqgate-") || !strings.HasSuffix(name, ".stage") {
			continue
		}
		if _, isDir, err := fs.Stat(p); err != nil || isDir {
			continue
		}
		h, err := l.readStagingHeader(p)
		if err != nil || h.dir == "" {
			continue
		}
		if _, _, err := fs.Stat(h.dir); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := fs.Remove(p); err == nil {
			l.logger.Info("commitlog: removed the staging ring of a log directory that is gone", "path", p, "dir", h.dir)
		}
	}
}

func (l *Log) readStagingHeader(path string) (stagingHeader, error) {
	f, err := l.opts.FS.Open(path)
	if err != nil {
		return stagingHeader{}, err
	}
	defer f.Close()
	return readStagingHeaderAt(f)
}

func readStagingHeaderAt(r io.ReaderAt) (stagingHeader, error) {
	b := make([]byte, stagingData)
	n, err := r.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return stagingHeader{}, err
	}
	return decodeStagingHeader(b[:n])
}

// replayRing writes the valid records the ring file at path (if there is
// one) holds from log position end on into the last segment, and fsyncs
// it. It reads only the header and the ring's bytes from end on.
func (l *Log) replayRing(path string, id [16]byte, end int64, res *RecoveryResult) (int64, error) {
	f, err := l.opts.FS.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return end, nil
	}
	if err != nil {
		// It may hold answered records: do not start without them.
		return end, fmt.Errorf("commitlog: staging ring %s: %w", path, err)
	}
	defer f.Close()
	fsize, err := f.Size()
	if err != nil {
		return end, fmt.Errorf("commitlog: staging ring %s: %w", path, err)
	}
	h, err := readStagingHeaderAt(f)
	if err == nil && h.id != id {
		err = errors.New("commitlog: staging ring of another log")
	}
	if err == nil && fsize < stagingData+h.size {
		err = fmt.Errorf("commitlog: staging ring cut short (%d bytes)", fsize)
	}
	if err != nil {
		l.logger.Warn("commitlog: ignoring staging ring", "path", path, "err", err)
		return end, nil
	}
	seg := l.segs[len(l.segs)-1]
	limit := min(h.size, seg.base+l.opts.SegmentSize-end)
	if limit <= 0 {
		return end, nil
	}
	// The ring from end on, unwrapped.
	buf := make([]byte, limit)
	n := min(limit, h.size-end%h.size)
	if _, err := f.ReadAt(buf[:n], stagingData+end%h.size); err != nil {
		return end, fmt.Errorf("commitlog: staging ring %s: %w", path, err)
	}
	if _, err := f.ReadAt(buf[n:], stagingData); err != nil {
		return end, fmt.Errorf("commitlog: staging ring %s: %w", path, err)
	}
	valid, recs, err := ScanValid(bytes.NewReader(buf), 0, limit, end, l.opts.MaxRecordSize, int(min(limit, 4<<20)))
	if err != nil || valid == 0 {
		return end, err
	}
	if _, err := seg.f.WriteAt(buf[:valid], end-seg.base); err != nil {
		return end, fmt.Errorf("commitlog: replay staging ring into %s: %w", seg.path, err)
	}
	if err := seg.f.Sync(); err != nil {
		return end, fmt.Errorf("commitlog: replay staging ring into %s: %w", seg.path, err)
	}
	l.logger.Info("commitlog: wrote the records the last run answered and left in its staging ring",
		"path", path, "at", end, "records", recs, "bytes", valid)
	res.Staged += valid
	res.StagedRecords += recs
	return end + valid, nil
}

// stage copies b, bound for file offset off of seg (the active segment),
// into the ring; blocks are reserved first, so that a full disk fails the
// append rather than the flusher.
func (l *Log) stage(seg *segment, b []byte, off int64) error {
	if err := l.allocate(seg, off+int64(len(b))); err != nil {
		return err
	}
	pos := seg.base + off
	if int64(len(b)) > l.stg.size/2 {
		// Too large to stage (a write of many records, or of records
		// near MaxRecordSize): after what is staged, it goes to the
		// segment at once, in the page cache before it is answered.
		l.fmu.Lock()
		defer l.fmu.Unlock()
		if err := l.flushLocked(pos, true); err != nil {
			return err
		}
		if _, err := seg.f.WriteAt(b, off); err != nil {
			return err
		}
		l.advanceFlushed(pos + int64(len(b)))
		return nil
	}
	if need := pos + int64(len(b)) - l.stg.size; need > l.flushed.Load() {
		// The ring is full: write out what must leave it to make room
		// (the flusher, if it holds fmu, is writing some of it now).
		if err := l.flushTo(need, false); err != nil {
			return err
		}
	}
	l.stg.put(pos, b)
	return nil
}

// stopStaging writes out what is staged below pos and has the log write
// without the ring from now on (the file system cannot reserve blocks).
// Called by the writer.
func (l *Log) stopStaging(pos int64) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if err := l.flushLocked(pos, true); err != nil {
		return err
	}
	l.staging.Store(false)
	l.logger.Info("commitlog: the file system cannot reserve blocks; async appends write to the segment themselves")
	return nil
}

// flushTo is flushLocked under fmu.
func (l *Log) flushTo(to int64, atRecord bool) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return l.flushLocked(to, atRecord)
}

// flushLocked writes the ring's bytes from the flushed position up to to
// (or up to the end of the record that holds to-1, unless atRecord says
// that a record starts at to) into the segment being flushed, and
// publishes what is written and answered as Written.
// l.fmu must be held.
func (l *Log) flushLocked(to int64, atRecord bool) error {
	for l.flushed.Load() < to {
		if err := l.flushRun(to, atRecord); err != nil {
			return err
		}
	}
	l.publishWritten()
	return nil
}

// flushRun writes one run of the ring, from the flushed position to
// runEnd's end; flushed < to.
// l.fmu must be held.
func (l *Log) flushRun(to int64, atRecord bool) error {
	if err := l.Failed(); err != nil {
		return err
	}
	flushed := l.flushed.Load()
	end := l.runEnd(flushed, to, atRecord)
	for p := flushed; p < end; {
		a := p % l.stg.size
		n := min(end-p, l.stg.size-a) // the ring wraps
		if _, err := l.fseg.f.WriteAt(l.stg.ring[a:a+n], p-l.fseg.base); err != nil {
			// The records stay in the ring, which the next Open replays.
			err = fmt.Errorf("commitlog: write staged records to %s: %w", l.fseg.path, err)
			l.setFailed(err)
			l.logger.Error("commitlog: write from the staging ring failed; log is now read-only", "err", err)
			l.broadcast()
			return err
		}
		p += n
	}
	// Only now, and only at a record boundary: the writer reuses ring
	// bytes below flushed, and a record torn in the file by a crash must
	// still be whole in the ring for the next Open to replay it.
	l.advanceFlushed(end)
	return nil
}

// advanceFlushed publishes that the segment holds the log up to end (a
// record boundary), then starts the write-back and drops the cached pages
// that are due.
// l.fmu must be held.
func (l *Log) advanceFlushed(end int64) {
	l.flushed.Store(end)
	l.writeBehind(end)
	l.dropBehind(end)
}

// writeBehind starts the write-back of every whole window of
// writeBehindWindow bytes of the flushed segment below log position pos
// that it has not started yet (storage/README.md has the figures below).
//
// Left to the kernel, the pages of a log being written at disk speed pile
// up dirty until the periodic fsync or the kernel's flusher threads take
// them, and each buffered write of a new page costs more meanwhile: on
// a test VM, 1.6 GB written in 256 KiB pwrites took 0.95-2.4 s of CPU
// and 1.8-3.2 s with the final fdatasync, against 0.5-1.3 s and
// 0.9-1.9 s with the write-back of each 16 MiB started as soon as it was
// written. It makes nothing durable: the fsyncs are
// unchanged, and write-back errors still reach them (vfs.WriteBehind).
// l.fmu must be held.
func (l *Log) writeBehind(pos int64) {
	seg := l.fseg
	w, ok := seg.f.(vfs.WriteBehind)
	if !ok || l.opts.NoWriteBehind {
		return
	}
	if l.wbSeg != seg {
		l.wbSeg, l.wbFrom = seg, 0
	}
	for pos-seg.base-l.wbFrom >= writeBehindWindow {
		if err := w.StartWriteBack(l.wbFrom, writeBehindWindow); err != nil {
			l.logger.Debug("commitlog: start write-back", "segment", seg.path, "err", err)
		}
		l.wbFrom += writeBehindWindow
	}
}

// dropBehind drops from the page cache the log that lies more than
// KeepCached bytes behind log position pos, one window at a time (its
// write-back was started when the flusher passed it, long since).
//
// A page cache that grows with the log costs the writes more once it is
// large: on a VM whose free memory goes back to the host (so a page the
// guest takes afresh is faulted in again there), writing 3.2 GB took 3.8-9.4 s of CPU with only the write-back started early,
// and 1.2-1.9 s with the pages more than 64 MiB behind dropped as well:
// the kernel reuses the pages just freed. The store's 3.3 GB append run
// takes 2.2-3.2 µs of CPU per append with a KeepCached of 1 GiB against
// 3.0-4.7 without. Dropping costs a little (the pages are released and
// taken again), so a small KeepCached slows the 1.65 GB run, which a
// 1 GiB one does not. Reads of what was dropped go to the device.
// l.fmu must be held.
func (l *Log) dropBehind(pos int64) {
	keep := l.opts.KeepCached
	if keep <= 0 {
		return
	}
	for pos-l.dropFrom >= keep+writeBehindWindow {
		l.dropCached(l.dropFrom, l.dropFrom+writeBehindWindow)
		l.dropFrom += writeBehindWindow
	}
}

// dropCached drops the clean pages of log positions [from, to) from the
// page cache, and from the readers' mappings, where mapped pages would
// stay cached. A reader that is using them meanwhile faults them in
// again: the bytes do not change.
func (l *Log) dropCached(from, to int64) {
	for from < to {
		s, end, err := l.segFor(from)
		if err != nil {
			return // removed by retention (or closed): nothing to drop
		}
		if l.isActive(s) {
			// segFor bounds the active segment by Written, which the
			// flusher publishes after this; [from, to) is in the file.
			end = to
		}
		end = min(end, to)
		if w, ok := s.f.(vfs.WriteBehind); ok && end > from {
			off, n := from-s.base, end-from
			if mm := s.data(); mm != nil {
				a := (off + pageSize - 1) &^ (pageSize - 1)
				b := min(off+n, int64(len(mm))) &^ (pageSize - 1)
				if a < b {
					if err := vfs.DropPages(mm[a:b]); err != nil {
						l.logger.Debug("commitlog: drop mapped pages", "segment", s.path, "err", err)
					}
				}
			}
			if err := w.DropCache(off, n); err != nil {
				l.logger.Debug("commitlog: drop cached pages", "segment", s.path, "err", err)
			}
		}
		s.release()
		if end <= from {
			return
		}
		from = end
	}
}

// isActive reports whether s is the last segment.
func (l *Log) isActive(s *segment) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs) > 0 && l.segs[len(l.segs)-1] == s
}

// runEnd is where a run starting at from (a record boundary) ends: at the
// first record boundary at or past to, or at the last one at or before
// the next multiple of flushRun if that comes first, but never before the
// end of the first record. Records between from and to are complete in
// the ring: to is at most staged, or the writer's own position.
//
// The boundaries come from what the writer noted (noteRunEnds) and from
// atRecord (a record starts at to) where they can: walking the records'
// headers instead reads a cache line the writer's core has just written
// for every record, which took 6 % of BenchmarkAppendAsync's CPU. The
// walk remains for a to inside a record (a reader's, or the writer's
// room in the ring) and for a run whose stretch has no boundary noted
// past from.
func (l *Log) runEnd(from, to int64, atRecord bool) int64 {
	limit := from - from%flushRun + flushRun
	if to <= limit && atRecord {
		return to
	}
	if to > limit {
		// Only a boundary of this stretch of the log passes: a slot
		// holds older stretches' until the writer notes one of this.
		if e := l.runEnds[(from/flushRun)%runEndSlots].Load(); e > from && e <= limit {
			return e
		}
	}
	end := from
	for end < to {
		var h [message.MinSize]byte
		l.stg.get(end, h[:])
		size, err := message.PeekSize(h[:], l.opts.MaxRecordSize)
		if err != nil {
			// Not a record where one must be: memory was damaged.
			// Write what is there, as the log did before runs.
			l.logger.Error("commitlog: staging ring damaged", "pos", end, "err", err)
			return max(end, to)
		}
		if end > from && end+int64(size) > limit {
			break
		}
		end += int64(size)
	}
	return end
}

// noteRunEnds records, for each stretch of flushRun bytes that the
// batch's records end in, the last of those ends (runEnd). Writer only,
// for a batch written in full and before staged passes it, so that a
// noted boundary is never one of a failed batch's, which the next batch
// overwrites with other records.
func (l *Log) noteRunEnds(batch []*request) {
	slot, last := int64(-1), int64(0)
	for _, r := range batch {
		for _, e := range r.entries {
			end := e.PhysOffset + int64(e.Size)
			if c := (end - 1) / flushRun; c != slot {
				if slot >= 0 {
					l.runEnds[slot%runEndSlots].Store(last)
				}
				slot = c
			}
			last = end
		}
	}
	if slot >= 0 {
		l.runEnds[slot%runEndSlots].Store(last)
	}
}

// publishWritten makes what is both written out and answered visible to
// readers.
// l.fmu must be held.
func (l *Log) publishWritten() {
	if w := min(l.flushed.Load(), l.staged.Load()); w > l.written.Load() {
		l.written.Store(w)
		l.notify()
	}
}

// flushStaged writes out everything answered so far (an fsync is due),
// holding fmu throughout.
func (l *Log) flushStaged() error { return l.flushStagedTo(-1) }

// flushStagedTo writes out what was answered up to the end of the record
// that holds position to-1 (a reader wants it), or all of it if to < 0.
func (l *Log) flushStagedTo(to int64) error {
	if !l.staging.Load() {
		return nil // sync mode's fsync rounds come here too
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if !l.staging.Load() {
		return nil // stopped meanwhile
	}
	atRecord := false
	if st := l.staged.Load(); to < 0 || to >= st {
		to, atRecord = st, true
	}
	return l.flushLocked(to, atRecord)
}

// flushLoop is the flusher goroutine: whenever the writer has staged
// something it writes out all that accumulated, one run at a time.
//
// Under a steady stream of appends it lingers first: woken less than
// lingerQuiet after its last write, it waits Options.StagingLinger (or
// until the writer reports lingerBytes waiting, lingerCut) before
// writing, so that one pwrite takes what arrives meanwhile. A pwrite and
// a wake-up of the flusher cost about the same whether they carry one
// record or fifty, and without the linger 16 closed-loop producers gave
// it one to three records a wake-up. The price is that Written, and so
// dispatching, trails what was answered by up to the linger under load,
// so the flusher does
// not linger while a reader waits for new records (SetReadersWaiting) and
// one that starts waiting cuts a linger short (Hurry). A read of a record
// still in the ring writes it out itself (Read through WrittenFor), and
// after a quiet spell the first record is written at once.
func (l *Log) flushLoop() {
	defer close(l.flusherDone)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var last time.Time // when the flusher last finished writing
	for {
		select {
		case <-l.fwake:
		case <-l.stopFlusher:
			return
		}
		if l.shouldLinger(last) {
			linger.Reset(l.opts.StagingLinger)
			select {
			case <-linger.C:
			case <-l.lingerCut:
				linger.Stop()
			case <-l.stopFlusher:
				linger.Stop()
				return
			}
		} else {
			// Let the appenders already runnable stage their records
			// first; with nothing else runnable this returns at once.
			runtime.Gosched()
		}
		for l.flushNext() {
			select {
			case <-l.stopFlusher:
				return
			default:
			}
		}
		last = time.Now()
	}
}

// flushNext writes the next run of what is staged and publishes Written;
// it reports whether more is left (false after a failure, which fails the
// log). fmu is released between runs, so a writer that finds the ring
// full takes it after the current run and writes out only what it needs
// room for, and readers see each run as soon as it is written.
func (l *Log) flushNext() bool {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if !l.staging.Load() {
		return false
	}
	to := l.staged.Load()
	if l.flushed.Load() < to {
		if err := l.flushRun(to, true); err != nil {
			return false
		}
	}
	l.publishWritten()
	return l.flushed.Load() < l.staged.Load()
}

func (l *Log) wakeFlusher() { signal(l.fwake) }

// SetReadersWaiting installs f, asked at each wake-up of the flusher:
// while it reports readers waiting for new records, the flusher does not
// linger (flushLoop). nil removes it.
func (l *Log) SetReadersWaiting(f func() bool) {
	if f == nil {
		l.readersWaiting.Store(nil)
		return
	}
	l.readersWaiting.Store(&f)
}

// Hurry cuts a linger of the flusher's short (a reader started waiting).
func (l *Log) Hurry() { signal(l.lingerCut) }

// shouldLinger tells the woken flusher whether to wait for more records:
// a linger is configured, appends keep coming (the last write was less
// than lingerWithin ago, normally lingerQuiet) and no reader waits for
// new records.
func (l *Log) shouldLinger(last time.Time) bool {
	if l.opts.StagingLinger <= 0 || time.Since(last) >= l.lingerWithin {
		return false
	}
	f := l.readersWaiting.Load()
	return f == nil || !(*f)()
}

// forgetStaged zeroes the header of the record staged at pos (a failed
// batch starts there), so that a crash does not replay it. Writer only.
func (l *Log) forgetStaged(pos int64) {
	var z [message.MinSize]byte
	l.stg.put(pos, z[:])
}

// closeStaging unmaps the ring, removing its file when everything it
// held is in the log (a clean stop).
func (l *Log) closeStaging(remove bool) {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if l.stg == nil {
		return
	}
	l.staging.Store(false)
	l.stg.unmap()
	if remove {
		if err := l.opts.FS.Remove(l.stg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("commitlog: cannot remove the staging ring", "path", l.stg.path, "err", err)
		}
	}
	l.stg = nil
}
