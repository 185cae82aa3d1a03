package storage

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// testOpts are small-file options on the given FS; background work is
// effectively manual (tests call checkpoint/RunRetention themselves).
func testOpts(fs vfs.FS) Options {
	return Options{
		FS: fs, SegmentSize: 16 << 10, MaxBodySize: 8 << 10, MaxRecordSize: 10 << 10,
		CheckpointInterval: time.Hour, RetentionInterval: time.Hour, MetaFlushInterval: time.Hour,
		RetentionTime: -1, DiskUsagePercent: -1,
		CQEntriesPerFile: 64, IndexSlots: 64, IndexCapacity: 256,
		FlushInterval: 5 * time.Millisecond,
	}
}

// storeMode is a way the store writes its log: a flush mode and, in async
// mode, whether appends go through a staging ring.
type storeMode struct {
	name string
	mode FlushMode
	ring bool
}

// storeModes are every write path the store has. forEachMode runs a test
// over all of them.
var storeModes = []storeMode{
	{"sync", FlushSync, false},
	{"async", FlushAsync, false},
	{"async-ring", FlushAsync, true},
}

// stagingDir is where the staging ring lives on a test's in-memory FS.
const stagingDir = "/shm"

// apply sets m's options on o. With a ring, the staging directory is made
// on o.FS (which must then be able to hold shared memory, as MemFS can);
// without one, StagingDir is "off".
func (m storeMode) apply(t testing.TB, o Options) Options {
	t.Helper()
	o.FlushMode = m.mode
	o.StagingDir = "off"
	if m.ring {
		if err := o.FS.MkdirAll(stagingDir); err != nil {
			t.Fatal(err)
		}
		o.StagingDir = stagingDir
	}
	return o
}

// forEachMode runs f once per store mode, as a subtest named after it,
// with testOpts on a fresh in-memory FS set up for that mode
// (storeMode.apply). The FS is o.FS.(*vfs.MemFS).
func forEachMode(t *testing.T, f func(t *testing.T, o Options)) {
	t.Helper()
	for _, m := range storeModes {
		t.Run(m.name, func(t *testing.T) { f(t, m.apply(t, testOpts(vfs.NewMem()))) })
	}
}

// checkRing fails unless the store writes through a staging ring exactly
// when o asks for one: a mode that silently fell back would test the
// wrong path.
func checkRing(t testing.TB, s *Store, o Options) {
	t.Helper()
	want := o.StagingDir != "off" && o.StagingDir != "" && o.FlushMode == FlushAsync
	if got := s.log.Staging(); got != want {
		t.Fatalf("staging ring in use: %v, want %v (options %+v)", got, want, o)
	}
}

func mustOpen(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if o.StagingDir != "" {
		checkRing(t, s, o)
	}
	return s
}

func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func msg(topic string, q int32, i int) *message.Message {
	m := &message.Message{Topic: topic, QueueID: q, BornTime: 1000 + int64(i), BornHost: "h:1",
		Body: []byte(fmt.Sprintf("body-%s-%d-%d", topic, q, i))}
	m.Set(message.PropUniqKey, fmt.Sprintf("id-%s-%d-%d", topic, q, i))
	m.Set(message.PropTags, fmt.Sprintf("tag%d", i%3))
	m.Set(message.PropKeys, fmt.Sprintf("k%d common", i))
	return m
}

func appendOne(t testing.TB, s *Store, m *message.Message) AppendEntry {
	t.Helper()
	res, err := s.Append(context.Background(), m)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if len(res.Entries) != 1 {
		t.Fatalf("entries %d", len(res.Entries))
	}
	return res.Entries[0]
}

// waitAll waits until everything answered so far is dispatched (with a
// staging ring, once the flusher has written it out).
func waitAll(t testing.TB, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDispatched(ctx, s.log.Answered()); err != nil {
		t.Fatal(err)
	}
}

// readAllQueue returns every message of a queue from its min.
func readAllQueue(t testing.TB, s *Store, topic string, q int32) []*message.Message {
	t.Helper()
	lo, hi := s.QueueRange(topic, q)
	var out []*message.Message
	for off := lo; off < hi; {
		ms, next, err := s.ReadMessages(topic, q, off, 17)
		if err != nil {
			t.Fatalf("read %s/%d@%d: %v", topic, q, off, err)
		}
		out = append(out, ms...)
		off = next
	}
	return out
}

func sameMessage(a, b *message.Message) bool {
	return a.Topic == b.Topic && a.QueueID == b.QueueID && bytes.Equal(a.Body, b.Body) &&
		a.UniqKey() == b.UniqKey() && a.BornTime == b.BornTime && len(a.Properties) == len(b.Properties)
}
