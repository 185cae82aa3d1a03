package metastore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TopicType is the message type a topic accepts.
type TopicType int

const (
	TopicNormal TopicType = iota
	TopicFIFO
	TopicDelay
	TopicTransaction
	TopicMixed
	// TopicLite is a parent of lite topics.
	TopicLite
)

func (t TopicType) String() string {
	switch t {
	case TopicNormal:
		return "NORMAL"
	case TopicFIFO:
		return "FIFO"
	case TopicDelay:
		return "DELAY"
	case TopicTransaction:
		return "TRANSACTION"
	case TopicMixed:
		return "MIXED"
	case TopicLite:
		return "LITE"
	}
	return fmt.Sprintf("TopicType(%d)", int(t))
}

// Perm is a RocketMQ-style permission bit set.
type Perm int

const (
	PermWrite     Perm = 2
	PermRead      Perm = 4
	PermReadWrite      = PermRead | PermWrite
)

// Topic is a topic's metadata.
type Topic struct {
	Name       string            `json:"name"`
	Type       TopicType         `json:"type"`
	QueueCount int32             `json:"queue_count"`
	Perm       Perm              `json:"perm"`
	Attributes map[string]string `json:"attributes,omitempty"`
	CreateTime int64             `json:"create_time"` // unix ms
}

// RetryPolicy is a group's redelivery backoff: exponential, or the
// customized list when Customized is non-empty.
type RetryPolicy struct {
	Initial    time.Duration   `json:"initial,omitempty"`
	Max        time.Duration   `json:"max,omitempty"`
	Multiplier float64         `json:"multiplier,omitempty"`
	Customized []time.Duration `json:"customized,omitempty"`
}

// Group is a consumer group's metadata.
type Group struct {
	Name                string            `json:"name"`
	RetryPolicy         RetryPolicy       `json:"retry_policy"`
	MaxDeliveryAttempts int32             `json:"max_delivery_attempts"`
	FIFO                bool              `json:"fifo"`
	Attributes          map[string]string `json:"attributes,omitempty"`
	CreateTime          int64             `json:"create_time"`
}

// OffsetKey names a committed consumer offset.
type OffsetKey struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queue_id"`
}

type offsetRec struct {
	OffsetKey
	Offset int64 `json:"offset"`
}

// Durability says whether a metadata write is on disk yet.
type Durability int

const (
	DurabilityMemory Durability = iota // persisted by the next Flush
	DurabilityLocal                    // fsynced
)

// Options configure a Store.
type Options struct {
	Logger *slog.Logger
	// FallbackToPrevious loads <file>.prev when a snapshot is corrupt
	// instead of failing Open.
	FallbackToPrevious bool
}

// Store holds metadata in memory and persists it as snapshots. It is
// safe for concurrent use.
type Store struct {
	fs     vfs.FS
	dir    string
	opts   Options
	logger *slog.Logger

	mu           sync.Mutex // state
	topics       table[Topic]
	groups       table[Group]
	offsets      map[OffsetKey]int64
	offsetsDirty bool

	wmu sync.Mutex // snapshot writers (one at a time, in version order)
}

const (
	snapMagic  = uint32('M') | uint32('Q')<<8 | uint32('G')<<16 | uint32('S')<<24
	snapHeader = 16
)

// SnapshotVersion is the snapshot format version written in every
// snapshot header, and the newest one DecodeSnapshot reads.
const SnapshotVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot frames payload.
func EncodeSnapshot(payload []byte) []byte {
	b := make([]byte, snapHeader+len(payload))
	le := binary.LittleEndian
	le.PutUint32(b[0:], snapMagic)
	le.PutUint32(b[4:], SnapshotVersion)
	le.PutUint32(b[8:], uint32(len(payload)))
	le.PutUint32(b[12:], crc32.Checksum(payload, castagnoli))
	copy(b[snapHeader:], payload)
	return b
}

