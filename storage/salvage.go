package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A salvage is a repair that keeps what a cut would drop: the log is cut
// at its damage as Repair does (the cut-off bytes saved under
// repair-saved/), then the valid records found in the saved bytes are
// appended again, in their original order, with new physical and queue
// offsets and everything else they carried (topic, queue id, flags, born
// time and host, properties, body). Each copy carries
// message.PropSalvaged, naming the position and CRC of the record it
// copies; records of topics Options.SalvageTopic excludes (the broker's
// bookkeeping, whose references to positions and offsets would not hold)
// and control records other than topic deletions are left out.
//
// Crash safety, by step:
//
//  1. The save directory gets its SALVAGE mark (fsynced) before the cut
//     moves anything into it. A crash during the cut leaves the log
//     damaged (Cut truncates last) and the marked directory: the next
//     salvage cuts again into a new directory with the same cut position,
//     and salvages both as one.
//  2. Before appending, the plan (the consumer offsets to move, see
//     below) is written to repair-saved/salvage-<position>.plan, once.
//  3. Appends skip every record whose copy the log already holds (its
//     PropSalvaged mark, looked for from the cut position on), so a
//     salvage interrupted while appending and run again copies nothing
//     twice. The store opens meanwhile; it lacks what was not appended.
//  4. Once the copies are fsynced, the plan's offset moves are applied
//     (each only if the offset still is what the plan found) and the
//     metadata flushed; then the directories' marks become SALVAGE.done
//     and the plan is removed.
//
// Consumer offsets: copies get dense queue offsets from the queue's end
// at the cut, so a queue's copies sit below their old offsets by the
// records of that queue lost in the damage. A committed offset past the
// queue's end at the cut is moved to the copy of the first record it had
// not consumed, so no consumer skips a salvaged record. Topics with a
// deletion among the salvaged records keep their offsets.
const (
	salvageMark = "SALVAGE"
	salvageDone = "SALVAGE.done"
)

// SalvageReport says what a salvage did with one cut position's saved
// records.
type SalvageReport struct {
	From int64    // the log position the log was cut at
	Dirs []string // the save directories holding the cut-off bytes
	// Records are the valid records found in them; Appended were copied
	// into the log by this run, Already by an earlier one that was
	// interrupted, Skipped left out (SalvageTopic, control records).
	Records, Appended, Already, Skipped int
	// First and Last are the original log positions of the first and last
	// record copied (-1 if none).
	First, Last int64
	// Offsets is how many committed consumer offsets were moved.
	Offsets int
}

// PendingSalvage is a salvage a crash interrupted (VerifyReport).
type PendingSalvage struct {
	From    int64
	Dirs    []string
	Records int // the records it copies
	Done    int // of them, already in the log
}

// salvageRecord is what a salvage needs to know of a saved record
// before copying it.
type salvageRecord struct {
	id          string // PropSalvaged value: "<position>-<crc>"
	pos         int64
	topic       string
	queue       int32
	queueOffset int64
	deletion    bool // a topic deletion (control record)
	keep        bool // copied (false: skipped)
}

func salvageID(pos int64, crc uint32) string {
	return strconv.FormatInt(pos, 10) + "-" + strconv.FormatUint(uint64(crc), 16)
}

// classify says whether a salvage copies the record b and what it is.
func classify(b []byte, opts Options) (salvageRecord, error) {
	v, err := message.ParseView(b)
	if err != nil {
		return salvageRecord{}, err
	}
	r := salvageRecord{id: salvageID(v.PhysOffset, v.CRC), pos: v.PhysOffset, topic: string(v.Topic), queue: v.QueueID, queueOffset: v.QueueOffset}
	switch {
	case v.Flags&message.FlagControl != 0:
		r.deletion = string(v.Prop(ctrlProp)) == ctrlDeleteTopic
		r.keep = r.deletion
	default:
		r.keep = opts.SalvageTopic == nil || opts.SalvageTopic(r.topic)
	}
	return r, nil
}

