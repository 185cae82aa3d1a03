package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A torn tail and damage in the middle of the log look alike at the first
// invalid byte; what follows tells them apart. A crash leaves a prefix of
// what was written: after the torn record come zeros (blocks whose data
// never reached the disk), the rest of a partly written record, or nothing. A
// valid record further on (one that passes its CRC and names its own
// position) cannot follow a torn write; it follows damage to bytes that
// were once valid (a flipped bit, a bad sector, a stray write). Recovery
// cuts the first kind and refuses to open on the second: cutting there
// would drop every valid record after the damage (DamageError).

// DamageError is the error Open returns when it finds an invalid record
// that valid records follow. Nothing was truncated. It wraps ErrCorrupt.
type DamageError struct {
	Segment    string // the segment file holding the invalid record
	Pos        int64  // log position of the invalid record
	FileOffset int64  // its offset in Segment
	Reason     string // why the record at Pos is invalid
	Next       int64  // where the invalid stretch ends: the next valid record, or the next segment
	// Following is the log from Pos to its end, in bytes;
	// FollowingRecords the valid records in it.
	Following        int64
	FollowingRecords int
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("commitlog: %s: invalid record at log position %d (file offset %d): %s; "+
		"it is not a torn tail: the invalid bytes end at log position %d, and %d valid records follow (%d bytes from the damage to the end of the log); nothing was truncated",
		e.Segment, e.Pos, e.FileOffset, e.Reason, e.Next, e.FollowingRecords, e.Following)
}

func (e *DamageError) Unwrap() error { return serr.ErrCorrupt }

// Damage is a stretch of a segment that holds no valid record.
type Damage struct {
	Segment string // segment file
	Pos     int64  // log position of the first invalid byte (a record boundary)
	End     int64  // log position of the next valid record, or of the end of the segment's data
	Reason  string // why the record at Pos is invalid
	// Tail: no valid record follows anywhere in the log (a torn tail,
	// which Open cuts by itself).
	Tail bool
	// Zero: the stretch is all zero bytes.
	Zero bool
	// Gap: the segment's data ends short of the next segment's base
	// (End is that base); Open drops the later segments.
	Gap bool
}

// CheckResult is what Check found.
type CheckResult struct {
	Min, End int64 // first log position, end of the data in the segment files
	// ValidEnd is the end of the valid prefix: the first damage's Pos, or
	// End if there is none.
	ValidEnd int64
	Records  int // valid records, anywhere in the log
	// RecordsAfter counts the valid records at or past ValidEnd.
	RecordsAfter int
	Segments     int
	Damage       []Damage
}

// segFile is one segment as Check and recovery read it.
type segFile struct {
	base int64
	path string
	r    io.ReaderAt
	size int64
}

// Reader reads the segments of a log that is not open, read-only.
type Reader struct {
	segs []segFile
}

