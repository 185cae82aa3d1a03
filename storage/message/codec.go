package message

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unsafe"
)

// Version is the record format version written by Encode.
const Version = 1

const (
	magicPrefix = uint32('M') | uint32('Q')<<8 | uint32('G')<<16
	magicV1     = magicPrefix | uint32(Version)<<24

	offSize      = 0
	offMagic     = 4
	offCRC       = 8
	offPhys      = 12
	offQueueOff  = 20
	offStoreTime = 28
	offQueueID   = 36
	offFlags     = 40
	offBornTime  = 44
	offVar       = 52

	// MinSize is the size of a record with every variable field empty.
	MinSize = offVar + 2 + 2 + 2 + 2 + 4
	// MaxFieldLen bounds each length-prefixed string.
	MaxFieldLen = 1<<16 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by the codec.
var (
	// ErrCorrupt: the bytes are not a valid record (bad magic, lengths or CRC).
	ErrCorrupt = errors.New("message: corrupt record")
	// ErrShort: the buffer ends before the record does.
	ErrShort = errors.New("message: short buffer")
	// ErrInvalid: the message cannot be encoded (a field too long, duplicate property).
	ErrInvalid = errors.New("message: invalid message")
)

// EncodedSize returns the size of m's record.
func EncodedSize(m *Message) (int, error) {
	if len(m.Topic) == 0 || len(m.Topic) > MaxFieldLen || len(m.BornHost) > MaxFieldLen || len(m.StoreHost) > MaxFieldLen {
		return 0, fmt.Errorf("%w: topic empty or a string field longer than %d", ErrInvalid, MaxFieldLen)
	}
	if len(m.Properties) > MaxFieldLen {
		return 0, fmt.Errorf("%w: %d properties", ErrInvalid, len(m.Properties))
	}
	n := MinSize + len(m.Topic) + len(m.BornHost) + len(m.StoreHost) + len(m.Body)
	for i, p := range m.Properties {
		if len(p.Key) == 0 || len(p.Key) > MaxFieldLen || len(p.Value) > MaxFieldLen {
			return 0, fmt.Errorf("%w: property %q: empty key or longer than %d", ErrInvalid, p.Key, MaxFieldLen)
		}
		if i > 0 && m.Properties[i-1].Key >= p.Key {
			return 0, fmt.Errorf("%w: properties not sorted or duplicated at %q (use Message.Set)", ErrInvalid, p.Key)
		}
		n += 4 + len(p.Key) + len(p.Value)
	}
	if uint64(n) > 1<<31-1 {
		return 0, fmt.Errorf("%w: record of %d bytes", ErrInvalid, n)
	}
	return n, nil
}

// Encode appends m's record to dst with the store-assigned fields zero and
// returns the extended slice and the partial CRC that Seal completes.
func Encode(dst []byte, m *Message) ([]byte, uint32, error) {
	size, err := EncodedSize(m)
	if err != nil {
		return dst, 0, err
	}
	start := len(dst)
	if cap(dst)-start < size {
		nd := make([]byte, start, start+size)
		copy(nd, dst)
		dst = nd
	}
	b := dst[start : start+size]
	le := binary.LittleEndian
	le.PutUint32(b[offSize:], uint32(size))
	le.PutUint32(b[offMagic:], magicV1)
	le.PutUint32(b[offCRC:], 0)
	clear(b[offPhys:offQueueID])
	le.PutUint32(b[offQueueID:], uint32(m.QueueID))
	le.PutUint32(b[offFlags:], m.Flags)
	le.PutUint64(b[offBornTime:], uint64(m.BornTime))
	p := offVar
	p = putStr(b, p, m.Topic)
	p = putStr(b, p, m.BornHost)
	p = putStr(b, p, m.StoreHost)
	le.PutUint16(b[p:], uint16(len(m.Properties)))
	p += 2
	for _, kv := range m.Properties {
		p = putStr(b, p, kv.Key)
		p = putStr(b, p, kv.Value)
	}
	le.PutUint32(b[p:], uint32(len(m.Body)))
	p += 4
	copy(b[p:], m.Body)
	crc := crc32.Update(0, castagnoli, b[:offCRC])
	crc = crc32.Update(crc, castagnoli, b[offQueueID:])
	return dst[:start+size], crc, nil
}

func putStr(b []byte, p int, s string) int {
	binary.LittleEndian.PutUint16(b[p:], uint16(len(s)))
	p += 2
	return p + copy(b[p:], s)
}

// Seal writes the store-assigned fields into an encoded record and
// completes its CRC from partial (as returned by Encode).
func Seal(rec []byte, partial uint32, phys, queueOffset, storeTime int64) {
	le := binary.LittleEndian
	le.PutUint64(rec[offPhys:], uint64(phys))
	le.PutUint64(rec[offQueueOff:], uint64(queueOffset))
	le.PutUint64(rec[offStoreTime:], uint64(storeTime))
	le.PutUint32(rec[offCRC:], crc32.Update(partial, castagnoli, rec[offPhys:offQueueID]))
}

// Header is the fixed part of a record.
type Header struct {
	Size        int32
	Version     uint8
	CRC         uint32
	PhysOffset  int64
	QueueOffset int64
	StoreTime   int64
	QueueID     int32
	Flags       uint32
	BornTime    int64
}

// PeekSize returns the size field at the start of b and checks the
// magic, without verifying the CRC. maxSize bounds acceptable sizes.
func PeekSize(b []byte, maxSize int) (int, error) {
	if len(b) < offCRC {
		return 0, ErrShort
	}
	size := int(binary.LittleEndian.Uint32(b[offSize:]))
	magic := binary.LittleEndian.Uint32(b[offMagic:])
	if magic != magicV1 {
		return 0, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, magic)
	}
	if size < MinSize || size > maxSize {
		return 0, fmt.Errorf("%w: size %d outside [%d, %d]", ErrCorrupt, size, MinSize, maxSize)
	}
	return size, nil
}

