package consumequeue

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mqgate/mqgate/storage/vfs"
)

// Set is every consume queue of a store.
type Set struct {
	fs      vfs.FS
	root    string
	perFile int64
	logger  *slog.Logger

	mu     sync.RWMutex
	topics map[string]map[int32]*Queue

	dmu       sync.Mutex
	dirty     map[*cqFile]struct{}
	dirtyDirs map[string]struct{}
}

// Options configure a Set.
type Options struct {
	FS             vfs.FS
	Dir            string
	EntriesPerFile int64
	Logger         *slog.Logger
	// TruncateAt drops every entry pointing at or past this log position
	// (the checkpointed dispatch position, or the recovered log end).
	TruncateAt int64
}

// Open loads every queue under opts.Dir, dropping entries at or past
// opts.TruncateAt and torn entries.
func Open(opts Options) (*Set, error) {
	if opts.EntriesPerFile <= 0 {
		opts.EntriesPerFile = 300_000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{fs: opts.FS, root: opts.Dir, perFile: opts.EntriesPerFile, logger: opts.Logger,
		topics: map[string]map[int32]*Queue{}, dirty: map[*cqFile]struct{}{}, dirtyDirs: map[string]struct{}{}}
	if err := s.fs.MkdirAll(s.root); err != nil {
		return nil, err
	}
	tnames, err := s.fs.List(s.root)
	if err != nil {
		return nil, err
	}
	for _, tn := range tnames {
		topic, err := Unescape(tn)
		if err != nil {
			s.logger.Warn("consumequeue: skipping unknown directory", "name", tn)
			continue
		}
		qnames, err := s.fs.List(filepath.Join(s.root, tn))
		if err != nil {
			return nil, err
		}
		for _, qn := range qnames {
			// Only the names newQueue makes: "01" or "+1" would load as
			// queue 1 from a directory the queue does not use, "-1" as a
			// queue that cannot exist.
			id, err := strconv.ParseInt(qn, 10, 32)
			if err != nil || id < 0 || strconv.Itoa(int(id)) != qn {
				s.logger.Warn("consumequeue: skipping unknown directory", "name", filepath.Join(tn, qn))
				continue
			}
			q, err := s.load(topic, int32(id), opts.TruncateAt)
			if err != nil {
				s.Close()
				return nil, err
			}
			if s.topics[topic] == nil {
				s.topics[topic] = map[int32]*Queue{}
			}
			s.topics[topic][int32(id)] = q
		}
	}
	return s, nil
}

func (s *Set) newQueue(topic string, id int32) *Queue {
	return &Queue{set: s, Topic: topic, ID: id, dir: filepath.Join(s.root, Escape(topic), strconv.Itoa(int(id)))}
}

func (s *Set) load(topic string, id int32, truncateAt int64) (*Queue, error) {
	q := s.newQueue(topic, id)
	names, err := s.fs.List(q.dir)
	if err != nil {
		return nil, err
	}
	var sizes []int64
	for _, n := range names {
		if !strings.HasSuffix(n, ".cq") {
			continue
		}
		// Only the names the queue writes (fileName): another spelling
		// of a base ("+0.cq") would be taken for a second file at it, and
		// the gap check below could then drop the real ones.
		base, err := strconv.ParseInt(strings.TrimSuffix(n, ".cq"), 10, 64)
		if err != nil || base < 0 || base%s.perFile != 0 || fileName(base) != n {
			continue
		}
		p := filepath.Join(q.dir, n)
		f, err := s.fs.OpenRW(p)
		if err != nil {
			return nil, err
		}
		sz, err := f.Size()
		if err != nil {
			f.Close()
			return nil, err
		}
		q.files = append(q.files, &cqFile{base: base, path: p, f: f})
		sizes = append(sizes, sz)
	}
	sort.Sort(byBase{q.files, sizes})
	full := s.perFile * EntrySize
	// A non-last file must be full and followed by the next base; cut
	// the queue at the first break.
	for i := 0; i+1 < len(q.files); i++ {
		if sizes[i] != full || q.files[i+1].base != q.files[i].base+s.perFile {
			if err := s.dropFiles(q, i+1); err != nil {
				return nil, err
			}
			sizes = sizes[:i+1]
			break
		}
	}
	// Drop the invalid tail: partial entries, holes, entries past truncateAt.
	var b [EntrySize]byte
	for len(q.files) > 0 {
		last := q.files[len(q.files)-1]
		n := sizes[len(sizes)-1] / EntrySize
		for n > 0 {
			if _, err := last.f.ReadAt(b[:], (n-1)*EntrySize); err != nil {
				return nil, err
			}
			e := getEntry(b[:])
			if e.Size > 0 && e.PhysOffset < truncateAt {
				break
			}
			n--
		}
		if n*EntrySize != sizes[len(sizes)-1] {
			if err := last.f.Truncate(n * EntrySize); err != nil {
				return nil, err
			}
			s.markDirty(last)
		}
		if n > 0 || len(q.files) == 1 {
			q.next.Store(last.base + n)
			break
		}
		if err := s.dropFiles(q, len(q.files)-1); err != nil {
			return nil, err
		}
		sizes = sizes[:len(sizes)-1]
	}
	if len(q.files) == 0 {
		q.written = q.next.Load()
		return q, nil
	}
	// Min: skip leading holes of the first file.
	first := q.files[0]
	m := first.base
	for m < q.next.Load() {
		if _, err := first.f.ReadAt(b[:], (m-first.base)*EntrySize); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(b[8:]) != 0 {
			break
		}
		m++
	}
	q.min.Store(m)
	q.written = q.next.Load()
	return q, nil
}

type byBase struct {
	f []*cqFile
	s []int64
}

func (b byBase) Len() int           { return len(b.f) }
func (b byBase) Less(i, j int) bool { return b.f[i].base < b.f[j].base }
func (b byBase) Swap(i, j int) {
	b.f[i], b.f[j] = b.f[j], b.f[i]
	b.s[i], b.s[j] = b.s[j], b.s[i]
}

func (s *Set) dropFiles(q *Queue, from int) error {
	for _, f := range q.files[from:] {
		f.retire()
		if err := s.fs.Remove(f.path); err != nil {
			return err
		}
	}
	q.files = q.files[:from]
	return s.fs.SyncDir(q.dir)
}

// Get returns the queue, or nil.
func (s *Set) Get(topic string, id int32) *Queue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topics[topic][id]
}

