package wire

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// OffsetMsgID is the offset message id of a record: upper-case hex of the
// store host's address and port (int32) and the commit-log offset — 32
// characters for IPv4, 56 for IPv6.
func OffsetMsgID(store netip.AddrPort, phys int64) string {
	var b []byte
	ad := store.Addr()
	if ad.Is4() || !ad.IsValid() {
		a := ad.As4()
		if !ad.IsValid() {
			a = [4]byte{}
		}
		b = append(b, a[:]...)
	} else {
		a := ad.As16()
		b = append(b, a[:]...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(store.Port()))
	b = binary.BigEndian.AppendUint64(b, uint64(phys))
	return strings.ToUpper(hex.EncodeToString(b))
}

// ParseOffsetMsgID decodes an offset message id (any case).
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return netip.AddrPort{}, 0, malformed("%q is not an offset message id", id)
	}
	n := len(b) - 12
	a, _ := netip.AddrFromSlice(b[:n])
	port := binary.BigEndian.Uint32(b[n:])
	phys := int64(binary.BigEndian.Uint64(b[n+4:]))
	if port > 65535 || phys < 0 {
		return netip.AddrPort{}, 0, malformed("%q is not an offset message id", id)
	}
	return netip.AddrPortFrom(a, uint16(port)), phys, nil
}

// UniqIDs mints unique message ids (UNIQ_KEY) for messages that arrive
// without one, in upstream's 32-character layout: IPv4 (4) + pid (2) +
// a per-process random (4, upstream's class-loader hash) + milliseconds
// since the start of the month (4) + counter (2), upper-case hex.
type UniqIDs struct {
	prefix  [10]byte
	counter atomic.Uint32
	now     func() time.Time
}

// NewUniqIDs returns a generator for this process on host ip.
func NewUniqIDs(ip netip.Addr, pid int, now func() time.Time) *UniqIDs {
	g := &UniqIDs{now: now}
	if g.now == nil {
		g.now = time.Now
	}
	if ip.Is4() {
		a := ip.As4()
		copy(g.prefix[:4], a[:])
	}
	binary.BigEndian.PutUint16(g.prefix[4:], uint16(pid))
	_, _ = rand.Read(g.prefix[6:10])
	return g
}

// Next returns a fresh id.
func (g *UniqIDs) Next() string {
	var b [16]byte
	copy(b[:], g.prefix[:])
	t := g.now()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	binary.BigEndian.PutUint32(b[10:], uint32(t.Sub(start).Milliseconds()))
	binary.BigEndian.PutUint16(b[14:], uint16(g.counter.Add(1)))
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
