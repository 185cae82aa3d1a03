package pop

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/broker/keyring"
	"github.com/mqgate/mqgate/storage"
)

// loadCodec loads the receipt-handle key ring, creating it on first
// start. Losing it invalidates outstanding handles (the messages are then
// simply redelivered).
func loadCodec(b Blobs) (*HandleCodec, error) {
	r, err := LoadKeyRing(b, true)
	if err != nil {
		return nil, err
	}
	return NewRingCodec(r)
}

// LoadKeyRing reads the receipt-handle key ring (KeyBlob). The blob of an
// older version (incarnation u32 and one key) reads as a ring of that key,
// its id the incarnation. A missing blob is created when create is set.
func LoadKeyRing(b Blobs, create bool) (keyring.Ring, error) {
	data, ok, err := b.LoadBlob(keyBlob)
	if err != nil {
		return nil, fmt.Errorf("receipt-handle key: %w", err)
	}
	if !ok {
		if !create {
			return nil, errors.New("receipt-handle key: none")
		}
		k, err := keyring.NewKey(time.Now())
		if err != nil {
			return nil, err
		}
		r := keyring.Ring{k}
		if err := b.SaveBlob(keyBlob, r.Encode()); err != nil {
			return nil, fmt.Errorf("saving the receipt-handle key: %w", err)
		}
		return r, nil
	}
	if keyring.IsRing(data) {
		r, err := keyring.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("receipt-handle key: %w", err)
		}
		return r, nil
	}
	if len(data) < 20 {
		return nil, fmt.Errorf("receipt-handle key blob is %d bytes (damaged)", len(data))
	}
	return keyring.Ring{{ID: binary.BigEndian.Uint32(data[:4]), Secret: data[4:]}}, nil
}

// Snapshot layout (the blob store frames it with a checksum):
//
//	"MQPS" | version u8 (=1) | logPos varint | journalOffset varint
//	nsubs uvarint, per sub: group str | topic str | rr varint | nqueues uvarint
//	  per queue: id varint | next varint | nflights uvarint
//	    per flight: offset | phys | size | epoch | gen | visibleAt | flags u8 |
//	                msgGroup str | client str | renewFrom | renewN
//
// logPos is the log position read when the snapshot started, lowered to
// the start of any record whose change was not yet settled in memory (see
// pending.go): every journal record below it is reflected; records at or
// above it are replayed. Subscriptions made before their topic's last
// deletion record are left out (undeletedSubs), and recovery drops those
// of a topic deleted at or past logPos, and the journal records below a
// topic's last deletion (recover).
var snapMagic = []byte("MQPS")

const snapVersion = 1

func (s *Service) snapshotLoop(ctx context.Context) {
	t := s.clk.NewTimer(s.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := s.snapshot(); err != nil {
			s.log.Warn("pop: state snapshot failed (the journal still has everything)", "err", err)
		}
		t.Reset(s.cfg.SnapshotInterval)
	}
}

// snapshot persists the whole state so a restart replays only the journal
// written after it.
func (s *Service) snapshot() error {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	logPos, jnext := s.snapshotFloor()
	if s.cfg.SnapshotOK != nil && !s.cfg.SnapshotOK() {
		// Read after the positions: a member that still led then had
		// applied none of another leader's records below them.
		return nil
	}
	subs, err := s.undeletedSubs()
	if err != nil {
		return err
	}
	return s.blobs.SaveBlob(snapshotBlob, encodeSnapshot(logPos, jnext, subs))
}

// undeletedSubs returns the subscriptions a snapshot at logPos may write:
// not those whose topic was deleted after they were made. A deletion is
// in the log before the subscriptions are dropped from memory, so one
// below logPos may not have dropped them yet; logPos is at most the
// store's dispatched position (snapshotFloor), so LastDeletion knows
// every deletion below it, and every sub that predates its topic's last
// deletion is left out. Deletions at or past logPos are recovery's to
// honour.
func (s *Service) undeletedSubs() ([]*sub, error) {
	all := s.allSubs()
	out := all[:0]
	for _, sb := range all {
		del, err := s.store.LastDeletion(sb.topic)
		if err != nil {
			return nil, fmt.Errorf("looking up deletions of topic %s: %w", sb.topic, err)
		}
		if del < sb.since {
			out = append(out, sb)
		}
	}
	return out, nil
}

