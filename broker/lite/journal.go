package lite

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// JournalTopic is the system topic acknowledgements that move a group's
// position on a lite topic are appended to.
const JournalTopic = "rmq_sys_lite_journal"

// ackRecord says that group has acknowledged every message of lite topic
// lite of parent below parent queue offset next.
type ackRecord struct {
	group, parent, lite string
	next                int64
}

// journal record layout:
//
//	version u8 (=1) | group len u8 | group | parent len u8 | parent |
//	lite len u8 | lite | next i64 BE
const journalVersion = 1

var errJournal = errors.New("lite journal record")

func (r ackRecord) encode() ([]byte, error) {
	if len(r.group) > 255 || len(r.parent) > 255 || len(r.lite) > 255 {
		return nil, fmt.Errorf("%w: a name is longer than 255 bytes", errJournal)
	}
	b := make([]byte, 0, 1+3+len(r.group)+len(r.parent)+len(r.lite)+8)
	b = append(b, journalVersion)
	for _, s := range []string{r.group, r.parent, r.lite} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(r.next)), nil
}

func decodeAck(b []byte) (ackRecord, error) {
	var r ackRecord
	if len(b) < 1 || b[0] != journalVersion {
		return r, fmt.Errorf("%w: unknown version", errJournal)
	}
	b = b[1:]
	var fields [3]string
	for i := range fields {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return r, fmt.Errorf("%w: truncated", errJournal)
		}
		n := int(b[0])
		fields[i] = string(b[1 : 1+n])
		b = b[1+n:]
	}
	if len(b) != 8 {
		return r, fmt.Errorf("%w: %d bytes where the offset should be", errJournal, len(b))
	}
	r.group, r.parent, r.lite = fields[0], fields[1], fields[2]
	r.next = int64(binary.BigEndian.Uint64(b))
	if r.next < 0 || r.group == "" || r.parent == "" || r.lite == "" {
		return ackRecord{}, fmt.Errorf("%w: empty name or negative offset", errJournal)
	}
	return r, nil
}