// Verify checks that b starts with a complete valid record no larger than
// maxSize, and returns its size. It does not allocate.
func Verify(b []byte, maxSize int) (int, error) {
	r, err := checked(b, maxSize)
	if err != nil {
		return 0, err
	}
	if _, err := parse(r, nil); err != nil {
		return 0, err
	}
	return len(r), nil
}

// checked returns the record at the start of b after checking its size,
// magic and CRC (not its inner lengths: parse does).
func checked(b []byte, maxSize int) ([]byte, error) {
	size, err := PeekSize(b, maxSize)
	if err != nil {
		return nil, err
	}
	if len(b) < size {
		return nil, ErrShort
	}
	r := b[:size]
	crc := crc32.Update(0, castagnoli, r[:offCRC])
	crc = crc32.Update(crc, castagnoli, r[offQueueID:])
	crc = crc32.Update(crc, castagnoli, r[offPhys:offQueueID])
	if want := binary.LittleEndian.Uint32(r[offCRC:]); crc != want {
		return nil, fmt.Errorf("%w: crc %#x, want %#x", ErrCorrupt, crc, want)
	}
	return r, nil
}

// ParseHeader returns the fixed fields of a record (no CRC check).
func ParseHeader(b []byte) (Header, error) {
	if len(b) < offVar {
		return Header{}, ErrShort
	}
	le := binary.LittleEndian
	return Header{
		Size:        int32(le.Uint32(b[offSize:])),
		Version:     b[offMagic+3],
		CRC:         le.Uint32(b[offCRC:]),
		PhysOffset:  int64(le.Uint64(b[offPhys:])),
		QueueOffset: int64(le.Uint64(b[offQueueOff:])),
		StoreTime:   int64(le.Uint64(b[offStoreTime:])),
		QueueID:     int32(le.Uint32(b[offQueueID:])),
		Flags:       le.Uint32(b[offFlags:]),
		BornTime:    int64(le.Uint64(b[offBornTime:])),
	}, nil
}

// View gives allocation-free access to the variable fields of a record
// that has been verified (or that the store itself wrote).
type View struct {
	Header
	Topic []byte
	props []byte // property section, after the count
	nprop int
	Body  []byte
}

// Prop returns the value of property key, or nil.
func (v *View) Prop(key string) []byte {
	p := v.props
	for i := 0; i < v.nprop; i++ {
		kl := int(binary.LittleEndian.Uint16(p))
		k := p[2 : 2+kl]
		p = p[2+kl:]
		vl := int(binary.LittleEndian.Uint16(p))
		val := p[2 : 2+vl]
		p = p[2+vl:]
		if string(k) == key {
			return val
		}
	}
	return nil
}

