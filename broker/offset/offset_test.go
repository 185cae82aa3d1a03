package offset

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/longpoll"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/internal/clock"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/metastore"
)

// fakeStore holds one queue, offsets [lo, lo+len(tags)), message i
// tagged tags[i].
type fakeStore struct {
	lo      int64
	tags    []string
	moved   bool // ReadQueue answers that retention removed the offset
	readErr error
}

func (f *fakeStore) QueueRange(string, int32) (int64, int64) { return f.lo, f.lo + int64(len(f.tags)) }

func (f *fakeStore) ReadQueue(_ string, _ int32, from int64, max int) ([]storage.QueueEntry, error) {
	if f.moved {
		return nil, storage.ErrOffsetMoved
	}
	if f.readErr != nil {
		return nil, f.readErr
	}
	var out []storage.QueueEntry
	for o := from; o < f.lo+int64(len(f.tags)) && len(out) < max; o++ {
		tag := f.tags[o-f.lo]
		out = append(out, storage.QueueEntry{QueueOffset: o, PhysOffset: o, Size: 1, TagHash: message.TagHash(tag)})
	}
	return out, nil
}

func (f *fakeStore) ReadMessage(phys int64, _ int32) (*message.Message, error) {
	return &message.Message{Topic: "orders", Body: []byte("b"), Properties: []message.Property{{Key: message.PropTags, Value: f.tags[phys-f.lo]}}}, nil
}

func (f *fakeStore) OffsetForTime(_ string, _ int32, ms int64) (int64, error) {
	return f.lo + ms%3, nil
}

type fakeOffsets struct {
	m       map[metastore.OffsetKey]int64
	flushed int
	err     error
}

func (f *fakeOffsets) CommitOffset(k metastore.OffsetKey, off int64) (metastore.Durability, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.m[k] = off
	return metastore.DurabilityMemory, nil
}
func (f *fakeOffsets) Offset(k metastore.OffsetKey) (int64, bool) { o, ok := f.m[k]; return o, ok }
func (f *fakeOffsets) Flush() error                               { f.flushed++; return nil }

var topic = model.Topic{Name: "orders", Type: model.TopicNormal, Queues: 2}

func newService(st *fakeStore) (*Service, *fakeOffsets) {
	offs := &fakeOffsets{m: map[metastore.OffsetKey]int64{}}
	return New(st, offs, longpoll.New(0), clock.NewFake(time.Unix(1767323045, 0))), offs
}

