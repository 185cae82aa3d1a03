package raftstore

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A member that fell behind the entries the others still keep catches up
// from a copy of another member's store (a raft snapshot, in raft's
// terms). The copy is a Checkpoint of the sending replica: the applied
// position with everything the store holds at it (the commit log up to
// its end there, the metadata files, the format marker). The consume
// queues, the index and the store checkpoint are left out: the receiving
// store rebuilds them from the log when it opens.
//
// The receiver stages the copy (StageCopy: dir/incoming, complete or
// absent), records raft's snapshot in its raft log, and restarts;
// OpenReplica then swaps the staged store in before it opens it. Entries
// after the copy's index are applied as usual; those up to it are
// skipped, being in the copy.

// ErrCopyStaged: a copy of another member's store is staged; the member
// must be restarted (closed and opened again) to install it.
var ErrCopyStaged = errors.New("cluster: a copy of another member's store is staged: restart to install it")

// Checkpoint describes a replica's state at an applied index: what a
// member that catches up copies.
type Checkpoint struct {
	Index     uint64 `json:"index"`
	LogEnd    int64  `json:"log_end"`
	StoreTime int64  `json:"store_time"`
	// Format is the group's entry format at Index (format.go); absent
	// (0) from a member of a version without formats: 1.
	Format int `json:"format,omitempty"`
	// Files are small files of the store copied whole, by path relative
	// to the store directory (FORMAT, meta/...).
	Files map[string][]byte `json:"files"`
	// Segments are the commit-log segments to copy, oldest first, each
	// up to Length bytes (the last one ends at LogEnd).
	Segments []SegmentPart `json:"segments"`
}

// SegmentPart is the first Length bytes of the segment file Name (in the
// store's commitlog directory).
type SegmentPart struct {
	Name   string `json:"name"`
	Length int64  `json:"length"`
}

const (
	incomingDir = "incoming"
	segDir      = "commitlog"
	metaDir     = "meta"
	formatFile  = "FORMAT"
)

// Checkpoint fsyncs the store, records the applied position and describes
// the store at it. Called by the raft loop only (no entry is applied
// meanwhile, so the metadata read here matches the log end).
func (r *Replica) Checkpoint() (Checkpoint, error) {
	if err := r.Persist(); err != nil {
		return Checkpoint{}, err
	}
	cp := Checkpoint{Index: r.st.index, LogEnd: r.st.logEnd, StoreTime: r.st.storeTime, Format: r.st.format, Files: map[string][]byte{}}
	store := filepath.Join(r.dir, "store")
	b, err := vfs.ReadFile(r.fs, filepath.Join(store, formatFile))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cluster: checkpoint: %w", err)
	}
	cp.Files[formatFile] = b
	names, err := r.fs.List(filepath.Join(store, metaDir))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cluster: checkpoint: %w", err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			continue
		}
		p := filepath.Join(store, metaDir, name)
		if _, isDir, err := r.fs.Stat(p); err != nil || isDir {
			continue
		}
		b, err := vfs.ReadFile(r.fs, p)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("cluster: checkpoint: %w", err)
		}
		cp.Files[metaDir+"/"+name] = b
	}
	segs, err := r.fs.List(filepath.Join(store, segDir))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("cluster: checkpoint: %w", err)
	}
	for _, name := range segs {
		base, ok := commitlog.ParseSegmentName(name)
		if !ok || base >= cp.LogEnd {
			continue
		}
		cp.Segments = append(cp.Segments, SegmentPart{Name: name, Length: min(cp.LogEnd-base, r.geo.segmentSize)})
	}
	return cp, nil
}

// OpenSegment opens a segment of a Checkpoint for reading; any goroutine.
// Retention may have removed it since (an error: the copy starts over).
func (r *Replica) OpenSegment(name string) (io.ReaderAt, io.Closer, error) {
	if _, ok := commitlog.ParseSegmentName(name); !ok {
		return nil, nil, fmt.Errorf("cluster: %q is not a segment", name)
	}
	f, err := r.fs.Open(filepath.Join(r.dir, "store", segDir, name))
	if err != nil {
		return nil, nil, err
	}
	return f, f, nil
}