// OpenReader opens the segments of the log in dir for reading. A missing
// directory is an empty log.
func OpenReader(fs vfs.FS, dir string) (*Reader, error) {
	names, err := fs.List(dir)
	if err != nil {
		if vfs.IsNotExist(err) {
			return &Reader{}, nil
		}
		return nil, err
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegName(n); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	r := &Reader{segs: make([]segFile, 0, len(bases))}
	for _, b := range bases {
		p := segPath(dir, b)
		f, err := fs.Open(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		sz, err := f.Size()
		if err != nil {
			f.Close()
			r.Close()
			return nil, err
		}
		r.segs = append(r.segs, segFile{base: b, path: p, r: f, size: sz})
	}
	return r, nil
}

// Close closes the segment files.
func (r *Reader) Close() {
	for _, s := range r.segs {
		s.r.(vfs.File).Close()
	}
	r.segs = nil
}

// ReadAt fills b from log position pos; the bytes must lie in one
// segment's data.
func (r *Reader) ReadAt(b []byte, pos int64) error {
	i := sort.Search(len(r.segs), func(i int) bool { return r.segs[i].base > pos }) - 1
	if i < 0 || pos+int64(len(b)) > r.segs[i].base+r.segs[i].size {
		return fmt.Errorf("%w: log position %d (%d bytes) is in no segment", serr.ErrNotFound, pos, len(b))
	}
	_, err := r.segs[i].r.ReadAt(b, pos-r.segs[i].base)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// Check validates every record of the log and reports each stretch of
// invalid bytes. maxRecord is the largest valid record
// (Options.MaxRecordSize).
func (r *Reader) Check(maxRecord int) (CheckResult, error) {
	segs := r.segs
	res := CheckResult{Segments: len(segs)}
	if len(segs) == 0 {
		return res, nil
	}
	res.Min = segs[0].base
	last := segs[len(segs)-1]
	res.End = last.base + last.size
	dmg, n, err := scanSegs(segs, segs[0].base, maxRecord)
	if err != nil {
		return res, err
	}
	res.Damage, res.Records = dmg, n
	res.ValidEnd = res.End
	if len(dmg) > 0 {
		res.ValidEnd = dmg[0].Pos
		_, res.RecordsAfter, err = scanSegs(segs, dmg[0].End, maxRecord)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// scanSegs validates records from log position from (a record boundary)
// to the end of the log and returns each stretch of invalid bytes and
// the number of valid records.
func scanSegs(segs []segFile, from int64, maxRecord int) ([]Damage, int, error) {
	var dmg []Damage
	records := 0
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > from })-1, 0)
	for ; i < len(segs); i++ {
		s := segs[i]
		off := max(from-s.base, 0)
		for off < s.size {
			valid, n, err := ScanValid(s.r, off, s.size, s.base, maxRecord, 4<<20)
			if err != nil {
				return dmg, records, fmt.Errorf("commitlog: scan %s: %w", s.path, err)
			}
			records += n
			if valid >= s.size {
				break
			}
			next, found, err := FindValid(s.r, valid+1, s.size, s.base, maxRecord)
			if err != nil {
				return dmg, records, fmt.Errorf("commitlog: scan %s: %w", s.path, err)
			}
			if !found {
				next = s.size
			}
			dmg = append(dmg, Damage{Segment: s.path, Pos: s.base + valid, End: s.base + next,
				Reason: invalidReason(s.r, valid, s.size, maxRecord), Zero: allZeroAt(s.r, valid, next)})
			off = next
		}
		if i+1 < len(segs) && s.base+s.size != segs[i+1].base {
			dmg = append(dmg, Damage{Segment: s.path, Pos: s.base + s.size, End: segs[i+1].base, Gap: true,
				Reason: fmt.Sprintf("segment data ends at log position %d, the next segment starts at %d", s.base+s.size, segs[i+1].base)})
		}
	}
	// Only the last stretch can be a tail: a valid record or another
	// stretch follows every other one.
	if k := len(dmg) - 1; k >= 0 && tailFrom(segs, dmg[k].End) {
		dmg[k].Tail = true
	}
	return dmg, records, nil
}

// tailFrom reports whether nothing valid lies at or past log position
// pos: scanSegs stopped finding records there.
func tailFrom(segs []segFile, pos int64) bool {
	last := segs[len(segs)-1]
	return pos >= last.base+last.size
}

// invalidReason says why the record at file offset off is invalid.
func invalidReason(r io.ReaderAt, off, end int64, maxRecord int) string {
	n := min(end-off, message.MinSize)
	if n > 0 {
		// The record's size field says how much more to read.
		var hb [message.MinSize]byte
		if _, err := r.ReadAt(hb[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return err.Error()
		}
		if allZeroBytes(hb[:n]) {
			return "zero bytes where a record should start"
		}
		if size, err := message.PeekSize(hb[:n], maxRecord); err == nil {
			n = min(end-off, int64(size))
		}
	}
	b := make([]byte, n)
	k, err := r.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err.Error()
	}
	b = b[:k]
	size, err := message.Verify(b, maxRecord)
	if errors.Is(err, message.ErrShort) {
		return fmt.Sprintf("record cut short: %d bytes left in the segment", len(b))
	}
	if err != nil {
		return err.Error()
	}
	h, _ := message.ParseHeader(b[:size])
	return fmt.Sprintf("record claims log position %d", h.PhysOffset)
}

// zeros is compared against (bytes.Equal is vectorized; a byte loop
// took 2.5 ms per MiB).
var zeros [64 << 10]byte

func allZeroBytes(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// allZeroAt reports whether r holds only zero bytes in [off, end); a read
// that fails or comes up short is not zeros. Recovery cuts such a tail of
// the last segment without counting it as damage: the sync-mode zeroer
// leaves one, and after a power loss a file system may show zeros where
// the file's new size reached the disk and its data did not.
func allZeroAt(r io.ReaderAt, off, end int64) bool {
	buf := make([]byte, min(end-off, 256<<10))
	for off < end {
		n := min(int64(len(buf)), end-off)
		if k, _ := r.ReadAt(buf[:n], off); int64(k) < n {
			return false
		}
		if !allZeroBytes(buf[:n]) {
			return false
		}
		off += n
	}
	return true
}

// recordMagic is the 4 bytes at offset 4 of every record.
var recordMagic = func() []byte {
	m := &message.Message{Topic: "T"}
	b, _, _ := message.Encode(nil, m)
	return append([]byte(nil), b[4:8]...)
}()

// FindValid returns the file offset of the first valid record (as
// ScanValid defines it: it passes message.Verify and names its own
// position) at or after file offset off and ending by end, where file
// offset 0 is log position base.
func FindValid(r io.ReaderAt, off, end, base int64, maxRecord int) (int64, bool, error) {
	const chunk = 1 << 20
	buf := make([]byte, min(chunk, max(end-off, 0)))
	var rec []byte
	for c := off; c < end; {
		n := min(int64(len(buf)), end-c)
		if k, err := r.ReadAt(buf[:n], c); int64(k) < n {
			if err == nil || errors.Is(err, io.EOF) {
				return 0, false, nil // the file is shorter than end
			}
			return 0, false, err
		}
		b := buf[:n]
		for i := 0; ; {
			j := bytes.Index(b[i:], recordMagic)
			if j < 0 {
				break
			}
			i += j
			start := c + int64(i) - 4
			i++
			if start < off || start+message.MinSize > end {
				continue
			}
			var hb [message.MinSize]byte
			if _, err := r.ReadAt(hb[:], start); err != nil {
				return 0, false, err
			}
			size, err := message.PeekSize(hb[:], maxRecord)
			if err != nil || start+int64(size) > end {
				continue
			}
			if h, _ := message.ParseHeader(hb[:]); h.PhysOffset != base+start {
				continue
			}
			if cap(rec) < size {
				rec = make([]byte, size)
			}
			if _, err := r.ReadAt(rec[:size], start); err != nil {
				return 0, false, err
			}
			if _, err := message.Verify(rec[:size], maxRecord); err == nil {
				return start, true, nil
			}
		}
		if c+n >= end {
			break
		}
		c += n - 3 // a magic split by the chunk's end is found in the next
	}
	return 0, false, nil
}

// damageAt describes the damage at log position pos (where a record is
// invalid) for DamageError, or returns nil if nothing valid follows it
// (a torn tail).
func (l *Log) damageAt(pos int64, sizes []int64) (*DamageError, error) {
	segs := make([]segFile, len(l.segs))
	for j, s := range l.segs {
		segs[j] = segFile{base: s.base, path: s.path, r: s.f, size: sizes[j]}
	}
	dmg, n, err := scanSegs(segs, pos, l.opts.MaxRecordSize)
	if err != nil {
		return nil, err
	}
	if len(dmg) == 0 || dmg[0].Pos != pos {
		return nil, fmt.Errorf("commitlog: rescanning at log position %d found no damage there", pos)
	}
	if len(dmg) == 1 && dmg[0].Tail {
		return nil, nil
	}
	d := dmg[0]
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > pos }) - 1
	last := segs[len(segs)-1]
	return &DamageError{Segment: d.Segment, Pos: pos, FileOffset: pos - segs[i].base, Reason: d.Reason,
		Next: d.End, Following: last.base + last.size - pos, FollowingRecords: n}, nil
}

// Cut truncates the log in dir at log position pos, which must be a
// record boundary (CheckResult.ValidEnd), and returns the bytes it
// dropped. Unless they are all zeros, the dropped part of the segment
// holding pos and every later segment are first copied (segment) or
// moved (later segments) into saveDir. The log must not be open.
//
// A crash at any point leaves every byte either in the log or in
// saveDir: the later segments are moved first, last one first, and the
// moves made durable before the segment holding pos is copied out and
// truncated. (Truncating first would leave a gap, and Open drops the
// segments after a gap.) Until the truncation the log keeps its damage,
// so Open still refuses it and a second Cut finishes the work; what it
// copies again is then in both save directories.
func Cut(fs vfs.FS, dir string, pos int64, saveDir string) (int64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, err
	}
	var bases []int64
	for _, n := range names {
		if b, ok := parseSegName(n); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var dropped int64
	saved := false
	save := func() error {
		if saved {
			return nil
		}
		saved = true
		return fs.MkdirAll(saveDir)
	}
	// The segments wholly past pos, last one first.
	moved := false
	for i := len(bases) - 1; i > 0 && bases[i] >= pos; i-- {
		b := bases[i]
		p := segPath(dir, b)
		size, _, err := fs.Stat(p)
		if err != nil {
			return dropped, err
		}
		if err := save(); err != nil {
			return dropped, err
		}
		if err := fs.Rename(p, filepath.Join(saveDir, segName(b))); err != nil {
			return dropped, err
		}
		dropped += size
		moved = true
	}
	if moved {
		if err := fs.SyncDir(saveDir); err != nil {
			return dropped, err
		}
		if err := fs.SyncDir(dir); err != nil {
			return dropped, err
		}
	}
	// The segment holding pos (the first one if pos precedes it).
	for _, b := range bases {
		p := segPath(dir, b)
		size, _, err := fs.Stat(p)
		if vfs.IsNotExist(err) {
			continue // moved above
		}
		if err != nil {
			return dropped, err
		}
		if b+size <= pos || (b >= pos && b > bases[0]) {
			continue
		}
		off := max(pos-b, 0)
		f, err := fs.OpenRW(p)
		if err != nil {
			return dropped, err
		}
		if !allZeroAt(f, off, size) {
			if err := save(); err != nil {
				f.Close()
				return dropped, err
			}
			if err := copyOut(fs, f, off, size, filepath.Join(saveDir, fmt.Sprintf("%s.from-%d", segName(b), off))); err != nil {
				f.Close()
				return dropped, err
			}
			if err := fs.SyncDir(saveDir); err != nil {
				f.Close()
				return dropped, err
			}
		}
		err = f.Truncate(off)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return dropped, err
		}
		dropped += size - off
	}
	return dropped, fs.SyncDir(dir)
}