// Pulls: where an offset may start, what a filter skips, where the next
// pull starts, and what an empty answer says.
func TestPullRules(t *testing.T) {
	tagA, _ := model.ParseTagFilter("A")
	for _, c := range []struct {
		name   string
		store  fakeStore
		queue  int32
		offset int64
		max    int
		filter model.Filter
		kind   mqerr.Kind // 0: no error
		got    []int64    // offsets delivered
		next   int64
	}{
		{"a queue the topic does not have", fakeStore{lo: 10, tags: []string{"A"}}, 2, 10, 8, model.Filter{}, mqerr.KindBadRequest, nil, 0},
		{"an offset before the retained range", fakeStore{lo: 10, tags: []string{"A"}}, 0, 9, 8, model.Filter{}, mqerr.KindIllegalOffset, nil, 9},
		{"an offset past the end", fakeStore{lo: 10, tags: []string{"A"}}, 0, 12, 8, model.Filter{}, mqerr.KindIllegalOffset, nil, 12},
		{"from the start", fakeStore{lo: 10, tags: []string{"A", "B", "A"}}, 0, 10, 8, model.Filter{}, 0, []int64{10, 11, 12}, 13},
		{"at most max", fakeStore{lo: 10, tags: []string{"A", "B", "A"}}, 0, 10, 2, model.Filter{}, 0, []int64{10, 11}, 12},
		{"max 0 reads one", fakeStore{lo: 10, tags: []string{"A", "B"}}, 0, 10, 0, model.Filter{}, 0, []int64{10}, 11},
		{"a tag filter skips the others, and the next pull starts after them", fakeStore{lo: 10, tags: []string{"B", "A", "B"}}, 0, 10, 8, tagA, 0, []int64{11}, 13},
		{"nothing matches: not found, but the next pull starts past what was skipped", fakeStore{lo: 10, tags: []string{"B", "B"}}, 0, 10, 8, tagA, mqerr.KindMessageNotFound, nil, 12},
		{"nothing new at the end, no wait", fakeStore{lo: 10, tags: []string{"A"}}, 0, 11, 8, model.Filter{}, mqerr.KindMessageNotFound, nil, 11},
		{"an offset retention removed while reading", fakeStore{lo: 10, tags: []string{"A"}, moved: true}, 0, 10, 8, model.Filter{}, mqerr.KindIllegalOffset, nil, 10},
		{"a store that cannot read", fakeStore{lo: 10, tags: []string{"A"}, readErr: errors.New("EIO")}, 0, 10, 8, model.Filter{}, mqerr.KindStoreUnavailable, nil, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newService(&c.store)
			res, err := s.Pull(context.Background(), topic, c.queue, c.offset, c.max, c.filter, 0)
			if c.kind != 0 {
				if mqerr.KindOf(err) != c.kind || err == nil {
					t.Fatalf("err %v, want kind %v", err, c.kind)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, d := range res.Messages {
				got = append(got, d.QueueOffset)
				if d.Message.Topic != "orders" || d.QueueID != c.queue || d.Attempt != 1 {
					t.Fatalf("delivery %+v", d)
				}
			}
			if len(got) != len(c.got) || (len(got) > 0 && !equal(got, c.got)) || (c.kind != mqerr.KindBadRequest && res.Next != c.next) {
				t.Fatalf("delivered %v next %d, want %v next %d", got, res.Next, c.got, c.next)
			}
		})
	}
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// Committed offsets: only within the retained range; durable commits are
// flushed before they are answered.
func TestUpdateAndGetRules(t *testing.T) {
	for _, c := range []struct {
		name    string
		queue   int32
		offset  int64
		durable bool
		kind    mqerr.Kind // 0: committed
		flushed int
		dur     metastore.Durability
	}{
		{"within the range", 0, 12, false, 0, 0, metastore.DurabilityMemory},
		{"at the end (nothing left to consume)", 0, 13, false, 0, 0, metastore.DurabilityMemory},
		{"durable: flushed before the answer", 1, 11, true, 0, 1, metastore.DurabilityLocal},
		{"before the start", 0, 9, false, mqerr.KindIllegalOffset, 0, 0},
		{"past the end", 0, 14, false, mqerr.KindIllegalOffset, 0, 0},
		{"a queue the topic does not have", -1, 10, false, mqerr.KindBadRequest, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, offs := newService(&fakeStore{lo: 10, tags: []string{"A", "A", "A"}})
			d, err := s.Update(topic, "billing", c.queue, c.offset, c.durable)
			if c.kind != 0 {
				if mqerr.KindOf(err) != c.kind || err == nil {
					t.Fatalf("err %v, want %v", err, c.kind)
				}
				if len(offs.m) != 0 {
					t.Fatalf("a refused commit was recorded: %v", offs.m)
				}
				return
			}
			if err != nil || d != c.dur || offs.flushed != c.flushed {
				t.Fatalf("durability %v flushed %d err %v, want %v, %d", d, offs.flushed, err, c.dur, c.flushed)
			}
			if got, err := s.Get(topic, "billing", c.queue); err != nil || got != c.offset {
				t.Fatalf("Get: %d, %v", got, err)
			}
		})
	}
	s, offs := newService(&fakeStore{lo: 10, tags: []string{"A"}})
	if _, err := s.Get(topic, "billing", 0); mqerr.KindOf(err) != mqerr.KindOffsetNotFound {
		t.Fatalf("Get without a commit: %v", err)
	}
	offs.err = errors.New("disk")
	if _, err := s.Update(topic, "billing", 0, 10, false); mqerr.KindOf(err) != mqerr.KindStoreUnavailable {
		t.Fatalf("a commit the metadata store refused: %v", err)
	}
}

func TestQueryRules(t *testing.T) {
	s, _ := newService(&fakeStore{lo: 10, tags: []string{"A", "A", "A"}})
	at := time.UnixMilli(4) // the fake's OffsetForTime: lo + ms%3
	for _, c := range []struct {
		name string
		p    Policy
		at   time.Time
		want int64
		kind mqerr.Kind
	}{
		{"beginning", Beginning, time.Time{}, 10, 0},
		{"end (the next offset)", End, time.Time{}, 13, 0},
		{"by time", Timestamp, at, 11, 0},
		{"by time without a time", Timestamp, time.Time{}, 0, mqerr.KindBadRequest},
		{"an unknown policy", Policy(9), time.Time{}, 0, mqerr.KindBadRequest},
	} {
		got, err := s.Query(topic, 0, c.p, c.at)
		if c.kind != 0 {
			if mqerr.KindOf(err) != c.kind || err == nil {
				t.Errorf("%s: err %v, want %v", c.name, err, c.kind)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}
