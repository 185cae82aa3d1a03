package storage

import (
	"testing"

	"github.com/mqgate/mqgate/storage/message"
)

// scanLog returns every record in the log, in order, verified.
func scanLog(t testing.TB, s *Store) []*message.Message {
	t.Helper()
	lo, hi := s.LogRange()
	var out []*message.Message
	buf := make([]byte, 1<<20)
	for pos := lo; pos < hi; {
		n, err := s.log.ReadRange(pos, buf, hi)
		if err != nil {
			t.Fatalf("scan at %d: %v", pos, err)
		}
		p := 0
		for p < n {
			size, err := message.PeekSize(buf[p:n], s.opts.MaxRecordSize)
			if err != nil || p+size > n {
				break
			}
			m, err := message.Decode(append([]byte(nil), buf[p:p+size]...), s.opts.MaxRecordSize)
			if err != nil {
				t.Fatalf("record at %d: %v", pos+int64(p), err)
			}
			if m.PhysOffset != pos+int64(p) {
				t.Fatalf("record at %d claims %d", pos+int64(p), m.PhysOffset)
			}
			out = append(out, m)
			p += size
		}
		if p == 0 {
			t.Fatalf("no record at %d", pos)
		}
		pos += int64(p)
	}
	return out
}

// verifyConsistent checks that the queues and the log agree: every queue
// is dense from its min, every entry reads back as the record of that
// topic/queue/offset, no record is referenced twice, and every data record
// of the log (after the last deletion of its topic) is in its queue.
func verifyConsistent(t testing.TB, s *Store) {
	t.Helper()
	waitAll(t, s)
	seen := map[int64]bool{}
	total := 0
	for _, topic := range s.Topics() {
		for _, q := range s.QueueIDs(topic) {
			lo, hi := s.QueueRange(topic, q)
			prev := int64(-1)
			for off := lo; off < hi; {
				ents, err := s.ReadQueue(topic, q, off, 64)
				if err != nil {
					t.Fatalf("ReadQueue %s/%d@%d: %v", topic, q, off, err)
				}
				if len(ents) == 0 {
					t.Fatalf("queue %s/%d: no entries at %d < %d", topic, q, off, hi)
				}
				for _, e := range ents {
					if e.QueueOffset != off {
						t.Fatalf("queue offset %d at %d", e.QueueOffset, off)
					}
					if e.PhysOffset <= prev || seen[e.PhysOffset] {
						t.Fatalf("queue %s/%d@%d: phys %d duplicated or out of order", topic, q, off, e.PhysOffset)
					}
					prev = e.PhysOffset
					seen[e.PhysOffset] = true
					m, err := s.ReadMessage(e.PhysOffset, e.Size)
					if err != nil {
						t.Fatalf("queue %s/%d@%d: %v", topic, q, off, err)
					}
					if m.Topic != topic || m.QueueID != q || m.QueueOffset != off || m.StoreTime != e.StoreTime ||
						e.TagHash != message.TagHash(m.Tag()) {
						t.Fatalf("queue %s/%d@%d: entry does not match record %+v", topic, q, off, m)
					}
					off++
					total++
				}
			}
		}
	}
	// Every data record after its topic's last deletion is queued.
	recs := scanLog(t, s)
	lastDel := map[string]int{}
	for i, m := range recs {
		if m.Flags&message.FlagControl != 0 {
			lastDel[m.Topic] = i
		}
	}
	for i, m := range recs {
		if m.Flags&message.FlagControl != 0 {
			continue
		}
		if d, ok := lastDel[m.Topic]; ok && i < d {
			continue
		}
		if lo, _ := s.QueueRange(m.Topic, m.QueueID); m.QueueOffset < lo {
			continue
		}
		if !seen[m.PhysOffset] {
			t.Fatalf("record at %d (%s/%d@%d) is in no queue", m.PhysOffset, m.Topic, m.QueueID, m.QueueOffset)
		}
	}
}