// DecodeSnapshot validates a framed snapshot and returns its payload. A
// snapshot of a newer format than SnapshotVersion fails with an error
// wrapping ErrFormat (written by a newer mqgate), not ErrCorrupt.
func DecodeSnapshot(b []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(b) < snapHeader {
		return nil, fmt.Errorf("%w: snapshot of %d bytes", serr.ErrCorrupt, len(b))
	}
	if le.Uint32(b[0:]) != snapMagic || le.Uint32(b[4:]) == 0 {
		return nil, fmt.Errorf("%w: snapshot magic/version", serr.ErrCorrupt)
	}
	if v := le.Uint32(b[4:]); v > SnapshotVersion {
		return nil, fmt.Errorf("%w: snapshot has format version %d; this mqgate supports up to %d", serr.ErrFormat, v, SnapshotVersion)
	}
	n := le.Uint32(b[8:])
	if uint64(n) != uint64(len(b)-snapHeader) {
		return nil, fmt.Errorf("%w: snapshot length %d, have %d", serr.ErrCorrupt, n, len(b)-snapHeader)
	}
	p := b[snapHeader:]
	if crc32.Checksum(p, castagnoli) != le.Uint32(b[12:]) {
		return nil, fmt.Errorf("%w: snapshot checksum", serr.ErrCorrupt)
	}
	return p, nil
}

// Open loads the metadata in dir.
func Open(fs vfs.FS, dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	s := &Store{fs: fs, dir: dir, opts: opts, logger: opts.Logger,
		topics:  table[Topic]{kind: "topic", snap: "topics", m: map[string]Topic{}},
		groups:  table[Group]{kind: "group", snap: "groups", m: map[string]Group{}},
		offsets: map[OffsetKey]int64{}}
	if err := s.topics.load(s); err != nil {
		return nil, err
	}
	if err := s.groups.load(s); err != nil {
		return nil, err
	}
	var offs []offsetRec
	if err := s.load("offsets", &offs); err != nil {
		return nil, err
	}
	for _, o := range offs {
		s.offsets[o.OffsetKey] = o.Offset
	}
	return s, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name+".snap") }

// readSnap returns the payload of the named snapshot (nil if none).
func (s *Store) readSnap(name string) ([]byte, error) {
	cur := s.path(name)
	b, err := vfs.ReadFile(s.fs, cur)
	switch {
	case err == nil:
		p, derr := DecodeSnapshot(b)
		if derr == nil {
			return p, nil
		}
		if errors.Is(derr, serr.ErrFormat) {
			// Newer than this build: an older snapshot would lose what
			// the newer one holds.
			return nil, fmt.Errorf("meta: %s: %w", cur, derr)
		}
		if !s.opts.FallbackToPrevious {
			return nil, fmt.Errorf("meta: %s: %w (%s)", cur, derr, s.previousNote(cur))
		}
		s.logger.Warn("meta: corrupt snapshot, using previous", "file", cur, "err", derr)
	case vfs.IsNotExist(err):
		// Crash between the renames: the temp file was fsynced.
		if b, err := vfs.ReadFile(s.fs, cur+".tmp"); err == nil {
			if p, derr := DecodeSnapshot(b); derr == nil {
				if err := s.fs.Rename(cur+".tmp", cur); err != nil {
					return nil, err
				}
				return p, s.fs.SyncDir(s.dir)
			}
		}
	default:
		return nil, fmt.Errorf("meta: %s: %w", cur, err)
	}
	b, err = vfs.ReadFile(s.fs, cur+".prev")
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, derr := DecodeSnapshot(b)
	if derr != nil {
		return nil, fmt.Errorf("meta: %s.prev: %w", cur, derr)
	}
	return p, nil
}

// previousNote says, for an error about the corrupt snapshot cur,
// whether the snapshot before it is still on disk and under which name.
func (s *Store) previousNote(cur string) string {
	prev := cur + ".prev"
	if _, _, err := s.fs.Stat(prev); err != nil {
		return "no previous snapshot is on disk"
	}
	return "the previous snapshot is kept as " + prev
}

func (s *Store) load(name string, v any) error {
	p, err := s.readSnap(name)
	if err != nil || p == nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("meta: %s: %w: %v", s.path(name), serr.ErrCorrupt, err)
	}
	return nil
}

