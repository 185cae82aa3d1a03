package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// Problem is one finding of Verify.
type Problem struct {
	Part string // "format", "commitlog", "checkpoint", "consumequeue" or "index"
	File string // the file concerned ("" if none)
	Pos  int64  // log position concerned, -1 if none
	What string // what is wrong
	// Damage: bytes that a crash does not leave (a crash leaves a torn log
	// tail, which Open cuts by itself: that is reported with Damage
	// false). Open refuses a store whose log has damage before its tail.
	Damage bool
	// Repair says what Repair does about it, and what that drops.
	Repair string
}

// VerifyReport is what Verify found in a data directory.
type VerifyReport struct {
	Dir            string
	Format         int  // format version (1 if not recorded)
	FormatRecorded bool // the FORMAT file exists
	Unclean        bool // the last run did not close cleanly (RUNNING marker)

	LogMin, LogEnd int64 // first log position, end of the segment files' data
	// ValidEnd is where the valid log ends: the first invalid byte, or
	// LogEnd. Repair cuts the log there when it is below LogEnd.
	ValidEnd     int64
	Records      int // valid records in the whole log
	RecordsAfter int // valid records at or past ValidEnd: what a cut drops
	Segments     int

	// Salvageable are the valid records past the damage that a salvage
	// would append again (Options.SalvageTopic), originally at log
	// positions SalvageFirst to SalvageLast (-1 if none); SalvageSkipped
	// the ones it would leave out.
	Salvageable, SalvageSkipped int
	SalvageFirst, SalvageLast   int64
	// PendingSalvages are salvages a crash interrupted.
	PendingSalvages []PendingSalvage

	Checkpoint         bool // a valid checkpoint file exists
	CheckpointFlushed  int64
	CheckpointDispatch int64
	QueueEntries       int // consume-queue entries checked against the log

	Problems []Problem
}

// Damaged reports whether any problem is damage (see Problem.Damage).
func (r *VerifyReport) Damaged() bool {
	for _, p := range r.Problems {
		if p.Damage {
			return true
		}
	}
	return false
}

// needsCut reports whether Repair cuts the log.
func (r *VerifyReport) needsCut() bool { return r.ValidEnd < r.LogEnd }

// repairSavedDir is where Repair saves the log it cuts off.
const repairSavedDir = "repair-saved"

// Verify checks the data directory dir without changing anything: the
// format version, every record of the commit log, the checkpoint, the
// consume-queue entries the checkpoint vouches for (each against the
// record it points at) and the index files' headers. It reports each
// problem and what Repair would do about it. The store must not be open
// (Verify takes the directory's lock: ErrLocked). A directory of a newer
// format fails with ErrFormat.
func Verify(dir string, opts Options) (*VerifyReport, error) {
	opts = opts.Defaults()
	fs := opts.FS
	lk, err := lockExisting(fs, dir)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	return verify(fs, dir, opts)
}

func lockExisting(fs vfs.FS, dir string) (io.Closer, error) {
	if _, isDir, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("storage: data directory %s: %w", dir, err)
	} else if !isDir {
		return nil, fmt.Errorf("%w: %s is not a directory", serr.ErrInvalid, dir)
	}
	lk, err := fs.Lock(filepath.Join(dir, lockFile))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s (stop the mqgate using it first): %w", serr.ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("storage: lock %s: %w", dir, err)
	}
	return lk, nil
}

