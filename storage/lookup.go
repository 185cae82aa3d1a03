package storage

import (
	"errors"

	"github.com/mqgate/mqgate/storage/message"
)

// LookupByID returns the messages of topic whose UNIQ_KEY (client message
// id) is id, newest first, at most max.
func (s *Store) LookupByID(topic, id string, max int) ([]*message.Message, error) {
	h := indexKey(keyKindID, topic, id)
	return s.lookup(h, 0, 1<<62, max, func(m *message.Message) bool { return m.Topic == topic && m.UniqKey() == id })
}

// LookupByKey returns messages of topic carrying key in KEYS and stored in
// [beginMs, endMs], newest first, at most max.
func (s *Store) LookupByKey(topic, key string, beginMs, endMs int64, max int) ([]*message.Message, error) {
	h := indexKey(keyKindKey, topic, key)
	return s.lookup(h, beginMs, endMs, max, func(m *message.Message) bool {
		if m.Topic != topic {
			return false
		}
		for _, k := range m.Keys() {
			if k == key {
				return true
			}
		}
		return false
	})
}

func (s *Store) lookup(h uint64, begin, end int64, max int, match func(*message.Message) bool) ([]*message.Message, error) {
	if max <= 0 {
		return nil, nil
	}
	// Over-fetch a little: hash collisions are filtered below.
	hits, err := s.idx.Lookup(h, begin, end, max+8)
	if err != nil {
		return nil, err
	}
	var out []*message.Message
	logMin := s.log.Min()
	for _, hit := range hits {
		if hit.Phys < logMin {
			continue
		}
		m, err := s.ReadMessage(hit.Phys, hit.Size)
		if errors.Is(err, ErrOffsetMoved) {
			continue
		}
		if err != nil {
			return out, err
		}
		if match(m) {
			out = append(out, m)
			if len(out) == max {
				break
			}
		}
	}
	return out, nil
}