// StageCopy writes the copy cp into dir/incoming (complete, or absent
// after a failure): its small files, its segments (each filled by fill,
// which writes exactly the part's Length bytes) padded to the segment
// size, and the applied position. Any goroutine (it touches only
// dir/incoming), one at a time; the copy is installed by the next
// OpenReplica.
func (r *Replica) StageCopy(cp Checkpoint, fill func(SegmentPart, io.Writer) error) error {
	if cp.Index <= r.applied.Load() {
		return fmt.Errorf("cluster: a copy at index %d is not ahead of this member's %d", cp.Index, r.applied.Load())
	}
	tmp := filepath.Join(r.dir, incomingDir+".tmp")
	if err := r.fs.RemoveAll(tmp); err != nil {
		return err
	}
	store := filepath.Join(tmp, "store")
	for _, d := range []string{store, filepath.Join(store, metaDir), filepath.Join(store, segDir)} {
		if err := r.fs.MkdirAll(d); err != nil {
			return err
		}
	}
	for name, b := range cp.Files {
		if name != formatFile && (!strings.HasPrefix(name, metaDir+"/") || strings.Contains(name[len(metaDir)+1:], "/") || strings.Contains(name, "..")) {
			return fmt.Errorf("cluster: the copy names an unexpected file %q", name)
		}
		if err := writeSynced(r.fs, filepath.Join(store, filepath.FromSlash(name)), 0, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
			return err
		}
	}
	for _, sp := range cp.Segments {
		base, ok := commitlog.ParseSegmentName(sp.Name)
		if !ok || sp.Length < 0 || sp.Length > r.geo.segmentSize || base+sp.Length > cp.LogEnd {
			return fmt.Errorf("cluster: the copy's segment %q of %d bytes does not fit its log end %d", sp.Name, sp.Length, cp.LogEnd)
		}
		path := filepath.Join(store, segDir, sp.Name)
		if err := writeSynced(r.fs, path, r.geo.segmentSize, func(w io.Writer) error { return fill(sp, w) }); err != nil {
			return err
		}
	}
	format := max(cp.Format, 1)
	if format > FormatVersion {
		return fmt.Errorf("cluster: the copy's group is at entry format %d; this member reads up to %d: run a version of mqgate that reads it", format, FormatVersion)
	}
	state := encodeState(appliedState{index: cp.Index, logEnd: cp.LogEnd, storeTime: cp.StoreTime, format: format})
	if err := writeSynced(r.fs, filepath.Join(tmp, stateFile), 0, func(w io.Writer) error { _, err := w.Write(state); return err }); err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(store, metaDir), filepath.Join(store, segDir), store, tmp} {
		if err := r.fs.SyncDir(d); err != nil {
			return err
		}
	}
	inc := filepath.Join(r.dir, incomingDir)
	if err := r.fs.RemoveAll(inc); err != nil {
		return err
	}
	if err := r.fs.Rename(tmp, inc); err != nil {
		return err
	}
	return r.fs.SyncDir(r.dir)
}

// writeSynced creates path, writes it through fill and fsyncs it.
// A size above what fill wrote extends the file with zeros.
func writeSynced(fs vfs.FS, path string, size int64, fill func(io.Writer) error) error {
	f, err := fs.Create(path)
	if err != nil {
		return err
	}
	w := &offsetWriter{f: f}
	err = fill(w)
	if err == nil && size > w.off {
		err = f.Truncate(size)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

type offsetWriter struct {
	f   vfs.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// installStaged swaps a staged copy in (dir/incoming: the store and the
// applied position), each step a rename, so that a crash at any point
// leaves either the old state with the copy still staged, or the copy.
func installStaged(fs vfs.FS, dir string) (bool, error) {
	inc := filepath.Join(dir, incomingDir)
	if _, isDir, err := fs.Stat(inc); err != nil || !isDir {
		if err != nil && !vfs.IsNotExist(err) {
			return false, err
		}
		return false, fs.RemoveAll(filepath.Join(dir, incomingDir+".tmp"))
	}
	if _, _, err := fs.Stat(filepath.Join(inc, "store")); err == nil {
		if err := fs.RemoveAll(filepath.Join(dir, "store")); err != nil {
			return false, err
		}
		if err := fs.Rename(filepath.Join(inc, "store"), filepath.Join(dir, "store")); err != nil {
			return false, err
		}
		if err := fs.SyncDir(dir); err != nil {
			return false, err
		}
	}
	if _, _, err := fs.Stat(filepath.Join(inc, stateFile)); err == nil {
		if err := fs.Rename(filepath.Join(inc, stateFile), filepath.Join(dir, stateFile)); err != nil {
			return false, err
		}
		if err := fs.SyncDir(dir); err != nil {
			return false, err
		}
	}
	return true, fs.RemoveAll(inc)
}
