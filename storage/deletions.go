package storage

import (
	"errors"
	"sync"

	"github.com/mqgate/mqgate/storage/message"
)

// deletions remembers, per topic, the log position of its newest deletion
// record: those the dispatcher applied since Open, and what LastDeletion
// found in the index for the others (-1: none).
type deletions struct {
	// mu guards what follows.
	mu  sync.Mutex
	pos map[string]int64
}

// note records a deletion record the dispatcher applied.
func (d *deletions) note(topic string, pos int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pos == nil {
		d.pos = make(map[string]int64)
	}
	if p, ok := d.pos[topic]; !ok || pos > p {
		d.pos[topic] = pos
	}
}

func (d *deletions) get(topic string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pos[topic]
	return p, ok
}

// settle keeps pos (found in the index) unless the dispatcher noted a
// newer deletion meanwhile, and returns what is kept.
func (d *deletions) settle(topic string, pos int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pos == nil {
		d.pos = make(map[string]int64)
	}
	if p, ok := d.pos[topic]; ok && p >= pos {
		return p
	}
	d.pos[topic] = pos
	return pos
}

// LastDeletion returns the log position of the newest deletion record of
// topic (DeleteTopic) that the store has dispatched, or -1 if it has none.
// Services that keep state about a topic in the log (POP's journal) use
// it to tell what they recorded before the topic was deleted from what
// belongs to a topic of the same name created since: a record below the
// position predates the deletion. Deletion records are found through the
// key index, so the answer covers the whole log, whatever was dispatched
// before this Open; a deletion record retention removed may be answered
// from the index without being read back. Answers are kept in memory:
// one index lookup per topic per Open.
func (s *Store) LastDeletion(topic string) (int64, error) {
	if p, ok := s.dels.get(topic); ok {
		return p, nil
	}
	hits, err := s.idx.Lookup(deletionKey(topic), 0, 1<<62, 16)
	if err != nil {
		return -1, err
	}
	found := int64(-1)
	logMin := s.log.Min()
	for _, h := range hits { // newest first
		if h.Phys < logMin {
			// Gone with retention: the 64-bit key of this topic's
			// deletions is all that is left of it.
			found = max(found, h.Phys)
			continue
		}
		m, err := s.ReadMessage(h.Phys, h.Size)
		if errors.Is(err, ErrOffsetMoved) {
			found = max(found, h.Phys)
			continue
		}
		if err != nil {
			return -1, err
		}
		if isDeletion(m, topic) {
			found = max(found, h.Phys)
		}
	}
	return s.dels.settle(topic, found), nil
}

// isDeletion reports whether m is a deletion record of topic.
func isDeletion(m *message.Message, topic string) bool {
	if m.Topic != topic || m.Flags&message.FlagControl == 0 {
		return false
	}
	v, _ := m.Get(ctrlProp)
	return v == ctrlDeleteTopic
}