// OpenSaved opens what Cut saved in the directories saveDirs for
// reading, at the log positions the bytes had: whole segments under
// their names, and the part of one as <name>.from-<file offset>. Other
// files are ignored. Two directories may hold the same bytes (a Cut
// interrupted and done again); Walk then visits their records twice.
func OpenSaved(fs vfs.FS, saveDirs ...string) (*Reader, error) {
	r := &Reader{}
	for _, saveDir := range saveDirs {
		names, err := fs.List(saveDir)
		if err != nil {
			r.Close()
			return nil, err
		}
		for _, n := range names {
			base, ok := parseSegName(n)
			if !ok {
				seg, from, cut := strings.Cut(n, ".from-")
				b, okSeg := parseSegName(seg)
				off, err := strconv.ParseInt(from, 10, 64)
				if !cut || !okSeg || err != nil || off < 0 {
					continue
				}
				base = b + off
			}
			p := filepath.Join(saveDir, n)
			f, err := fs.Open(p)
			if err != nil {
				r.Close()
				return nil, err
			}
			sz, err := f.Size()
			if err != nil {
				f.Close()
				r.Close()
				return nil, err
			}
			r.segs = append(r.segs, segFile{base: base, path: p, r: f, size: sz})
		}
	}
	sort.SliceStable(r.segs, func(i, j int) bool { return r.segs[i].base < r.segs[j].base })
	return r, nil
}

