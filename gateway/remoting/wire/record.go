package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// Magic codes of a stored-message record.
const (
	MagicV1 int32 = -626843481 // 0xDAA320A7: one-byte topic length
	MagicV2 int32 = -626843477 // 0xDAA320AB: two-byte topic length
)

// SYSFLAG bits.
const (
	SysCompressed      int32 = 0x1
	SysMultiTags       int32 = 0x2
	SysTxPrepared      int32 = 0x4
	SysTxCommit        int32 = 0x8
	SysTxRollback      int32 = 0xC
	SysTxMask          int32 = 0xC
	SysBornHostV6      int32 = 0x10
	SysStoreHostV6     int32 = 0x20
	SysCompressionMask int32 = 0x700
)

// Record is a stored message as classic consumers read it.
type Record struct {
	QueueID          int32
	Flag             int32
	QueueOffset      int64
	PhysOffset       int64
	SysFlag          int32
	BornTime         int64
	BornHost         netip.AddrPort
	StoreTime        int64
	StoreHost        netip.AddrPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	Body             []byte
	Topic            string
	// Properties is the property string (see ParseProperties).
	Properties string
}

func hostLen(a netip.AddrPort) int {
	if a.Addr().Is4() || !a.Addr().IsValid() {
		return 8
	}
	return 20
}

// EncodedLen is the size of r's record.
func EncodedLen(r *Record) int {
	tl := 1
	if len(r.Topic) > 127 {
		tl = 2
	}
	return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + hostLen(r.BornHost) + 8 + hostLen(r.StoreHost) + 4 + 8 +
		4 + len(r.Body) + tl + len(r.Topic) + 2 + len(r.Properties)
}

// BodyCRC is the record's BODYCRC of body.
func BodyCRC(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

func appendHost(dst []byte, a netip.AddrPort) []byte {
	ad := a.Addr()
	switch {
	case ad.Is4():
		b := ad.As4()
		dst = append(dst, b[:]...)
	case ad.IsValid():
		b := ad.As16()
		dst = append(dst, b[:]...)
	default:
		dst = append(dst, 0, 0, 0, 0)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(a.Port()))
}

// AppendRecord appends r's record. The host bits of SYSFLAG follow the
// hosts' address families; the magic follows the topic length.
func AppendRecord(dst []byte, r *Record) ([]byte, error) {
	if len(r.Topic) > 1<<15-1 {
		return dst, malformed("topic of %d bytes", len(r.Topic))
	}
	if len(r.Properties) > MaxPropertiesLen {
		return dst, malformed("property string of %d bytes exceeds %d", len(r.Properties), MaxPropertiesLen)
	}
	sys := r.SysFlag &^ (SysBornHostV6 | SysStoreHostV6)
	if hostLen(r.BornHost) == 20 {
		sys |= SysBornHostV6
	}
	if hostLen(r.StoreHost) == 20 {
		sys |= SysStoreHostV6
	}
	magic := MagicV1
	if len(r.Topic) > 127 {
		magic = MagicV2
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(EncodedLen(r)))
	dst = be.AppendUint32(dst, uint32(magic))
	dst = be.AppendUint32(dst, uint32(BodyCRC(r.Body)))
	dst = be.AppendUint32(dst, uint32(r.QueueID))
	dst = be.AppendUint32(dst, uint32(r.Flag))
	dst = be.AppendUint64(dst, uint64(r.QueueOffset))
	dst = be.AppendUint64(dst, uint64(r.PhysOffset))
	dst = be.AppendUint32(dst, uint32(sys))
	dst = be.AppendUint64(dst, uint64(r.BornTime))
	dst = appendHost(dst, r.BornHost)
	dst = be.AppendUint64(dst, uint64(r.StoreTime))
	dst = appendHost(dst, r.StoreHost)
	dst = be.AppendUint32(dst, uint32(r.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(r.PreparedTxOffset))
	dst = be.AppendUint32(dst, uint32(len(r.Body)))
	dst = append(dst, r.Body...)
	if magic == MagicV1 {
		dst = append(dst, byte(len(r.Topic)))
	} else {
		dst = be.AppendUint16(dst, uint16(len(r.Topic)))
	}
	dst = append(dst, r.Topic...)
	dst = be.AppendUint16(dst, uint16(len(r.Properties)))
	dst = append(dst, r.Properties...)
	return dst, nil
}

type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.p {
		r.err = malformed("record needs %d bytes at %d, %d left", n, r.p, len(r.b)-r.p)
		return nil
	}
	out := r.b[r.p : r.p+n]
	r.p += n
	return out
}

func (r *reader) u32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) u64() uint64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (r *reader) u16() uint16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func (r *reader) host(v6 bool) netip.AddrPort {
	n := 4
	if v6 {
		n = 16
	}
	b := r.take(n)
	port := r.u32()
	if r.err != nil {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port))
}

// DecodeRecords parses a body of concatenated records, checking each
// TOTALSIZE against the fields it holds.
func DecodeRecords(body []byte) ([]Record, error) {
	var out []Record
	for p := 0; p < len(body); {
		if len(body)-p < 4 {
			return out, malformed("%d trailing bytes", len(body)-p)
		}
		size := int(int32(binary.BigEndian.Uint32(body[p:])))
		if size < 4 || size > len(body)-p {
			return out, malformed("record size %d at %d, %d bytes left", size, p, len(body)-p)
		}
		r, err := decodeRecord(body[p : p+size])
		if err != nil {
			return out, err
		}
		out = append(out, r)
		p += size
	}
	return out, nil
}

func decodeRecord(b []byte) (Record, error) {
	rd := &reader{b: b}
	var r Record
	rd.u32() // size, checked by the caller
	magic := int32(rd.u32())
	if rd.err == nil && magic != MagicV1 && magic != MagicV2 {
		return r, malformed("bad magic %#x", uint32(magic))
	}
	crc := int32(rd.u32())
	r.QueueID = int32(rd.u32())
	r.Flag = int32(rd.u32())
	r.QueueOffset = int64(rd.u64())
	r.PhysOffset = int64(rd.u64())
	r.SysFlag = int32(rd.u32())
	r.BornTime = int64(rd.u64())
	r.BornHost = rd.host(r.SysFlag&SysBornHostV6 != 0)
	r.StoreTime = int64(rd.u64())
	r.StoreHost = rd.host(r.SysFlag&SysStoreHostV6 != 0)
	r.ReconsumeTimes = int32(rd.u32())
	r.PreparedTxOffset = int64(rd.u64())
	r.Body = rd.take(int(int32(rd.u32())))
	tl := 0
	if magic == MagicV1 {
		if b := rd.take(1); b != nil {
			tl = int(b[0])
		}
	} else {
		tl = int(int16(rd.u16()))
	}
	r.Topic = string(rd.take(tl))
	r.Properties = string(rd.take(int(int16(rd.u16()))))
	if rd.err != nil {
		return r, rd.err
	}
	if rd.p != len(b) {
		return r, malformed("record size %d but its fields end at %d", len(b), rd.p)
	}
	if crc != BodyCRC(r.Body) {
		return r, malformed("body CRC %d, want %d", crc, BodyCRC(r.Body))
	}
	return r, nil
}