// writeSnap persists payload as the named snapshot (durable on return).
func (s *Store) writeSnap(name string, payload []byte) error {
	cur := s.path(name)
	tmp := cur + ".tmp"
	f, err := s.fs.Create(tmp)
	if err != nil {
		return err
	}
	b := EncodeSnapshot(payload)
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return fmt.Errorf("meta: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("meta: fsync %s: %w", tmp, err)
	}
	f.Close()
	if _, _, err := s.fs.Stat(cur); err == nil {
		if err := s.fs.Rename(cur, cur+".prev"); err != nil {
			return err
		}
	}
	if err := s.fs.Rename(tmp, cur); err != nil {
		return err
	}
	return s.fs.SyncDir(s.dir)
}

func validName(kind, n string) error {
	if n == "" || len(n) > 255 || strings.ContainsAny(n, "\x00/") {
		return fmt.Errorf("%w: %s name %q", serr.ErrInvalid, kind, n)
	}
	return nil
}

// PutTopic creates or replaces a topic; durable when it returns nil.
func (s *Store) PutTopic(t Topic) error {
	if err := validName("topic", t.Name); err != nil {
		return err
	}
	if t.QueueCount <= 0 {
		return fmt.Errorf("%w: topic %q queue count %d", serr.ErrInvalid, t.Name, t.QueueCount)
	}
	return s.topics.put(s, t)
}

// DeleteTopic removes a topic and its committed offsets; durable when it
// returns nil.
func (s *Store) DeleteTopic(name string) error {
	return s.topics.delete(s, name, func(k OffsetKey) bool { return k.Topic == name })
}

// Topic returns a topic.
func (s *Store) Topic(name string) (Topic, bool) { return s.topics.get(s, name) }

// Topics returns every topic, sorted by name.
func (s *Store) Topics() []Topic { return s.topics.list(s) }

// PutGroup creates or replaces a group; durable when it returns nil.
func (s *Store) PutGroup(g Group) error {
	if err := validName("group", g.Name); err != nil {
		return err
	}
	return s.groups.put(s, g)
}

// DeleteGroup removes a group and its offsets; durable when it returns nil.
func (s *Store) DeleteGroup(name string) error {
	return s.groups.delete(s, name, func(k OffsetKey) bool { return k.Group == name })
}

// Group returns a group.
func (s *Store) Group(name string) (Group, bool) { return s.groups.get(s, name) }

// Groups returns every group, sorted by name.
func (s *Store) Groups() []Group { return s.groups.list(s) }

// record is a named metadata value (Topic, Group).
type record[T any] interface {
	key() string
	clone() T // a copy sharing no maps or slices
}

func (t Topic) key() string { return t.Name }

func (t Topic) clone() Topic {
	t.Attributes = maps.Clone(t.Attributes)
	return t
}

func (g Group) key() string { return g.Name }

func (g Group) clone() Group {
	g.Attributes = maps.Clone(g.Attributes)
	g.RetryPolicy.Customized = slices.Clone(g.RetryPolicy.Customized)
	return g
}

// table is one kind of named metadata, kept whole in one snapshot file.
// Its map is guarded by Store.mu; writers hold Store.wmu.
type table[T record[T]] struct {
	kind string // in errors: "topic", "group"
	snap string // snapshot name
	m    map[string]T
}

func (t *table[T]) load(s *Store) error {
	var vs []T
	if err := s.load(t.snap, &vs); err != nil {
		return err
	}
	for _, v := range vs {
		t.m[v.key()] = v
	}
	return nil
}

// put creates or replaces v: the table with v is persisted first, and
// only once that is durable does v become visible (a failed write leaves
// memory as it was, so nothing is accepted on the strength of metadata a
// restart would not know).
func (t *table[T]) put(s *Store, v T) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	v = v.clone()
	if err := t.persist(s, v.key(), &v); err != nil {
		return err
	}
	s.mu.Lock()
	t.m[v.key()] = v
	s.mu.Unlock()
	return nil
}