// Walk calls fn with the log position and the bytes of each valid record
// (as ScanValid defines it) at or after log position from, in log order,
// skipping invalid stretches as Check does. rec is valid only during the
// call; an error from fn ends the walk and is returned.
func (r *Reader) Walk(from int64, maxRecord int, fn func(pos int64, rec []byte) error) error {
	for _, s := range r.segs {
		if s.base+s.size <= from {
			continue
		}
		if err := walkSeg(s, max(from-s.base, 0), maxRecord, fn); err != nil {
			return err
		}
	}
	return nil
}

func walkSeg(s segFile, off int64, maxRecord int, fn func(pos int64, rec []byte) error) error {
	buf := make([]byte, min(int64(max(4<<20, maxRecord)), max(s.size-off, 0)))
	for off < s.size {
		n := min(int64(len(buf)), s.size-off)
		if k, err := s.r.ReadAt(buf[:n], off); int64(k) < n {
			if err == nil || errors.Is(err, io.EOF) {
				return nil // the file is shorter than it was
			}
			return fmt.Errorf("commitlog: read %s: %w", s.path, err)
		}
		b := buf[:n]
		p, invalid := 0, false
		for p < len(b) {
			size, err := message.Verify(b[p:], maxRecord)
			if errors.Is(err, message.ErrShort) && p > 0 && off+int64(len(b)) < s.size {
				break // the record continues past this read: read from it again
			}
			if err == nil {
				if h, _ := message.ParseHeader(b[p:]); h.PhysOffset == s.base+off+int64(p) {
					if err := fn(s.base+off+int64(p), b[p:p+size]); err != nil {
						return err
					}
					p += size
					continue
				}
			}
			invalid = true
			break
		}
		if !invalid {
			off += int64(p)
			continue
		}
		next, found, err := FindValid(s.r, off+int64(p)+1, s.size, s.base, maxRecord)
		if err != nil {
			return fmt.Errorf("commitlog: scan %s: %w", s.path, err)
		}
		if !found {
			return nil
		}
		off = next
	}
	return nil
}

// copyOut writes f's bytes [off, end) to a new file at path, fsynced.
func copyOut(fs vfs.FS, f vfs.File, off, end int64, path string) error {
	out, err := fs.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, min(end-off, 1<<20))
	var w int64
	for off < end {
		n := min(int64(len(buf)), end-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			out.Close()
			return err
		}
		if _, err := out.WriteAt(buf[:n], w); err != nil {
			out.Close()
			return err
		}
		off += n
		w += n
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
