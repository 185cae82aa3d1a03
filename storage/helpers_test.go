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

func mustOpen(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("open: %v", err)
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

// waitAll waits until the log's Written end is dispatched. With a staging
// ring (the OS file system) answered appends may not be written out yet:
// wait for an append's End instead (feedWorkload).
func waitAll(t testing.TB, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, w := s.LogRange()
	if err := s.WaitDispatched(ctx, w); err != nil {
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