// Ensure returns the queue, creating its directory if needed.
func (s *Set) Ensure(topic string, id int32) (*Queue, error) {
	if q := s.Get(topic, id); q != nil {
		return q, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.topics[topic][id]; q != nil {
		return q, nil
	}
	q := s.newQueue(topic, id)
	if err := s.fs.MkdirAll(q.dir); err != nil {
		return nil, fmt.Errorf("consumequeue: %w", err)
	}
	s.markDirtyDir(filepath.Dir(q.dir))
	s.markDirtyDir(s.root)
	if s.topics[topic] == nil {
		s.topics[topic] = map[int32]*Queue{}
	}
	s.topics[topic][id] = q
	return q, nil
}

// QueueIDs lists the queue ids of topic that exist in the store.
func (s *Set) QueueIDs(topic string) []int32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []int32
	for id := range s.topics[topic] {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Topics lists every topic with at least one queue.
func (s *Set) Topics() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.topics))
	for t := range s.topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// All calls fn for every queue.
func (s *Set) All(fn func(q *Queue)) {
	s.mu.RLock()
	qs := make([]*Queue, 0, len(s.topics))
	for _, m := range s.topics {
		for _, q := range m {
			qs = append(qs, q)
		}
	}
	s.mu.RUnlock()
	for _, q := range qs {
		fn(q)
	}
}

// DeleteTopic removes every queue of topic and its files.
func (s *Set) DeleteTopic(topic string) error {
	s.mu.Lock()
	qs := s.topics[topic]
	delete(s.topics, topic)
	s.mu.Unlock()
	for _, q := range qs {
		_ = q.close(false) // dropping the tail: nothing is written
	}
	dir := filepath.Join(s.root, Escape(topic))
	if err := s.fs.RemoveAll(dir); err != nil {
		return err
	}
	return s.fs.SyncDir(s.root)
}

func (s *Set) markDirty(f *cqFile) {
	s.dmu.Lock()
	s.dirty[f] = struct{}{}
	s.dmu.Unlock()
}

func (s *Set) markDirtyDir(d string) {
	s.dmu.Lock()
	s.dirtyDirs[d] = struct{}{}
	s.dmu.Unlock()
}

// Sync fsyncs every file and directory changed since the last Sync.
// Entries appended before Sync is called are durable when it returns nil.
func (s *Set) Sync() error {
	var firstErr error
	// Tails first: their write-outs mark the files they touch dirty.
	s.All(func(q *Queue) {
		if err := q.WriteOut(); err != nil && firstErr == nil {
			firstErr = err
		}
	})
	s.dmu.Lock()
	files, dirs := s.dirty, s.dirtyDirs
	s.dirty, s.dirtyDirs = map[*cqFile]struct{}{}, map[string]struct{}{}
	s.dmu.Unlock()
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	for f := range files {
		if live, err := f.sync(); err != nil && live {
			fail(fmt.Errorf("consumequeue: sync %s: %w", f.path, err))
			s.markDirty(f)
		}
	}
	// Deepest directories first, so a new queue dir's entry in its topic
	// dir is synced after the queue dir itself.
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return len(ds[i]) > len(ds[j]) })
	for _, d := range ds {
		if err := s.fs.SyncDir(d); err != nil && !vfs.IsNotExist(err) {
			fail(fmt.Errorf("consumequeue: sync dir %s: %w", d, err))
			s.markDirtyDir(d)
		}
	}
	return firstErr
}

// Close writes out the queues' tails (not fsynced: a store closes after
// a checkpoint's Sync) and closes every file.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.topics {
		for _, q := range m {
			if err := q.close(true); err != nil {
				s.logger.Warn("consumequeue: close", "topic", q.Topic, "queue", q.ID, "err", err)
			}
		}
	}
	s.topics = map[string]map[int32]*Queue{}
}