func verify(fs vfs.FS, dir string, opts Options) (*VerifyReport, error) {
	r := &VerifyReport{Dir: dir}
	v, present, err := readFormat(fs, dir)
	switch {
	case err != nil && errors.Is(err, serr.ErrCorrupt):
		r.Format = 1
		r.Problems = append(r.Problems, Problem{Part: "format", File: filepath.Join(dir, formatFile), Pos: -1,
			What: err.Error(), Damage: true, Repair: fmt.Sprintf("rewrite it with version %d", FormatVersion)})
	case err != nil:
		return nil, err
	case v > FormatVersion:
		return nil, fmt.Errorf("%w: data directory %s has format version %d; this mqgate supports up to %d",
			serr.ErrFormat, dir, v, FormatVersion)
	default:
		r.Format, r.FormatRecorded = v, present
	}
	if _, _, err := fs.Stat(filepath.Join(dir, runningFile)); err == nil {
		r.Unclean = true
	}

	logDir := filepath.Join(dir, "commitlog")
	rd, err := commitlog.OpenReader(fs, logDir)
	if err != nil {
		return nil, fmt.Errorf("storage: commit log: %w", err)
	}
	defer rd.Close()
	cr, err := rd.Check(opts.MaxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("storage: commit log: %w", err)
	}
	r.LogMin, r.LogEnd, r.ValidEnd = cr.Min, cr.End, cr.ValidEnd
	r.Records, r.RecordsAfter, r.Segments = cr.Records, cr.RecordsAfter, cr.Segments
	cp, cpErr := loadCheckpoint(fs, dir)
	cut := fmt.Sprintf("cut the log at position %d: drops %d bytes holding %d valid records (saved under %s)",
		r.ValidEnd, r.LogEnd-r.ValidEnd, r.RecordsAfter, filepath.Join(dir, repairSavedDir))
	for i, d := range cr.Damage {
		// A gap is what a power loss with async flush and a staging ring
		// leaves (the segment's tail was still in the ring when the next
		// segment began); Open drops the later segments, whose records
		// were not fsynced.
		p := Problem{Part: "commitlog", File: d.Segment, Pos: d.Pos, Damage: !d.Tail && !d.Gap}
		switch {
		case d.Tail && d.Zero:
			p.What = fmt.Sprintf("log tail of %d zero bytes (allocated, never written)", d.End-d.Pos)
			p.Repair = "cut it (Open does so by itself; it holds no data)"
		case d.Tail:
			p.What = fmt.Sprintf("torn tail: %d bytes from here to the end hold no valid record (%s)", d.End-d.Pos, d.Reason)
			p.Repair = "cut it (Open does so by itself: a record written when the process stopped)"
		case d.Gap:
			p.What = d.Reason + " (what a power loss leaves when the segment's tail was not yet written; its records were not fsynced)"
			p.Repair = fmt.Sprintf("none: Open drops the %d bytes of segments after it by itself", r.LogEnd-d.End)
		default:
			p.What = fmt.Sprintf("%s; %d bytes without a valid record up to log position %d", d.Reason, d.End-d.Pos, d.End)
			if d.Zero {
				p.What += " (all zero bytes)"
			}
		}
		if (d.Tail || d.Gap) && cpErr == nil && d.Pos < cp.Flushed {
			// The checkpoint vouches for these bytes: not a crash.
			p.Damage = true
			p.What = fmt.Sprintf("%s; below the checkpoint's fsynced position %d", p.What, cp.Flushed)
		}
		if p.Damage {
			if i == 0 {
				p.Repair = cut
			} else {
				p.Repair = fmt.Sprintf("dropped by the cut at log position %d", r.ValidEnd)
			}
		}
		r.Problems = append(r.Problems, p)
	}

	// The checkpoint.
	cpPath := filepath.Join(dir, checkpointFile)
	rebuild := "remove it: the next open validates the whole log and rebuilds the consume queues and the index from it (drops nothing)"
	switch {
	case vfs.IsNotExist(cpErr):
	case cpErr != nil:
		r.Problems = append(r.Problems, Problem{Part: "checkpoint", File: cpPath, Pos: -1, What: cpErr.Error(), Damage: true, Repair: rebuild})
	default:
		r.Checkpoint, r.CheckpointFlushed, r.CheckpointDispatch = true, cp.Flushed, cp.Dispatched
		if cp.Flushed > r.ValidEnd || cp.Dispatched > r.LogEnd {
			r.Problems = append(r.Problems, Problem{Part: "checkpoint", File: cpPath, Pos: cp.Flushed, Damage: true,
				What: fmt.Sprintf("says the log is fsynced and valid up to position %d (dispatched up to %d), but the valid log ends at %d",
					cp.Flushed, cp.Dispatched, r.ValidEnd),
				Repair: rebuild})
		}
	}

	// Consume-queue entries below the checkpoint's dispatch position:
	// Open keeps them (the rest it drops and rebuilds).
	if r.Checkpoint {
		if err := verifyQueues(fs, dir, opts, rd, r, cp.Dispatched); err != nil {
			return nil, err
		}
	}

	if err := salvageView(fs, dir, rd, r, opts); err != nil {
		return nil, err
	}

	ps, err := index.Check(fs, filepath.Join(dir, "index"))
	if err != nil {
		return nil, fmt.Errorf("storage: index: %w", err)
	}
	for _, p := range ps {
		r.Problems = append(r.Problems, Problem{Part: "index", File: p.File, Pos: -1, What: p.Reason, Damage: true,
			Repair: "remove the index: the next open rebuilds it from the log (Open drops this file and the later ones by itself)"})
	}
	return r, nil
}