// salvageGroup is the save directories of one cut position.
type salvageGroup struct {
	from int64
	dirs []string
}

// pendingSalvages lists the marked save directories under dir, grouped
// by the position they were cut at, in position order.
func pendingSalvages(fs vfs.FS, dir string) ([]salvageGroup, error) {
	root := filepath.Join(dir, repairSavedDir)
	names, err := fs.List(root)
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byFrom := map[int64][]string{}
	for _, n := range names {
		d := filepath.Join(root, n)
		if _, isDir, err := fs.Stat(d); err != nil || !isDir {
			continue // a plan file
		}
		b, err := vfs.ReadFile(fs, filepath.Join(d, salvageMark))
		if vfs.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		from, err := parseSalvageMark(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(d, salvageMark), err)
		}
		byFrom[from] = append(byFrom[from], d)
	}
	var out []salvageGroup
	for from, ds := range byFrom {
		sort.Strings(ds)
		out = append(out, salvageGroup{from: from, dirs: ds})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out, nil
}

const salvageMarkPrefix = "mqgate-salvage 1 from "

func parseSalvageMark(b []byte) (int64, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), salvageMarkPrefix)
	from, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || from < 0 {
		return 0, fmt.Errorf("not a salvage mark: %.60q", b)
	}
	return from, nil
}

// writeSynced writes a new file at path with b and fsyncs it and its
// directory.
func writeSynced(fs vfs.FS, path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(path))
}

// markSalvage creates the save directory save for a cut at from and
// marks it, durably, before anything is moved into it.
func markSalvage(fs vfs.FS, dir, save string, from int64) error {
	if err := fs.MkdirAll(save); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(save), dir} {
		if err := fs.SyncDir(d); err != nil {
			return err
		}
	}
	return writeSynced(fs, filepath.Join(save, salvageMark), []byte(salvageMarkPrefix+strconv.FormatInt(from, 10)+"\n"))
}

// scanGroup reads a group's saved records (what a salvage copies, in log
// order, each once: a cut interrupted and done again saves some bytes
// twice) and the copies the store's log already holds from the cut
// position on. The store must not be open.
func scanGroup(fs vfs.FS, dir string, g salvageGroup, opts Options) (recs []salvageRecord, done map[string]bool, err error) {
	rd, err := commitlog.OpenSaved(fs, g.dirs...)
	if err != nil {
		return nil, nil, err
	}
	defer rd.Close()
	seen := map[string]bool{}
	err = rd.Walk(g.from, opts.MaxRecordSize, func(_ int64, b []byte) error {
		r, err := classify(b, opts)
		if err != nil || seen[r.id] {
			return err
		}
		seen[r.id] = true
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].pos < recs[j].pos })
	done, err = salvagedIn(fs, dir, g.from, opts)
	return recs, done, err
}

// salvagedIn returns the PropSalvaged marks of the log of the store in
// dir from log position from on.
func salvagedIn(fs vfs.FS, dir string, from int64, opts Options) (map[string]bool, error) {
	live, err := commitlog.OpenReader(fs, filepath.Join(dir, "commitlog"))
	if err != nil {
		return nil, err
	}
	defer live.Close()
	done := map[string]bool{}
	err = live.Walk(from, opts.MaxRecordSize, func(_ int64, b []byte) error {
		v, err := message.ParseView(b)
		if err != nil {
			return err
		}
		if id := v.Prop(message.PropSalvaged); id != nil {
			done[string(id)] = true
		}
		return nil
	})
	return done, err
}

