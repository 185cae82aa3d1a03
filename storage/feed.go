package storage

import (
	"bytes"
	"sync"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
)

// record is what dispatching needs of one log record. The dispatcher gets
// it from the feed (taken from the sealed bytes while the writer still
// holds them) or, where the feed has nothing, parses it from the log; both
// go through describe, so both give the same answer for the same bytes.
type record struct {
	topic string
	queue int32
	size  int32
	phys  int64
	qoff  int64
	store int64
	tag   int64  // consume-queue tag hash
	id    uint64 // index key of the message id, if hasID
	// The index keys of KEYS: keys[k0:k1] of the arena the record came
	// with.
	k0, k1 int32
	kind   uint8
	hasID  bool
}

const (
	recData        = iota
	recControl     // a control record that dispatches nothing
	recDeleteTopic // a control record that deletes its topic's queues
)

// topicKeys holds the index key prefixes (keyPrefix) of the last topic
// described: hashing them for every record took 0.8 % of
// BenchmarkAppendAsync's CPU.
type topicKeys struct {
	topic   string
	id, key uint64
	set     bool
}

// of returns topic's prefixes for message ids and for KEYS.
func (c *topicKeys) of(topic string) (id, key uint64) {
	if !c.set || c.topic != topic {
		*c = topicKeys{topic, keyPrefix(keyKindID, topic), keyPrefix(keyKindKey, topic), true}
	}
	return c.id, c.key
}

// describe fills r from v, whose topic is topic, appending the hashes of
// its KEYS to keys; tk caches the topic's key prefixes.
func describe(v *message.View, topic string, keys []uint64, tk *topicKeys) (record, []uint64) {
	r := record{topic: topic, queue: v.QueueID, size: v.Size, phys: v.PhysOffset, qoff: v.QueueOffset, store: v.StoreTime}
	if v.Flags&message.FlagControl != 0 {
		r.kind = recControl
		if string(v.Prop(ctrlProp)) == ctrlDeleteTopic {
			r.kind = recDeleteTopic
		}
		return r, keys
	}
	r.tag = message.TagHashBytes(v.Prop(message.PropTags))
	idPrefix, prefix := tk.of(topic)
	if id := v.Prop(message.PropUniqKey); len(id) > 0 {
		r.id, r.hasID = message.FNV64a(idPrefix, id), true
	}
	r.k0 = int32(len(keys))
	for kv := v.Prop(message.PropKeys); len(kv) > 0; {
		kv = bytes.TrimLeft(kv, " ")
		i := bytes.IndexByte(kv, ' ')
		if i < 0 {
			i = len(kv)
		}
		if i > 0 {
			keys = append(keys, message.FNV64a(prefix, kv[:i]))
		}
		kv = kv[i:]
	}
	r.k1 = int32(len(keys))
	return r, keys
}

// feed carries the writer's records to the dispatcher, so that in steady
// state the dispatcher does not read the log back: on a test VM the
// first touch of each record written out a moment earlier cost more than
// everything else the dispatcher does with it.
//
// The log stays the truth. The writer adds records in log order (the role
// is held by one goroutine at a time); the dispatcher takes them up to the
// visible limit only, and reads the log wherever the feed has no record
// for its position: after Open, past records dropped while the feed was
// full, after a failed step, for a record the feed could not describe.
type feed struct {
	mu  sync.Mutex
	in  feedBuf
	max int // records held at most; past it, new ones are dropped
	tk  topicKeys
}

type feedBuf struct {
	recs []record
	keys []uint64
}

// defaultFeedMax bounds the feed at 2.5 MiB of records (80 bytes each)
// plus their keys: tens of milliseconds of appends at full speed.
const defaultFeedMax = 1 << 15

// add is the commit log's OnWrite.
func (f *feed) add(recs []commitlog.Record, ents []commitlog.Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range recs {
		if len(f.in.recs) >= f.max {
			return
		}
		v, err := message.ParseView(recs[i].Data)
		if err != nil || string(v.Topic) != recs[i].Topic || v.PhysOffset != ents[i].PhysOffset {
			continue // the dispatcher reads it from the log
		}
		var r record
		r, f.in.keys = describe(&v, recs[i].Topic, f.in.keys, &f.tk)
		f.in.recs = append(f.in.recs, r)
	}
}

// take swaps the records added so far for b (emptied), which the feed
// fills next. The two buffers are kept for reuse (the feed's bound is
// theirs too).
func (f *feed) take(b feedBuf) feedBuf {
	b.recs, b.keys = b.recs[:0], b.keys[:0]
	f.mu.Lock()
	defer f.mu.Unlock()
	f.in, b = b, f.in
	return b
}