// loadCheckpoint reads the checkpoint file: an error satisfying
// vfs.IsNotExist if there is none, ErrCorrupt if damaged.
func loadCheckpoint(fs vfs.FS, dir string) (checkpoint, error) {
	b, err := vfs.ReadFile(fs, filepath.Join(dir, checkpointFile))
	if err != nil {
		return checkpoint{}, err
	}
	return decodeCheckpoint(b)
}

// verifyQueues checks every consume-queue entry pointing into
// [logMin, dispatched) against the record it points at.
func verifyQueues(fs vfs.FS, dir string, opts Options, rd *commitlog.Reader, r *VerifyReport, dispatched int64) error {
	root := filepath.Join(dir, "consumequeue")
	topics, err := fs.List(root)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: consume queues: %w", err)
	}
	rec := make([]byte, 0, 4096)
	for _, esc := range topics {
		topic, err := consumequeue.Unescape(esc)
		if err != nil {
			continue // not a queue directory; Open skips it too
		}
		ids, err := fs.List(filepath.Join(root, esc))
		if err != nil {
			continue
		}
		for _, idName := range ids {
			id, err := strconv.ParseInt(idName, 10, 32)
			if err != nil {
				continue
			}
			qdir := filepath.Join(root, esc, idName)
			files, err := fs.List(qdir)
			if err != nil {
				return fmt.Errorf("storage: consume queue %s: %w", qdir, err)
			}
			var bad int
			var first Problem
			for _, fn := range files {
				base, ok := parseCQName(fn)
				if !ok {
					continue
				}
				b, err := vfs.ReadFile(fs, filepath.Join(qdir, fn))
				if err != nil {
					return fmt.Errorf("storage: consume queue %s: %w", qdir, err)
				}
				for j := 0; (j+1)*consumequeue.EntrySize <= len(b); j++ {
					e := consumequeue.DecodeEntry(b[j*consumequeue.EntrySize:])
					if e.Size == 0 || e.PhysOffset < r.LogMin || e.PhysOffset >= dispatched {
						continue // a hole, below retention, or rebuilt by Open
					}
					r.QueueEntries++
					qoff := base + int64(j)
					why := checkEntry(rd, &rec, e, topic, int32(id), qoff, opts.MaxRecordSize)
					if why == "" {
						continue
					}
					if bad == 0 {
						first = Problem{Part: "consumequeue", File: filepath.Join(qdir, fn), Pos: e.PhysOffset, Damage: true,
							What: fmt.Sprintf("queue %s/%d offset %d: %s", topic, id, qoff, why)}
					}
					bad++
				}
			}
			if bad > 0 {
				if bad > 1 {
					first.What += fmt.Sprintf(" (and %d more entries of this queue)", bad-1)
				}
				first.Repair = "rebuild the consume queues from the log (drops nothing the log holds)"
				r.Problems = append(r.Problems, first)
			}
		}
	}
	return nil
}

// checkEntry returns why the entry does not point at its record, or "".
func checkEntry(rd *commitlog.Reader, buf *[]byte, e QueueEntry, topic string, id int32, qoff int64, maxRecord int) string {
	if e.Size < message.MinSize || int(e.Size) > maxRecord {
		return fmt.Sprintf("entry size %d is no record size", e.Size)
	}
	if cap(*buf) < int(e.Size) {
		*buf = make([]byte, e.Size)
	}
	b := (*buf)[:e.Size]
	if err := rd.ReadAt(b, e.PhysOffset); err != nil {
		return fmt.Sprintf("entry points at log position %d: %v", e.PhysOffset, err)
	}
	if _, err := message.Verify(b, maxRecord); err != nil {
		return fmt.Sprintf("entry points at log position %d, which holds no valid record of %d bytes: %v", e.PhysOffset, e.Size, err)
	}
	v, err := message.ParseView(b)
	if err != nil {
		return fmt.Sprintf("record at log position %d: %v", e.PhysOffset, err)
	}
	if v.PhysOffset != e.PhysOffset || v.QueueOffset != qoff || v.QueueID != id || string(v.Topic) != topic {
		return fmt.Sprintf("entry points at log position %d, which holds %s/%d offset %d", e.PhysOffset, v.Topic, v.QueueID, v.QueueOffset)
	}
	return ""
}

func parseCQName(n string) (int64, bool) {
	if len(n) != 23 || filepath.Ext(n) != ".cq" {
		return 0, false
	}
	v, err := strconv.ParseInt(n[:20], 10, 64)
	return v, err == nil && v >= 0
}