// Salvage repairs dir as Repair does and appends again the valid records
// the cut saved (see the comment at the top of this file); it also
// finishes a salvage a crash interrupted. Options.SalvageTopic chooses
// the topics whose records are copied. The store must not be open.
func Salvage(ctx context.Context, dir string, opts Options) (*RepairReport, error) {
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
	fail := func(err error) (*RepairReport, error) {
		lk.Close()
		return rep, fmt.Errorf("storage: salvage %s: %w", dir, err)
	}
	save := ""
	if found.Damaged() && found.needsCut() {
		save = newSaveDir(dir, found.ValidEnd)
		if err := markSalvage(fs, dir, save, found.ValidEnd); err != nil {
			return fail(err)
		}
	}
	if err := repairLocked(fs, dir, found, rep, save); err != nil {
		return fail(err)
	}
	groups, err := pendingSalvages(fs, dir)
	if err != nil {
		return fail(err)
	}
	type scanned struct {
		g    salvageGroup
		recs []salvageRecord
		done map[string]bool
	}
	var work []scanned
	for _, g := range groups {
		recs, done, err := scanGroup(fs, dir, g, opts)
		if err != nil {
			return fail(err)
		}
		work = append(work, scanned{g, recs, done})
	}
	lk.Close()
	s, err := Open(dir, opts)
	if err != nil {
		return rep, fmt.Errorf("storage: open after repair: %w", err)
	}
	for _, w := range work {
		sr, err := s.salvage(ctx, w.g, w.recs, w.done)
		if sr != nil {
			rep.Salvaged = append(rep.Salvaged, *sr)
			rep.Actions = append(rep.Actions, sr.String())
		}
		if err != nil {
			_ = s.Close(ctx)
			return rep, fmt.Errorf("storage: salvage %s: %w", dir, err)
		}
	}
	rep.After = s.Recovery()
	_, rep.End = s.LogRange()
	if err := s.Close(ctx); err != nil {
		return rep, fmt.Errorf("storage: close after salvage: %w", err)
	}
	return rep, nil
}

func (r SalvageReport) String() string {
	msg := fmt.Sprintf("salvaged the records cut off at log position %d (%s): %d valid records found, %d appended again",
		r.From, strings.Join(r.Dirs, ", "), r.Records, r.Appended)
	if r.Already > 0 {
		msg += fmt.Sprintf(", %d already appended by an interrupted salvage", r.Already)
	}
	if r.First >= 0 {
		msg += fmt.Sprintf(" (originally at log positions %d to %d)", r.First, r.Last)
	}
	if r.Skipped > 0 {
		msg += fmt.Sprintf(", %d left out (records of topics a salvage does not copy, control records)", r.Skipped)
	}
	if r.Offsets > 0 {
		msg += fmt.Sprintf("; %d committed consumer offsets moved to the new queue offsets", r.Offsets)
	}
	return msg
}

// offsetMove is one committed offset a salvage moves.
type offsetMove struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	Queue    int32  `json:"queue"`
	From, To int64
}

// decodePlan reads a plan file: the offset moves, each of a named queue
// between non-negative offsets.
func decodePlan(b []byte) ([]offsetMove, error) {
	var moves []offsetMove
	if err := json.Unmarshal(b, &moves); err != nil {
		return nil, err
	}
	for _, m := range moves {
		if m.Group == "" || m.Topic == "" || m.Queue < 0 || m.From < 0 || m.To < 0 {
			return nil, fmt.Errorf("not an offset move: %+v", m)
		}
	}
	return moves, nil
}

func planPath(dir string, from int64) string {
	return filepath.Join(dir, repairSavedDir, "salvage-"+strconv.FormatInt(from, 10)+".plan")
}

