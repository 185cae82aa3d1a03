package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/storage/message"
)

// Entry kinds (byte 1 of an entry).
const (
	kindAppend byte = 1 // one commit-log append batch
	kindMeta   byte = 2 // one metadata change (meta.go)
)

const (
	entryVersion   = 1
	appendHeadSize = 2 + 8 + 8 + 8 + 16 + 2 + 4 // version, kind, proposer, seq, store time, geometry, host length, count
	// maxStoreHost bounds the store host an entry carries.
	maxStoreHost = 255
)

// ErrBadEntry: bytes that are not an entry this version reads.
var ErrBadEntry = errors.New("cluster: malformed raft entry")

// appendEntry is a decoded kindAppend entry: the proposer's id and
// sequence number (to answer its waiting Append), the store time and
// store host it fixed, and the messages.
type appendEntry struct {
	proposer  uint64
	seq       uint64
	storeTime int64
	geo       geometry
	storeHost string
	msgs      []*message.Message
}

// geometry is what of a store's configuration decides the bytes and
// offsets an append leaves and whether the store refuses it: members
// whose geometry differs would diverge, so an entry carries its
// proposer's and a member with another one stops instead of applying it.
type geometry struct {
	segmentSize   int64
	maxRecordSize int32
	maxBodySize   int32
}

// entrySize is the bytes msgs take in an append entry; a message the
// entry cannot carry is an error, as encodeAppend would return.
func entrySize(msgs []*message.Message, maxRecord int) (int, error) {
	size := 0
	for _, m := range msgs {
		n, err := message.EncodedSize(m)
		if err != nil {
			return 0, err
		}
		if n > maxRecord {
			return 0, fmt.Errorf("message of %d encoded bytes exceeds %d: %w", n, maxRecord, errTooLarge)
		}
		size += 4 + n
	}
	return size, nil
}

// encodeAppend encodes e. Each message travels as a record of the
// commit log's own format (package message), sealed at offset 0, so
// the entry is CRC-checked record by record.
func encodeAppend(e *appendEntry, maxRecord int) ([]byte, error) {
	if len(e.storeHost) > maxStoreHost {
		return nil, fmt.Errorf("%w: store host of %d bytes", ErrBadEntry, len(e.storeHost))
	}
	size := appendHeadSize + len(e.storeHost)
	for _, m := range e.msgs {
		n, err := message.EncodedSize(m)
		if err != nil {
			return nil, err
		}
		if n > maxRecord {
			return nil, fmt.Errorf("message of %d encoded bytes exceeds %d: %w", n, maxRecord, errTooLarge)
		}
		size += 4 + n
	}
	b := make([]byte, 0, size)
	b = append(b, entryVersion, kindAppend)
	b = binary.BigEndian.AppendUint64(b, e.proposer)
	b = binary.BigEndian.AppendUint64(b, e.seq)
	b = binary.BigEndian.AppendUint64(b, uint64(e.storeTime))
	b = binary.BigEndian.AppendUint64(b, uint64(e.geo.segmentSize))
	b = binary.BigEndian.AppendUint32(b, uint32(e.geo.maxRecordSize))
	b = binary.BigEndian.AppendUint32(b, uint32(e.geo.maxBodySize))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.storeHost)))
	b = append(b, e.storeHost...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.msgs)))
	for _, m := range e.msgs {
		rec, crc, err := message.Encode(nil, m)
		if err != nil {
			return nil, err
		}
		message.Seal(rec, crc, 0, 0, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(len(rec)))
		b = append(b, rec...)
	}
	return b, nil
}

// entryKind returns the kind of an entry's bytes.
func entryKind(b []byte) (byte, error) {
	if len(b) < 2 || b[0] != entryVersion {
		return 0, fmt.Errorf("%w: %d bytes, version %v", ErrBadEntry, len(b), b[:min(len(b), 1)])
	}
	return b[1], nil
}

// maxEntryRecord bounds one record of an entry whatever geometry its
// header names (the raft transport's limit on a message).
const maxEntryRecord = 64 << 20

// decodeAppend decodes a kindAppend entry. Its records are bounded by the
// max record size of the geometry its header names (and by limit): a
// member decodes what the proposer encoded as the proposer did, so a
// geometry that differs from its own is seen whole and refused, never
// taken for bad bytes.
func decodeAppend(b []byte, limit int) (*appendEntry, error) {
	if k, err := entryKind(b); err != nil {
		return nil, err
	} else if k != kindAppend {
		return nil, fmt.Errorf("%w: kind %d is not an append", ErrBadEntry, k)
	}
	if len(b) < appendHeadSize {
		return nil, fmt.Errorf("%w: short append header", ErrBadEntry)
	}
	e := &appendEntry{
		proposer:  binary.BigEndian.Uint64(b[2:]),
		seq:       binary.BigEndian.Uint64(b[10:]),
		storeTime: int64(binary.BigEndian.Uint64(b[18:])),
		geo: geometry{
			segmentSize:   int64(binary.BigEndian.Uint64(b[26:])),
			maxRecordSize: int32(binary.BigEndian.Uint32(b[34:])),
			maxBodySize:   int32(binary.BigEndian.Uint32(b[38:])),
		},
	}
	maxRecord := min(int(e.geo.maxRecordSize), limit)
	hl := int(binary.BigEndian.Uint16(b[42:]))
	p := 44
	if len(b) < p+hl+4 {
		return nil, fmt.Errorf("%w: short store host", ErrBadEntry)
	}
	e.storeHost = string(b[p : p+hl])
	p += hl
	n := binary.BigEndian.Uint32(b[p:])
	p += 4
	if uint64(n) > uint64(len(b)-p)/(4+message.MinSize) {
		return nil, fmt.Errorf("%w: %d messages in %d bytes", ErrBadEntry, n, len(b)-p)
	}
	e.msgs = make([]*message.Message, 0, n)
	for i := range n {
		if len(b)-p < 4 {
			return nil, fmt.Errorf("%w: message %d: short length", ErrBadEntry, i)
		}
		l := int(binary.BigEndian.Uint32(b[p:]))
		p += 4
		if l > len(b)-p {
			return nil, fmt.Errorf("%w: message %d: %d bytes past the end", ErrBadEntry, i, l)
		}
		m, err := message.Decode(b[p:p+l], maxRecord)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrBadEntry, i, err)
		}
		// Decode reports the offsets the record was sealed with (zero);
		// the store assigns them when the entry is applied.
		m.QueueOffset, m.PhysOffset, m.Size, m.StoreTime = 0, 0, 0, 0
		e.msgs = append(e.msgs, m)
		p += l
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadEntry, len(b)-p)
	}
	return e, nil
}
