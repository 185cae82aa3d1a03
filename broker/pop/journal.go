package pop

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// JournalTopic is the system topic POP state changes are appended to. Its
// records are ordinary log records, so they share the log's durability and
// group commit; replaying them from the last snapshot rebuilds the
// in-flight state after a restart.
const JournalTopic = "rmq_sys_pop_journal"

// Journal record body (all integers varint-encoded unless noted):
//
//	version u8 (=1) | op u8 | group str | topic str | at (unix ms)
//	n uvarint, then n entries:
//	  queue, offset, then per op:
//	    opDeliver: epoch, gen, visibleAt, phys, size, flags u8, msgGroup str, client str
//	    opAck:     epoch, gen
//	    opChange:  epoch, gen, visibleAt, flags u8
//	    opDone:    epoch, gen
//	opDeliver and opReset only: m uvarint, then m (queue, next) pairs —
//	the queues' fresh-read positions after this delivery batch, or the
//	positions a reset set (opReset has no entries: it drops every flight
//	of its queues).
//
// str = uvarint length + bytes.
const journalVersion = 1

type op uint8

const (
	opDeliver op = iota + 1 // messages delivered (or held back) with a deadline
	opAck                   // acknowledged: done for this group
	opChange                // new deadline, epoch or flags (ChangeInvisibleDuration, renewal, release)
	opDone                  // moved to the DLQ or forwarded: done for this group
	opReset                 // positions set by an offset reset; the queues' flights dropped
)

// jentry is one message's change in a journal record.
type jentry struct {
	queue     int32
	offset    int64
	epoch     uint32
	gen       uint32
	visibleAt int64
	phys      int64
	size      int32
	flags     uint8
	msgGroup  string
	client    string
}

// Flight flags persisted in the journal and snapshots.
const (
	flagAutoRenew uint8 = 1 << iota
	flagHeld            // FIFO: read but held back behind its message group
	flagFIFO            // delivered by a FIFO group
	// flagMoving (memory only, never persisted): being moved to the DLQ.
	flagMoving uint8 = 1 << 7
)

type jrecord struct {
	op      op
	group   string
	topic   string
	at      int64
	entries []jentry
	nexts   []qnext
}

type qnext struct {
	queue int32
	next  int64
}

func putStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// sizeHint is about the encoded size of r (typical varint lengths), the
// capacity to encode it into without growing the buffer as it goes.
func (r *jrecord) sizeHint() int {
	n := 16 + len(r.group) + len(r.topic) + 8*len(r.nexts)
	switch r.op {
	case opDeliver:
		for i := range r.entries {
			n += 28 + len(r.entries[i].msgGroup) + len(r.entries[i].client)
		}
	case opChange:
		n += 24 * len(r.entries)
	default:
		n += 14 * len(r.entries)
	}
	return n
}

func (r *jrecord) encode(b []byte) []byte {
	b = append(b, journalVersion, byte(r.op))
	b = putStr(b, r.group)
	b = putStr(b, r.topic)
	b = binary.AppendVarint(b, r.at)
	b = binary.AppendUvarint(b, uint64(len(r.entries)))
	for i := range r.entries {
		e := &r.entries[i]
		b = binary.AppendVarint(b, int64(e.queue))
		b = binary.AppendVarint(b, e.offset)
		switch r.op {
		case opDeliver:
			b = binary.AppendUvarint(b, uint64(e.epoch))
			b = binary.AppendUvarint(b, uint64(e.gen))
			b = binary.AppendVarint(b, e.visibleAt)
			b = binary.AppendVarint(b, e.phys)
			b = binary.AppendVarint(b, int64(e.size))
			b = append(b, e.flags)
			b = putStr(b, e.msgGroup)
			b = putStr(b, e.client)
		case opAck:
			b = binary.AppendUvarint(b, uint64(e.epoch))
			b = binary.AppendUvarint(b, uint64(e.gen))
		case opChange:
			b = binary.AppendUvarint(b, uint64(e.epoch))
			b = binary.AppendUvarint(b, uint64(e.gen))
			b = binary.AppendVarint(b, e.visibleAt)
			b = append(b, e.flags)
		case opDone:
			b = binary.AppendUvarint(b, uint64(e.epoch))
			b = binary.AppendUvarint(b, uint64(e.gen))
		}
	}
	if r.op == opDeliver || r.op == opReset {
		b = binary.AppendUvarint(b, uint64(len(r.nexts)))
		for _, n := range r.nexts {
			b = binary.AppendVarint(b, int64(n.queue))
			b = binary.AppendVarint(b, n.next)
		}
	}
	return b
}

var errJournal = errors.New("pop journal record")

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", errJournal, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) str(what string) string {
	n := r.uvarint(what)
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) || n > 1<<16 {
		r.fail(what)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) i32(what string) int32 {
	v := r.varint(what)
	if v < -1<<31 || v > 1<<31-1 {
		r.fail(what)
	}
	return int32(v)
}

// count reads a collection length, bounding it by the bytes left so a
// corrupt length cannot make us allocate without limit.
func (r *reader) count(what string, minSize int) int {
	n := r.uvarint(what)
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/minSize) {
		r.fail(what)
		return 0
	}
	return int(n)
}

func decodeRecord(b []byte) (jrecord, error) {
	r := &reader{b: b}
	var rec jrecord
	if v := r.byte1("version"); r.err == nil && v != journalVersion {
		return rec, fmt.Errorf("%w: unknown version %d", errJournal, v)
	}
	rec.op = op(r.byte1("op"))
	if r.err == nil && (rec.op < opDeliver || rec.op > opReset) {
		return rec, fmt.Errorf("%w: unknown op %d", errJournal, rec.op)
	}
	rec.group = r.str("group")
	rec.topic = r.str("topic")
	rec.at = r.varint("time")
	n := r.count("entry count", 3)
	if r.err == nil {
		rec.entries = make([]jentry, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		e := &rec.entries[i]
		e.queue = r.i32("queue")
		e.offset = r.varint("offset")
		switch rec.op {
		case opDeliver:
			e.epoch = uint32(r.uvarint("epoch"))
			e.gen = uint32(r.uvarint("gen"))
			e.visibleAt = r.varint("visible-at")
			e.phys = r.varint("phys")
			e.size = r.i32("size")
			e.flags = r.byte1("flags")
			e.msgGroup = r.str("message group")
			e.client = r.str("client")
		case opAck:
			e.epoch = uint32(r.uvarint("epoch"))
			e.gen = uint32(r.uvarint("gen"))
		case opChange:
			e.epoch = uint32(r.uvarint("epoch"))
			e.gen = uint32(r.uvarint("gen"))
			e.visibleAt = r.varint("visible-at")
			e.flags = r.byte1("flags")
		case opDone:
			e.epoch = uint32(r.uvarint("epoch"))
			e.gen = uint32(r.uvarint("gen"))
		}
	}
	if rec.op == opDeliver || rec.op == opReset {
		m := r.count("queue count", 2)
		if r.err == nil {
			rec.nexts = make([]qnext, m)
		}
		for i := 0; i < m && r.err == nil; i++ {
			rec.nexts[i] = qnext{queue: r.i32("queue"), next: r.varint("next")}
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return rec, r.err
}