// salvagePlan returns the offset moves of a group's salvage: read from
// its plan file, or computed now (before anything is appended) and
// written there.
func (s *Store) salvagePlan(g salvageGroup, recs []salvageRecord, done map[string]bool) ([]offsetMove, error) {
	path := planPath(s.dir, g.from)
	if b, err := vfs.ReadFile(s.fs, path); err == nil {
		moves, err := decodePlan(b)
		if err != nil {
			return nil, fmt.Errorf("salvage plan %s: %w", path, err)
		}
		return moves, nil
	} else if !vfs.IsNotExist(err) {
		return nil, err
	}
	if len(done) > 0 {
		// Copies without a plan: not written by this code; move nothing.
		return nil, nil
	}
	type qk struct {
		topic string
		queue int32
	}
	olds := map[qk][]int64{}
	deleted := map[string]bool{}
	for _, r := range recs {
		switch {
		case r.deletion:
			deleted[r.topic] = true
		case r.keep:
			k := qk{r.topic, r.queue}
			olds[k] = append(olds[k], r.queueOffset)
		}
	}
	moves := []offsetMove{}
	for k, off := range s.meta.Offsets("") {
		q := qk{k.Topic, k.QueueID}
		if deleted[k.Topic] {
			continue
		}
		_, end := s.QueueRange(k.Topic, k.QueueID)
		if off <= end {
			continue
		}
		below := 0
		for _, o := range olds[q] {
			if o < off {
				below++
			}
		}
		if to := end + int64(below); to != off {
			moves = append(moves, offsetMove{Group: k.Group, Topic: k.Topic, Queue: k.QueueID, From: off, To: to})
		}
	}
	sort.Slice(moves, func(i, j int) bool {
		a, b := moves[i], moves[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Queue < b.Queue
	})
	b, err := json.Marshal(moves)
	if err != nil {
		return nil, err
	}
	if err := writeSynced(s.fs, path, b); err != nil {
		return nil, fmt.Errorf("salvage plan %s: %w", path, err)
	}
	return moves, nil
}

// salvage appends a group's saved records the log does not hold yet
// (recs and done from scanGroup), then moves the planned offsets and
// marks the group done.
func (s *Store) salvage(ctx context.Context, g salvageGroup, recs []salvageRecord, done map[string]bool) (*SalvageReport, error) {
	sr := &SalvageReport{From: g.from, Dirs: g.dirs, Records: len(recs), First: -1, Last: -1}
	moves, err := s.salvagePlan(g, recs, done)
	if err != nil {
		return sr, err
	}
	want := map[string]bool{}
	for _, r := range recs {
		switch {
		case !r.keep:
			sr.Skipped++
		case done[r.id]:
			sr.Already++
		default:
			want[r.id] = true
		}
		if r.keep {
			if sr.First < 0 {
				sr.First = r.pos
			}
			sr.Last = r.pos
		}
	}
	if len(want) > 0 {
		if err := s.appendSalvaged(ctx, g, want, sr); err != nil {
			return sr, err
		}
	}
	if err := s.Sync(); err != nil {
		return sr, err
	}
	if _, w := s.LogRange(); true {
		if err := s.WaitDispatched(ctx, w); err != nil {
			return sr, err
		}
	}
	for _, m := range moves {
		k := metastore.OffsetKey{Group: m.Group, Topic: m.Topic, QueueID: m.Queue}
		if cur, ok := s.meta.Offset(k); ok && cur == m.From {
			s.meta.CommitOffset(k, m.To)
			sr.Offsets++
		}
	}
	if err := s.meta.Flush(); err != nil {
		return sr, err
	}
	for _, d := range g.dirs {
		if err := s.fs.Rename(filepath.Join(d, salvageMark), filepath.Join(d, salvageDone)); err != nil && !vfs.IsNotExist(err) {
			return sr, err
		}
		if err := s.fs.SyncDir(d); err != nil {
			return sr, err
		}
	}
	if err := s.fs.Remove(planPath(s.dir, g.from)); err != nil && !vfs.IsNotExist(err) {
		return sr, err
	}
	return sr, s.fs.SyncDir(filepath.Join(s.dir, repairSavedDir))
}

// salvageBatch bounds one append of copies.
const salvageBatch = 256

// appendSalvaged walks the group's saved records again and appends those
// in want, in log order, in batches; a topic deletion is appended alone.
// The saved files are walked in order of their first position, and those
// of one cut done twice start at the same position, so the walk meets
// the records in log order; a record met twice is appended once.
func (s *Store) appendSalvaged(ctx context.Context, g salvageGroup, want map[string]bool, sr *SalvageReport) error {
	rd, err := commitlog.OpenSaved(s.fs, g.dirs...)
	if err != nil {
		return err
	}
	defer rd.Close()
	var batch []*message.Message
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := s.Append(ctx, batch...); err != nil {
			return err
		}
		sr.Appended += len(batch)
		clear(batch)
		batch = batch[:0]
		return nil
	}
	err = rd.Walk(g.from, s.opts.MaxRecordSize, func(pos int64, b []byte) error {
		h, _ := message.ParseHeader(b)
		id := salvageID(pos, h.CRC)
		if !want[id] {
			return nil
		}
		delete(want, id)
		// b is the walk's buffer, and a decoded message aliases its bytes.
		m, err := message.Decode(bytes.Clone(b), s.opts.MaxRecordSize)
		if err != nil {
			return err
		}
		m.Set(message.PropSalvaged, id)
		m.StoreTime, m.StoreHost, m.QueueOffset, m.PhysOffset, m.Size = 0, "", 0, 0, 0
		if m.Flags&message.FlagControl != 0 {
			if err := flush(); err != nil {
				return err
			}
			res, err := s.append(ctx, []*message.Message{m}, true, 0, nil)
			if err != nil {
				return err
			}
			sr.Appended++
			return s.WaitDispatched(ctx, res.End)
		}
		batch = append(batch, m)
		if len(batch) == salvageBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// newSaveDir names the directory a cut at pos saves into.
func newSaveDir(dir string, pos int64) string {
	return filepath.Join(dir, repairSavedDir, time.Now().UTC().Format("20060102T150405.000000000Z")+"-"+strconv.FormatInt(pos, 10))
}

// salvageView fills in what Verify reports about salvages: what one would
// copy from the log past the damage, and the salvages a crash
// interrupted.
func salvageView(fs vfs.FS, dir string, rd *commitlog.Reader, r *VerifyReport, opts Options) error {
	r.SalvageFirst, r.SalvageLast = -1, -1
	cut := false // what a repair cuts: the log's first invalid stretch is damage
	for _, p := range r.Problems {
		if p.Part == "commitlog" && p.Pos == r.ValidEnd && p.Damage {
			cut = true
		}
	}
	if cut {
		err := rd.Walk(r.ValidEnd, opts.MaxRecordSize, func(_ int64, b []byte) error {
			sr, err := classify(b, opts)
			if err != nil {
				return err
			}
			if !sr.keep {
				r.SalvageSkipped++
				return nil
			}
			r.Salvageable++
			if r.SalvageFirst < 0 {
				r.SalvageFirst = sr.pos
			}
			r.SalvageLast = sr.pos
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: commit log: %w", err)
		}
	}
	groups, err := pendingSalvages(fs, dir)
	if err != nil {
		return fmt.Errorf("storage: salvage: %w", err)
	}
	for _, g := range groups {
		recs, done, err := scanGroup(fs, dir, g, opts)
		if err != nil {
			return fmt.Errorf("storage: salvage: %w", err)
		}
		p := PendingSalvage{From: g.from, Dirs: g.dirs}
		for _, rec := range recs {
			if rec.keep {
				p.Records++
				if done[rec.id] {
					p.Done++
				}
			}
		}
		r.PendingSalvages = append(r.PendingSalvages, p)
		r.Problems = append(r.Problems, Problem{Part: "salvage", File: strings.Join(g.dirs, ", "), Pos: g.from,
			What:   fmt.Sprintf("a salvage of the records cut off at log position %d did not finish: %d of %d records appended again", g.from, p.Done, p.Records),
			Repair: fmt.Sprintf("with --salvage: append the other %d, and move the consumer offsets it planned", p.Records-p.Done)})
	}
	return nil
}