// encodeSnapshot writes the state decodeSnapshot reads; it takes each
// sub's lock while writing that sub.
func encodeSnapshot(logPos, jnext int64, subs []*sub) []byte {
	b := append([]byte(nil), snapMagic...)
	b = append(b, snapVersion)
	b = binary.AppendVarint(b, logPos)
	b = binary.AppendVarint(b, jnext)
	b = binary.AppendUvarint(b, uint64(len(subs)))
	for _, sb := range subs {
		sb.mu.Lock()
		b = putStr(b, sb.group)
		b = putStr(b, sb.topic)
		b = binary.AppendVarint(b, int64(sb.rr))
		b = binary.AppendUvarint(b, uint64(len(sb.queues)))
		for id, q := range sb.queues {
			b = binary.AppendVarint(b, int64(id))
			b = binary.AppendVarint(b, q.next)
			b = binary.AppendUvarint(b, uint64(len(q.flights)))
			for _, f := range q.flights {
				st := f.snapState()
				b = binary.AppendVarint(b, f.offset)
				b = binary.AppendVarint(b, f.phys)
				b = binary.AppendVarint(b, int64(f.size))
				b = binary.AppendUvarint(b, uint64(st.epoch))
				b = binary.AppendUvarint(b, uint64(st.gen))
				b = binary.AppendVarint(b, st.visibleAt)
				b = append(b, st.flags&^flagMoving)
				b = putStr(b, f.msgGroup)
				b = putStr(b, st.client)
				b = binary.AppendVarint(b, st.renewFrom)
				b = append(b, st.renewN)
			}
		}
		sb.mu.Unlock()
	}
	return b
}

type snapshotState struct {
	logPos, journalOffset int64
	subs                  []*sub
}

func decodeSnapshot(b []byte) (snapshotState, error) {
	var st snapshotState
	if len(b) < 5 || string(b[:4]) != string(snapMagic) {
		return st, fmt.Errorf("%w: pop snapshot magic", errJournal)
	}
	if b[4] != snapVersion {
		return st, fmt.Errorf("%w: pop snapshot version %d", errJournal, b[4])
	}
	r := &reader{b: b[5:]}
	st.logPos = r.varint("log position")
	st.journalOffset = r.varint("journal offset")
	n := r.count("subscription count", 4)
	for i := 0; i < n && r.err == nil; i++ {
		sb := newSub(r.str("group"), r.str("topic"))
		sb.rr = r.i32("round robin")
		nq := r.count("queue count", 3)
		for j := 0; j < nq && r.err == nil; j++ {
			qid := r.i32("queue")
			q := sb.q(qid)
			q.next = r.varint("next")
			nf := r.count("flight count", 11)
			for k := 0; k < nf && r.err == nil; k++ {
				f := &flight{hidx: -1}
				f.offset = r.varint("offset")
				f.phys = r.varint("phys")
				f.size = r.i32("size")
				f.epoch = uint32(r.uvarint("epoch"))
				f.gen = uint32(r.uvarint("gen"))
				f.visibleAt = r.varint("visible-at")
				f.flags = r.byte1("flags") &^ flagMoving
				f.msgGroup = r.str("message group")
				f.client = r.str("client")
				f.renewFrom = r.varint("renew start")
				f.renewN = r.byte1("renewals")
				if r.err == nil {
					if _, dup := q.flights[f.offset]; dup {
						r.fail("duplicate flight")
						break
					}
					f.queue = qid
					sb.add(f)
				}
			}
		}
		st.subs = append(st.subs, sb)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return st, r.err
}

// recover rebuilds the state: snapshot, then the journal after it.
func (s *Service) recover(ctx context.Context) error {
	t0 := time.Now()
	var from, logPos int64
	var snap []*sub
	data, ok, err := s.blobs.LoadBlob(snapshotBlob)
	if err != nil {
		return fmt.Errorf("pop state snapshot: %w", err)
	}
	if ok {
		st, err := decodeSnapshot(data)
		if err != nil {
			return fmt.Errorf("pop state snapshot: %w", err)
		}
		snap = st.subs
		from, logPos = st.journalOffset, st.logPos
	}
	_, written := s.store.LogRange()
	if err := s.store.WaitDispatched(ctx, written); err != nil {
		return fmt.Errorf("waiting for the store to dispatch its log: %w", err)
	}
	// A topic deleted (and maybe made again) since: what the snapshot and
	// the journal say of it before its last deletion record is dropped.
	dels := map[string]int64{}
	deleted := func(topic string) (int64, error) {
		if d, ok := dels[topic]; ok {
			return d, nil
		}
		d, err := s.store.LastDeletion(topic)
		if err != nil {
			return 0, fmt.Errorf("looking up deletions of topic %s: %w", topic, err)
		}
		dels[topic] = d
		return d, nil
	}
	dropped := 0
	for _, sb := range snap {
		d, err := deleted(sb.topic)
		if err != nil {
			return err
		}
		if d >= logPos {
			dropped++
			continue
		}
		s.subs[subKey{sb.group, sb.topic}] = sb
	}
	if min, _ := s.store.QueueRange(JournalTopic, 0); from < min {
		if ok {
			s.log.Warn("pop: journal records after the snapshot were removed by retention; state may be stale",
				"snapshot_offset", from, "journal_min", min)
		}
		from = min
	}
	replayed := 0
	for {
		ents, err := s.store.ReadQueue(JournalTopic, 0, from, 512)
		if errors.Is(err, storage.ErrOffsetMoved) {
			from, _ = s.store.QueueRange(JournalTopic, 0)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the pop journal: %w", err)
		}
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			from = e.QueueOffset + 1
			if e.PhysOffset < logPos {
				continue
			}
			m, err := s.store.ReadMessage(e.PhysOffset, e.Size)
			if err != nil {
				return fmt.Errorf("reading pop journal record %d: %w", e.QueueOffset, err)
			}
			rec, err := decodeRecord(m.Body)
			if err != nil {
				s.log.Warn("pop: skipping an undecodable journal record", "offset", e.QueueOffset, "err", err)
				continue
			}
			d, err := deleted(rec.topic)
			if err != nil {
				return err
			}
			if e.PhysOffset < d {
				dropped++
				continue
			}
			rec.dropDeleted(d)
			s.apply(&rec)
			replayed++
		}
	}
	now := s.now()
	for _, sb := range s.subs {
		sb.since = written
		sb.mu.Lock()
		for g, list := range sb.held {
			if sb.active[g] == 0 && len(list) > 0 {
				sb.unhold(list[0], now)
			}
		}
		s.scheduleLocked(sb)
		sb.mu.Unlock()
	}
	s.log.Info("pop: state recovered", "snapshot", ok, "replayed_records", replayed, "subscriptions", len(s.subs),
		"dropped_deleted", dropped, "elapsed", time.Since(t0))
	return nil
}