// ParseView parses a record's variable fields without verifying the CRC.
func ParseView(b []byte) (View, error) {
	var v View
	if _, err := parse(b, &v); err != nil {
		return View{}, err
	}
	return v, nil
}

// parse validates the structure of record r (len(r) must be >= its size).
func parse(r []byte, v *View) (int, error) {
	if len(r) < MinSize {
		return 0, ErrShort
	}
	le := binary.LittleEndian
	size := int(le.Uint32(r[offSize:]))
	if size < MinSize || size > len(r) {
		return 0, fmt.Errorf("%w: size %d", ErrCorrupt, size)
	}
	r = r[:size]
	p := offVar
	str := func() ([]byte, bool) {
		if p+2 > len(r) {
			return nil, false
		}
		n := int(le.Uint16(r[p:]))
		if p+2+n > len(r) {
			return nil, false
		}
		s := r[p+2 : p+2+n]
		p += 2 + n
		return s, true
	}
	topic, ok := str()
	if !ok || len(topic) == 0 {
		return 0, fmt.Errorf("%w: topic", ErrCorrupt)
	}
	if _, ok := str(); !ok {
		return 0, fmt.Errorf("%w: born host", ErrCorrupt)
	}
	if _, ok := str(); !ok {
		return 0, fmt.Errorf("%w: store host", ErrCorrupt)
	}
	if p+2 > len(r) {
		return 0, fmt.Errorf("%w: property count", ErrCorrupt)
	}
	nprop := int(le.Uint16(r[p:]))
	p += 2
	propStart := p
	var prev []byte
	for i := 0; i < nprop; i++ {
		k, ok := str()
		if !ok || len(k) == 0 || (i > 0 && string(prev) >= string(k)) {
			return 0, fmt.Errorf("%w: property %d", ErrCorrupt, i)
		}
		prev = k
		if _, ok := str(); !ok {
			return 0, fmt.Errorf("%w: property %d value", ErrCorrupt, i)
		}
	}
	propEnd := p
	if p+4 > len(r) {
		return 0, fmt.Errorf("%w: body length", ErrCorrupt)
	}
	bl := int(le.Uint32(r[p:]))
	p += 4
	if bl != len(r)-p {
		return 0, fmt.Errorf("%w: body length %d, record has %d", ErrCorrupt, bl, len(r)-p)
	}
	if v != nil {
		h, _ := ParseHeader(r)
		v.Header = h
		v.Topic = topic
		v.props = r[propStart:propEnd]
		v.nprop = nprop
		v.Body = r[p:len(r):len(r)]
	}
	return size, nil
}

// Decode verifies the record at the start of b and decodes it. The
// returned message aliases b: Body and every string field point into it
// (nothing is copied), so b must be owned by the caller and never be
// modified afterwards (other than through Body, which is disjoint from the
// strings and capacity-limited).
func Decode(b []byte, maxSize int) (*Message, error) {
	r, err := checked(b, maxSize)
	if err != nil {
		return nil, err
	}
	size := len(r)
	le := binary.LittleEndian
	var v View
	if _, err := parse(r, &v); err != nil {
		return nil, err
	}
	h := v.Header
	m := &Message{
		QueueID: h.QueueID, Flags: h.Flags, BornTime: h.BornTime, StoreTime: h.StoreTime,
		QueueOffset: h.QueueOffset, PhysOffset: h.PhysOffset, Size: int32(size),
	}
	// One string over the variable header; substrings share it.
	varEnd := size - len(v.Body) - 4
	all := unsafe.String(&r[offVar], varEnd-offVar)
	p := 0
	str := func() string {
		n := int(le.Uint16(r[offVar+p:]))
		s := all[p+2 : p+2+n]
		p += 2 + n
		return s
	}
	m.Topic = str()
	m.BornHost = str()
	m.StoreHost = str()
	n := int(le.Uint16(r[offVar+p:]))
	p += 2
	if n > 0 {
		m.Properties = make([]Property, n)
		for i := range m.Properties {
			m.Properties[i].Key = str()
			m.Properties[i].Value = str()
		}
	}
	m.Body = v.Body
	return m, nil
}