// delete removes name and the committed offsets owned says belong to it.
// The table without name is persisted first and name disappears from
// memory only once that is durable; the offsets are persisted after.
func (t *table[T]) delete(s *Store, name string, owned func(OffsetKey) bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	_, ok := t.m[name]
	s.mu.Unlock()
	if ok {
		if err := t.persist(s, name, nil); err != nil {
			return err
		}
	}
	s.mu.Lock()
	delete(t.m, name)
	for k := range s.offsets {
		if owned(k) {
			delete(s.offsets, k)
			s.offsetsDirty = true
		}
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s %q", serr.ErrNotFound, t.kind, name)
	}
	return s.flushOffsets()
}

func (t *table[T]) get(s *Store, name string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := t.m[name]
	return v.clone(), ok
}

// list returns copies of every value, sorted by name.
func (t *table[T]) list(s *Store) []T {
	s.mu.Lock()
	out := make([]T, 0, len(t.m))
	for _, v := range t.m {
		out = append(out, v.clone())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// persist writes the table's snapshot as it will be once key is set to
// *v (removed when v is nil); memory is not changed.
// s.wmu must be held.
func (t *table[T]) persist(s *Store, key string, v *T) error {
	s.mu.Lock()
	vs := make([]T, 0, len(t.m)+1)
	for k, x := range t.m {
		if k != key {
			vs = append(vs, x)
		}
	}
	s.mu.Unlock()
	if v != nil {
		vs = append(vs, *v)
	}
	slices.SortFunc(vs, func(a, b T) int { return strings.Compare(a.key(), b.key()) })
	b, err := json.Marshal(vs)
	if err != nil {
		return fmt.Errorf("meta: encoding %s snapshot: %w", t.kind, err)
	}
	return s.writeSnap(t.snap, b)
}

// CommitOffset records a consumer offset in memory; it is persisted by
// the next Flush (DurabilityMemory until then).
func (s *Store) CommitOffset(k OffsetKey, offset int64) Durability {
	s.mu.Lock()
	s.offsets[k] = offset
	s.offsetsDirty = true
	s.mu.Unlock()
	return DurabilityMemory
}

// Offset returns a committed offset.
func (s *Store) Offset(k OffsetKey) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.offsets[k]
	return v, ok
}

// Offsets returns every committed offset of group (all groups if "").
func (s *Store) Offsets(group string) map[OffsetKey]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[OffsetKey]int64{}
	for k, v := range s.offsets {
		if group == "" || k.Group == group {
			out[k] = v
		}
	}
	return out
}

func (s *Store) flushOffsets() error {
	s.mu.Lock()
	if !s.offsetsDirty {
		s.mu.Unlock()
		return nil
	}
	recs := make([]offsetRec, 0, len(s.offsets))
	for k, v := range s.offsets {
		recs = append(recs, offsetRec{k, v})
	}
	s.offsetsDirty = false
	s.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.QueueID < b.QueueID
	})
	b, _ := json.Marshal(recs)
	if err := s.writeSnap("offsets", b); err != nil {
		s.mu.Lock()
		s.offsetsDirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// Flush persists committed offsets changed since the last Flush; when it
// returns nil every CommitOffset before the call is durable.
func (s *Store) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.flushOffsets()
}

func blobName(name string) (string, error) {
	if err := validName("blob", name); err != nil {
		return "", err
	}
	return "blob-" + name, nil
}

// SaveBlob persists a named blob of broker state; durable when it
// returns nil.
func (s *Store) SaveBlob(name string, data []byte) error {
	n, err := blobName(name)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeSnap(n, data)
}

// LoadBlob returns a named blob; ok is false if it was never saved.
func (s *Store) LoadBlob(name string) (data []byte, ok bool, err error) {
	n, err := blobName(name)
	if err != nil {
		return nil, false, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	p, err := s.readSnap(n)
	if err != nil {
		return nil, false, err
	}
	if p == nil {
		// Distinguish an empty saved blob from none.
		_, _, serrStat := s.fs.Stat(s.path(n))
		return nil, serrStat == nil, nil
	}
	return p, true, nil
}

// Close persists pending offsets.
func (s *Store) Close() error { return s.Flush() }