// dropDeleted takes out of a delivery record recorded after its topic's
// deletion record at d the messages it read below d (of the deleted topic:
// a receive that raced the deletion), and then its positions too, which
// are the deleted topic's.
func (r *jrecord) dropDeleted(d int64) {
	if r.op != opDeliver || d < 0 {
		return
	}
	kept := r.entries[:0]
	for _, e := range r.entries {
		if e.phys >= d {
			kept = append(kept, e)
		}
	}
	if len(kept) < len(r.entries) {
		r.nexts = nil
	}
	r.entries = kept
}

// detach removes f from every structure without FIFO follow-up (replay).
func (sb *sub) detach(f *flight) {
	if q := sb.queues[f.queue]; q != nil && q.flights[f.offset] == f {
		delete(q.flights, f.offset)
	}
	if f.hidx >= 0 {
		heap.Remove(&sb.due, f.hidx)
	}
	if f.held() {
		sb.held[f.msgGroup] = removeHeld(sb.held[f.msgGroup], f)
		if len(sb.held[f.msgGroup]) == 0 {
			delete(sb.held, f.msgGroup)
		}
	} else if f.fifo() {
		if sb.active[f.msgGroup]--; sb.active[f.msgGroup] <= 0 {
			delete(sb.active, f.msgGroup)
		}
	}
}

// apply replays one journal record. Replay is idempotent: a record older
// than the state it meets (lower epoch or generation) changes nothing.
func (s *Service) apply(r *jrecord) {
	sb := s.subs[subKey{r.group, r.topic}]
	if sb == nil {
		sb = newSub(r.group, r.topic)
		s.subs[subKey{r.group, r.topic}] = sb
	}
	for _, e := range r.entries {
		q := sb.q(e.queue)
		f := q.flights[e.offset]
		switch r.op {
		case opDeliver:
			if f != nil {
				if e.gen < f.gen || e.gen == f.gen && e.epoch < f.epoch {
					continue
				}
				sb.detach(f)
			}
			sb.add(&flight{queue: e.queue, offset: e.offset, phys: e.phys, size: e.size, epoch: e.epoch, gen: e.gen,
				visibleAt: e.visibleAt, flags: e.flags &^ flagMoving, msgGroup: e.msgGroup, client: e.client, renewFrom: r.at, hidx: -1})
		case opAck, opDone:
			if f != nil && f.gen <= e.gen {
				sb.detach(f)
			}
		case opChange:
			if f != nil && f.gen <= e.gen && !f.held() {
				f.epoch = e.epoch
				f.gen = e.gen
				f.flags = e.flags &^ flagMoving
				if f.flags&flagAutoRenew == 0 {
					f.client = ""
				}
				sb.setDeadline(f, e.visibleAt)
			}
		}
	}
	if r.op == opReset {
		for _, n := range r.nexts {
			sb.resetQueue(n.queue, n.next)
		}
		sb.resetAt = max(sb.resetAt, r.at)
		return
	}
	for _, n := range r.nexts {
		if q := sb.q(n.queue); n.next > q.next {
			q.next = n.next
		}
	}
}