// RepairReport says what Repair found and did.
type RepairReport struct {
	Found   *VerifyReport // before the repair
	Actions []string      // what it did, in order
	// SavedTo is the directory holding the log it cut off ("" if none).
	SavedTo string
	// Salvaged says what Salvage appended again, per cut position.
	Salvaged []SalvageReport
	// After is what the store's Open did once repaired.
	After RecoveryInfo
	// End is where the log ends once repaired (and salvaged).
	End int64
}

// Repair repairs what Verify reports in dir, then opens the store (which
// rebuilds the consume queues and the index) and closes it cleanly.
//
// Damage in the commit log is cut out by truncating the log at its first
// invalid byte (VerifyReport.ValidEnd): every record before it is kept,
// the records after it leave the store. Those bytes are not destroyed:
// the cut part of the segment and every later segment are saved under
// <dir>/repair-saved/<time>/ (log segments, with their original names,
// the part of one as <name>.from-<file offset>). Queue offsets are dense
// and sealed into each record, so records cannot be taken out of the
// middle of the log and the ones after kept in place. A damaged
// checkpoint is removed; damaged consume queues or index files are
// removed and rebuilt from the log by the open that follows. A directory
// without damage is left as it is (a torn tail is left to Open).
//
// The store must not be open (ErrLocked).
func Repair(ctx context.Context, dir string, opts Options) (*RepairReport, error) {
	opts = opts.Defaults()
	fs := opts.FS
	lk, err := lockExisting(fs, dir)
	if err != nil {
		return nil, err
	}
	found, err := verify(fs, dir, opts)
	if err != nil {
		lk.Close()
		return nil, err
	}
	rep := &RepairReport{Found: found}
	if err := repairLocked(fs, dir, found, rep, ""); err != nil {
		lk.Close()
		return rep, fmt.Errorf("storage: repair %s: %w", dir, err)
	}
	lk.Close()
	s, err := Open(dir, opts)
	if err != nil {
		return rep, fmt.Errorf("storage: open after repair: %w", err)
	}
	rep.After = s.Recovery()
	rep.End = rep.After.LogEnd
	if err := s.Close(ctx); err != nil {
		return rep, fmt.Errorf("storage: close after repair: %w", err)
	}
	return rep, nil
}

// repairLocked carries out what found calls for; a cut saves into save
// (a new directory under repair-saved/ if "").
func repairLocked(fs vfs.FS, dir string, found *VerifyReport, rep *RepairReport, save string) error {
	var cqBad, idxBad, cpBad, fmtBad bool
	for _, p := range found.Problems {
		if !p.Damage {
			continue
		}
		switch p.Part {
		case "consumequeue":
			cqBad = true
		case "index":
			idxBad = true
		case "checkpoint":
			cpBad = true
		case "format":
			fmtBad = true
		}
	}
	cut := found.Damaged() && found.needsCut()
	if cut {
		if save == "" {
			save = newSaveDir(dir, found.ValidEnd)
		}
		n, err := commitlog.Cut(fs, filepath.Join(dir, "commitlog"), found.ValidEnd, save)
		if err != nil {
			return fmt.Errorf("cut the log at %d: %w", found.ValidEnd, err)
		}
		if _, _, err := fs.Stat(save); err == nil {
			rep.SavedTo = save
		}
		msg := fmt.Sprintf("cut the log at position %d: dropped %d bytes holding %d valid records", found.ValidEnd, n, found.RecordsAfter)
		if rep.SavedTo != "" {
			msg += ", saved under " + rep.SavedTo
		}
		rep.Actions = append(rep.Actions, msg)
	}
	if cut || cpBad || cqBad || idxBad {
		// Without a checkpoint the next open validates the whole log and
		// re-dispatches it.
		if err := fs.Remove(filepath.Join(dir, checkpointFile)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		rep.Actions = append(rep.Actions, "removed the checkpoint")
	}
	if cut || cqBad {
		if err := fs.RemoveAll(filepath.Join(dir, "consumequeue")); err != nil {
			return err
		}
		rep.Actions = append(rep.Actions, "removed the consume queues (rebuilt from the log)")
	}
	if cut || idxBad {
		if err := fs.RemoveAll(filepath.Join(dir, "index")); err != nil {
			return err
		}
		rep.Actions = append(rep.Actions, "removed the index (rebuilt from the log)")
	}
	if fmtBad {
		if err := fs.Remove(filepath.Join(dir, formatFile)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		rep.Actions = append(rep.Actions, fmt.Sprintf("rewrote %s (version %d)", formatFile, FormatVersion))
	}
	if len(rep.Actions) > 0 {
		return fs.SyncDir(dir)
	}
	return nil
}
